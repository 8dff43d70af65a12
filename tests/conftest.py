"""Shared fixtures: a real local embedder, a real embedded Chroma and a real Chroma server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
import uvicorn

from brain.shells.api import create_app
from brain.config import Settings
from brain.app.core import open_store
from brain.providers.embeddings import LocalMiniLMEmbedder
from tests.ollama_stub import DEFAULT_CHAT_MODELS, OllamaStub

# the session fails when a test reads anything beside the repository (see tests/outside_reads.py)
from tests.outside_reads import pytest_sessionfinish, pytest_sessionstart, pytest_terminal_summary  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chroma_executable() -> str:
    candidate = Path(sys.executable).with_name("chroma")
    found = str(candidate) if candidate.exists() else shutil.which("chroma")
    if not found:
        raise RuntimeError("the `chroma` command (shipped with chromadb) is not installed")
    return found


@pytest.fixture(scope="session")
def local_embedder() -> LocalMiniLMEmbedder:
    """One model load for the whole suite."""
    return LocalMiniLMEmbedder()


def start_chroma_server(path: Path) -> tuple[subprocess.Popen, str]:
    """A real `chroma run` on a free loopback port, storing under ``path``; waits until it answers."""
    port = free_port()
    log = open(path / "server.log", "wb")
    proc = subprocess.Popen(
        [chroma_executable(), "run", "--path", str(path / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()  # the child has its own handle
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"chroma server did not start: {(path / 'server.log').read_text()[-2000:]}")
        time.sleep(0.2)


def cli_env(settings: Settings) -> dict[str, str]:
    """The environment a `brain` subprocess needs to open the store ``settings`` name (this checkout's code)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BRAIN_DATA_DIR": str(settings.data_dir),
           "BRAIN_PERSONA_PATH": str(settings.persona_path)}
    if settings.chroma_url:
        env.update(BRAIN_CHROMA_URL=settings.chroma_url, BRAIN_COLLECTION=settings.collection)
    return env


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real `chroma run` server on 127.0.0.1, stopped by its pid at the end of the session."""
    proc, url = start_chroma_server(tmp_path_factory.mktemp("chroma-server"))
    yield url
    stop(proc)


@pytest.fixture
def stub():
    """A running Ollama stub that serves the default chat model (for the summariser and chat tests)."""
    with OllamaStub(chat_models=DEFAULT_CHAT_MODELS) as server:
        yield server


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server)])
def backend_settings(request, tmp_path) -> Settings:
    """Settings for the embedded PersistentClient and for a real Chroma server (a fresh collection each)."""
    if request.param == "embedded":
        return Settings(data_dir=tmp_path / "data")
    url = request.getfixturevalue("chroma_server")
    return Settings(data_dir=tmp_path / "data", chroma_url=url, collection=f"t-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def store(backend_settings, local_embedder):
    with open_store(backend_settings, embedder=local_embedder) as opened:
        yield opened


@pytest.fixture
def embedded_store(settings, local_embedder):
    with open_store(settings, embedder=local_embedder) as opened:
        yield opened


@pytest.fixture
def embed_calls(embedded_store, monkeypatch):
    """Every list of texts the store's embedder is asked for (the real embedder still runs)."""
    calls: list[list[str]] = []
    real = embedded_store.embedder.embed_documents

    def counting(texts):
        calls.append(list(texts))
        return real(texts)

    monkeypatch.setattr(embedded_store.embedder, "embed_documents", counting)
    return calls


