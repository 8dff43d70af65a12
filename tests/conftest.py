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
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn

from brain.app.core import open_store
from brain.config import Settings
from brain.providers.embeddings import LocalMiniLMEmbedder
from brain.shells.api import create_app
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


class RememberingMiniLM(LocalMiniLMEmbedder):
    """The real local model, which embeds each text once per session and hands back that vector after.

    The suite writes the same texts again and again (the sample knowledge base, the same few memories in
    test after test): the model would give the same vector each time (mean over real tokens, so a text's
    vector does not depend on its batch), so repeating it only costs time. Everything above ``_embed`` runs
    as usual (validation, batching, ordering, normalisation) and every call still reaches ``embed_documents``
    and ``embed_query``, so tests that count calls or texts count the same. The embedder's own tests
    (tests/providers/test_embeddings.py) use a fresh LocalMiniLMEmbedder, never this one."""

    def __init__(self) -> None:
        super().__init__()
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self._vectors_lock = threading.Lock()

    def _embed(self, texts: list[str], kind) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if (kind, text) not in self._vectors]
        if missing:
            rows = super()._embed(missing, kind)
            with self._vectors_lock:
                for text, row in zip(missing, rows, strict=True):
                    self._vectors[(kind, text)] = np.array(row, dtype=np.float32)
        return np.stack([self._vectors[(kind, text)] for text in texts])


@pytest.fixture(scope="session")
def local_embedder() -> LocalMiniLMEmbedder:
    """One model load for the whole suite, and one model run per text (:class:`RememberingMiniLM`)."""
    return RememberingMiniLM()


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


def isolate(monkeypatch: pytest.MonkeyPatch, workdir: Path, state_dir: Path) -> None:
    """No BRAIN_/RAG_/OLLAMA_ variables, the user-level places under ``workdir``, the working directory
    ``workdir`` (so no project's .env, config/ or persona.md is found), snapshot keys in ``state_dir``."""
    for key in list(os.environ):
        if key.startswith(("BRAIN_", "RAG_", "OLLAMA_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(workdir / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(workdir / "xdg-data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(state_dir))
    monkeypatch.chdir(workdir)


@pytest.fixture(autouse=True)
def _no_env_leaks(monkeypatch, tmp_path, tmp_path_factory):
    """Tests never read the developer's own BRAIN_/RAG_ variables or .env (they run in a temp cwd),
    nor the user-level places brain falls back to outside a project (~/.config/brain, ~/.local/share/brain),
    nor write snapshot keys to ~/.local/state/brain: each test has its own state directory, beside
    tmp_path rather than in it, since a test's data directory may be tmp_path itself.
    A module-scoped fixture runs before this one: it calls :func:`isolate` itself
    (``with pytest.MonkeyPatch.context() as mp: isolate(mp, ...)``)."""
    isolate(monkeypatch, tmp_path, tmp_path_factory.mktemp("xdg-state"))


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

    def __enter__(self) -> LiveServer:
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


@contextmanager
def local_and_served(tmp_path, embedder):
    """One store, its operations here and a live server's beside them: ``(store, local, served, url)``."""
    from brain.app.core import Brain
    from brain.ops import LocalOperations, ServedOperations
    from brain.ops.served import ServerLink

    settings = api_settings(tmp_path)
    with open_store(settings, embedder=embedder) as store:
        with Brain(store, start_worker=False) as brain, LiveServer(create_app(settings, store=store)) as server:
            with ServedOperations(ServerLink(server.url)) as served:
                yield store, LocalOperations(brain), served, server.url


# ---- test tiers ----------------------------------------------------------------------------------------
# `scripts/test.sh` runs the fast tier (`-m "not slow"`); `scripts/test.sh --all` runs every test. A test of a
# slow kind carries its kind's marker (`pytestmark = pytest.mark.subprocess` in its module, a decorator on the
# test, `pytest.param(..., marks=...)` on a parameter, or a folder's conftest); the one rule here makes each
# kind `slow` as well. `@pytest.mark.slow` alone: in-process, but seconds on its own. pyproject.toml describes
# each marker; CONTRIBUTING.md says which to use.

SLOW_KINDS = ("server", "subprocess", "browser", "stress", "fuzz", "model")


def slow_kinds(item: pytest.Item) -> set[str]:
    """The slow kinds a collected test carries (its module's, its class's, its own and its parameters')."""
    return {mark.name for mark in item.iter_markers() if mark.name in SLOW_KINDS}


def uses_chroma_server(item: pytest.Item) -> bool:
    """Whether a real `chroma run` stands behind the test: the fixture, or a parameter named "server"."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec else ()
    return "chroma_server" in getattr(item, "fixturenames", ()) or any(
        isinstance(value, str) and value == "server" for value in params)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = []
    for item in items:
        if uses_chroma_server(item) and not item.get_closest_marker("server"):
            unmarked.append(item.nodeid)
        if slow_kinds(item):
            item.add_marker("slow")
    if unmarked:
        raise pytest.UsageError(
            "these tests use a real `chroma run` server but carry no `server` marker (mark them, or their "
            "parameter with pytest.param(\"server\", marks=pytest.mark.server)):\n  " + "\n  ".join(unmarked))