@pytest.fixture(autouse=True)
def _no_env_leaks(monkeypatch, tmp_path, tmp_path_factory):
    """Tests never read the developer's own BRAIN_/RAG_ variables or .env (they run in a temp cwd),
    nor the user-level places brain falls back to outside a project (~/.config/brain, ~/.local/share/brain),
    nor write snapshot keys to ~/.local/state/brain: each test has its own state directory, beside
    tmp_path rather than in it, since a test's data directory may be tmp_path itself."""
    for key in list(os.environ):
        if key.startswith(("BRAIN_", "RAG_", "OLLAMA_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
    monkeypatch.chdir(tmp_path)


# ---- the HTTP API over a real uvicorn ----------------------------------------------------------------

NOBODY = "http://127.0.0.1:9"  # discard port: nothing answers, so the summariser falls back


class LiveServer:
    """uvicorn serving ``app`` in a thread of this process, on a free loopback port."""

    def __init__(self, app):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def api_settings(tmp_path, **overrides) -> Settings:
    return Settings(data_dir=tmp_path / "data", ollama_host=NOBODY, summary_retries=0,
                    summary_backoff_seconds=0, **overrides)


@pytest.fixture
def api_store(tmp_path, local_embedder):
    with open_store(api_settings(tmp_path), embedder=local_embedder) as store:
        yield store


@pytest.fixture
def live(api_store):
    with LiveServer(create_app(api_store.settings, store=api_store)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client


# ---- test tiers ----------------------------------------------------------------------------------------
# `scripts/test.sh` runs the fast tier (`-m "not slow"`); `scripts/test.sh --all` runs every test. A test of a
# slow kind is marked with its kind and with `slow`; pyproject.toml describes each marker.

SLOW_KINDS = ("server", "subprocess", "browser", "stress", "fuzz")

#: the tests of a slow kind, by file (every test of it), by file::name (a test with all its parameters) or by
#: file::name[id] (one parametrised case).
#: Not listed, because the rule below finds them: the `server` runs of a parametrised store fixture and
#: every test that asks for the `chroma_server` fixture (kind `server`).
#: `slow` alone: a test that runs in-process but takes seconds (a whole registry embedded, a demo built).
TIERS: dict[str, tuple[str, ...]] = {
    # whole files
    "test_api_schemathesis.py": ("fuzz", "subprocess"),
    "test_cli_next_to_server.py": ("subprocess",),
    "test_feed_processes.py": ("stress", "subprocess"),
    "test_isolation_property.py": ("subprocess",),
    "test_locomo_bench.py": ("subprocess",),
    "test_mcp.py": ("subprocess",),
    "test_serve_workers.py": ("subprocess",),
    "test_startup_imports.py": ("subprocess",),
    "test_specialist_bands.py": ("slow",),  # the shipped registry's bands, example by example (benchmark-like)
    "test_ui_browser.py": ("browser",),
    # single tests
    "test_api.py::test_a_bad_setting_breaks_the_app_not_the_import": ("subprocess",),
    "test_api.py::test_serve_command_refuses_a_second_process_on_the_same_data_dir": ("subprocess",),
    "test_api.py::test_store_unavailable_is_503": ("server", "subprocess"),
    "test_api.py::test_the_module_app_is_built_once_from_the_environment": ("subprocess",),
    "test_api_docs_offline.py::test_swagger_ui_renders_every_operation_offline": ("browser",),
    "test_api_security.py::test_brain_serve_refuses_a_public_address_with_an_empty_token": ("subprocess",),
    "test_cli.py::test_a_command_closes_what_it_opened": ("subprocess",),
    "test_cli.py::test_subprocess_bad_setting_is_one_line_without_traceback": ("subprocess",),
    "test_cli.py::test_subprocess_debug_shows_the_traceback": ("subprocess",),
    "test_cli.py::test_subprocess_help": ("subprocess",),
    "test_cli.py::test_subprocess_memory_round_trip_json": ("subprocess",),
    "test_cli.py::test_subprocess_usage_error_exits_2": ("subprocess",),
    "test_cli_messages.py::test_mcp_logs_to_a_file_are_not_wrapped": ("subprocess",),
    "test_cli_paths.py::test_subprocess_from_a_subfolder_finds_the_project": ("subprocess",),
    "test_disk_margin.py::test_brain_serve_below_the_margin_answers_and_stops_on_sigterm": ("subprocess",),
    "test_disk_margin.py::test_brain_serve_starts_below_the_margin_and_serves_reads": ("subprocess",),
    "test_disk_margin.py::test_sigterm_closes_the_store_as_ctrl_c_does": ("subprocess",),
    "test_feed.py::test_a_chroma_restart_is_reported_then_caught_up": ("server", "subprocess"),
    "test_feed.py::test_racing_writers_never_share_a_sequence": ("stress", "subprocess"),
    "test_feed.py::test_racing_stores_end_with_what_chroma_holds": ("stress",),
    "test_forget_everywhere.py::test_a_forget_killed_while_scrubbing_finishes_on_the_next_run": ("subprocess",),
    "test_formation.py::test_a_process_killed_mid_formation_leaves_none_of_it_and_the_batch_pending": ("subprocess",),
    "test_idempotency.py::test_retries_across_two_workers_store_the_exchange_once": ("subprocess",),
    "test_isolation_race.py::test_two_workers_racing_for_one_new_id_give_it_to_one_entity": ("stress", "subprocess"),
    "test_locking.py::test_failed_open_releases_the_claim": ("subprocess",),
    "test_locking.py::test_second_process_gets_a_clear_error_while_the_store_is_open": ("subprocess",),
    "test_locking.py::test_server_backed_store_takes_no_lock": ("subprocess",),
    "test_locking.py::test_the_same_process_may_open_a_data_dir_twice": ("subprocess",),
    "test_mcp_http.py::test_without_the_token_nothing_answers": ("subprocess",),
    "test_mcp_http.py::test_the_admin_token_serves_every_tool": ("subprocess",),
    "test_mcp_http.py::test_a_token_bound_to_alice_acts_for_alice_only": ("subprocess",),
    "test_mcp_http.py::test_a_non_loopback_address_without_a_token_is_refused": ("subprocess",),
    "test_mcp_http.py::test_host_without_http_is_a_usage_error": ("subprocess",),
    "test_mcp_http.py::test_what_stdio_writes_is_in_the_store_the_mirror_and_an_export": ("subprocess",),
    "test_mirror_catch_up.py::test_brain_serve_repairs_the_mirror_before_answering": ("subprocess",),
    "test_mirror_degraded.py::test_a_served_brain_answers_truthfully_and_survives_a_read_only_shm": ("subprocess",),
    "test_mirror_degraded.py::test_a_served_brain_stops_cleanly_while_the_mirror_is_read_only_and_the_next_start_catches_up":
        ("subprocess",),
    "test_mirror_restore.py::test_cli_restore_from_mirror": ("subprocess",),
    "test_outside_reads.py::test_a_session_that_reads_beside_the_repository_fails_and_names_the_paths": ("subprocess",),
    "test_outside_reads.py::test_a_session_that_reads_only_its_own_files_passes": ("subprocess",),
    "test_outside_reads.py::test_a_read_in_an_xdist_worker_fails_the_session_too": ("subprocess",),
    "test_recovery_lost_store.py::test_brain_init_and_serve_refuse_a_lost_store": ("subprocess",),
    "test_reference_propagation.py::test_a_writer_killed_mid_batch_leaves_a_mirror_that_agrees_once_reopened":
        ("subprocess",),
    "test_reindex.py::test_kill_9_at_several_points_then_resume_embeds_nothing_twice": ("subprocess",),
    "test_reindex.py::test_the_command_dry_run_rollback_and_usage": ("subprocess",),
    "test_reindex_resume.py::test_a_reindex_resumed_after_kill_9_leaves_no_mirror_vector_missing": ("subprocess",),
    "test_reindex_resume.py::test_rollback_with_a_specialists_file_whatever_brain_embedder_says": ("subprocess",),
    "test_restore_resume.py::test_a_restore_killed_at_any_point_then_any_start_keeps_every_mirror_row": ("subprocess",),
    "test_restore_resume.py::test_the_restore_command_killed_mid_way_then_init_keeps_every_row": ("subprocess",),
    "test_serve_startup.py::test_brain_serve_on_a_fresh_data_directory_serves_the_persona_and_says_so": ("subprocess",),
    "test_serve_startup.py::test_brain_serve_without_a_persona_file_says_it_runs_without_one": ("subprocess",),
    "test_serve_startup.py::test_brain_mcp_on_a_fresh_data_directory_serves_the_persona": ("subprocess",),
    "test_store_concurrency.py::test_concurrent_writers_and_readers_leave_index_and_chroma_in_agreement": ("stress",),
    "test_store_reopen.py::test_a_store_opened_again_reads_another_process_s_writes": ("subprocess",),
    "test_write_intents.py::test_a_writer_killed_after_chroma_took_an_update_leaves_the_old_version": ("subprocess",),
    "test_write_intents.py::test_a_writer_killed_anywhere_leaves_the_whole_batch_or_none": ("stress", "subprocess"),
    # in-process, seconds each: the shipped specialists registered and trained afresh, a demo or a project
    # built through every shell, the int8 pre-score path over 6,144 candidates (one weighting stays fast)
    "test_api.py::test_specialists_found_by_meaning_over_http": ("slow",),
    "test_cli_entity_scope.py::test_no_command_with_entity_returns_another_entitys_memory": ("slow",),
    "test_cli_messages.py::test_specialists_are_listed_by_the_confidence_shown_first": ("slow",),
    "test_cli_portability.py::test_specialists_list_and_find": ("slow",),
    "test_demo.py::test_demo_builds_the_store_and_is_idempotent": ("slow",),
    "test_demo.py::test_demo_finds_its_project_from_a_subfolder": ("slow",),
    "test_demo.py::test_running_the_demo_again_writes_nothing": ("slow",),
    "test_ingest_names.py::test_documents_named_by_the_working_directory_are_rekeyed_without_embedding": ("slow",),
    "test_relevance_ranking.py::test_gated_top_k_equals_brute_force[6144-floor-only]": ("slow",),
    "test_relevance_ranking.py::test_gated_top_k_equals_brute_force[6144-margin-only]": ("slow",),
    "test_relevance_ranking.py::test_gated_top_k_equals_brute_force[6144-heavy]": ("slow",),
    "test_relevance_ranking.py::test_gated_top_k_equals_brute_force[6144-empty]": ("slow",),
    "test_relevance_ranking.py::test_gated_top_k_equals_brute_force[6144-importance-floor]": ("slow",),
    "test_scope_rule.py::test_a_list_or_search_for_an_entity_is_its_memories_and_the_global_ones_in_every_shell":
        ("slow",),
    "test_scope_rule.py::test_forgetting_what_a_list_for_an_entity_returned_never_deletes_a_global_memory": ("slow",),
    "test_specialist_classifier.py::test_the_shipped_specialists_call_a_plain_percentage_strong": ("slow",),
    "test_specialists.py::test_a_not_example_lowers_the_score": ("slow",),
    "test_specialists.py::test_bands_follow_the_thresholds": ("slow",),
    "test_specialists.py::test_without_the_lexical_share_the_score_is_the_dense_formula": ("slow",),
    "test_ui_access.py::test_nothing_else_is_reachable_without_the_token": ("slow",),
}


def tier_kinds(item: pytest.Item) -> set[str]:
    """The slow kinds of a collected test: from TIERS, its fixtures and its parameters."""
    name = item.path.name
    kinds = {kind for key in (name, f"{name}::{getattr(item, 'originalname', item.name)}", f"{name}::{item.name}")
             for kind in TIERS.get(key, ())}
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec else ()
    if "chroma_server" in getattr(item, "fixturenames", ()) or any(isinstance(v, str) and v == "server" for v in params):
        kinds.add("server")  # the store behind it is a real `chroma run` (a param resolves it at run time)
    return kinds


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        kinds = tier_kinds(item)
        for kind in sorted(kinds | ({"slow"} if kinds else set())):
            item.add_marker(kind)
