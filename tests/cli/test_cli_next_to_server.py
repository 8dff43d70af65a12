"""The CLI next to a running `brain serve` on the same embedded data directory: the server records its
address in the lock file; the commands go through its HTTP API (brain.ops.served) and print exactly what
they print without a server; a job that needs the store itself says which server holds it and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import brain
from brain.config import Settings
from brain.store.locking import LOCK_NAME
from tests.app.test_serve_startup import PERSONA, Served
from tests.conftest import NOBODY
from tests.mcp_client import project

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "next-to-server-token-0123456789"


def cli(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("BRAIN_", "RAG_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        OLLAMA_HOST=NOBODY,
        BRAIN_SUMMARY_RETRIES="0",
        XDG_CONFIG_HOME=str(workdir / "xdg-config"),
        XDG_DATA_HOME=str(workdir / "xdg-data"),
    )
    return subprocess.run(
        [sys.executable, "-m", "brain.shells.cli", *args],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=300,
    )


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def workdir(tmp_path, local_embedder):
    """A project with a token, a persona and a few memories and turns, stored before any server runs."""
    project(tmp_path)
    (tmp_path / ".env").write_text(f"BRAIN_API_TOKEN={TOKEN}\n", encoding="utf-8")
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data", persona_path=tmp_path / "persona.md", summarizer="extractive")
    with brain.open(settings, embedder=local_embedder, start_worker=False) as b:
        b.chat.remember("Alice is allergic to peanuts", importance=5, tags=["health"], entity="alice")
        b.chat.remember("Bob supports FC Porto", importance=2, entity="bob")
        b.chat.remember("The office is closed on Sundays", tags=["office"])
        b.chat.record_exchange("conv-lunch", "Where do we eat today?", "The Thai place at noon.")
    return tmp_path


READS = [
    ("memory", "list"),
    ("memory", "list", "--tag", "office", "--limit", "1"),
    ("turns", "conv-lunch"),
    ("turns", "conv-none"),
    ("persona", "show"),
]


def test_read_commands_answer_through_the_server_as_they_do_without_it(workdir):
    ids = [d["id"] for d in json.loads(ok(cli(workdir, "--json", "memory", "list")))]
    searches = [
        ("search", "who has an allergy?", "--type", "memory", "--entity", "alice"),
        ("search", "when is the office closed?"),
        ("search", "who has an allergy?", "--type", "memory", "--entity", "alice", "--as-of", "2100-01-01T00:00:00Z"),
    ]
    with Served(workdir) as served:
        lock = (workdir / "data" / LOCK_NAME).read_text().split()
        assert lock == [str(served.proc.pid), served.url]  # the server says where it is
        through = {args: (ok(cli(workdir, *args)), ok(cli(workdir, "--json", *args))) for args in READS}
        shown = [json.loads(ok(cli(workdir, "--json", "memory", "show", doc_id))) for doc_id in ids]
        found = [json.loads(ok(cli(workdir, "--json", *args))) for args in searches]
        # what was held true before anything was stored: nothing, answered by the server too
        before = json.loads(
            ok(
                cli(
                    workdir,
                    "--json",
                    "search",
                    "who has an allergy?",
                    "--type",
                    "memory",
                    "--entity",
                    "Alice",
                    "--as-of",
                    "2000-01-01T00:00:00Z",
                )
            )
        )
        stats = json.loads(ok(cli(workdir, "--json", "stats")))
        health = json.loads(ok(cli(workdir, "--json", "health")))
        # memory extract asks the server, whose formation is off: its refusal, not "needs the store itself"
        extract = cli(workdir, "memory", "extract", "--conversation", "conv-lunch")
        unknown = cli(workdir, "memory", "extract", "--conversation", "conv-none")
        missing = cli(workdir, "memory", "show", "doc-nothing")
        # a job that needs the store itself names the server, why, and the way out
        refused = cli(workdir, "mirror", "rebuild")
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert refused.stderr.strip() == (
            f"error: `brain mirror rebuild` needs the store itself (it replaces the mirror file the server writes "
            f"to), and `brain serve` (process {served.proc.pid}) holds it, serving {served.url}: stop the server first"
        )
        # a token the server does not know is named as the cause
        (workdir / ".env").write_text("BRAIN_API_TOKEN=not-the-servers-token-0123\n", encoding="utf-8")
        wrong = cli(workdir, "memory", "list")
        assert wrong.returncode == 1 and "refused the token" in wrong.stderr and "BRAIN_API_TOKEN" in wrong.stderr
    for args, (text, as_json) in through.items():  # the same command without a server: the same answer
        assert ok(cli(workdir, *args)) == text, args
        assert json.loads(ok(cli(workdir, "--json", *args))) == json.loads(as_json), args
    assert shown == [json.loads(ok(cli(workdir, "--json", "memory", "show", doc_id))) for doc_id in ids]
    for args, answer in zip(searches, found):
        alone = json.loads(ok(cli(workdir, "--json", *args)))
        assert [h["id"] for h in answer["results"]] == [h["id"] for h in alone["results"]]
        assert answer["results"][0]["text"] == alone["results"][0]["text"]
        for through_server, own in zip(answer["results"], alone["results"]):  # every part of the score, the same
            parts = ("score", "similarity_part", "lexical_part", "importance_part", "recency_part", "floor")
            assert {p: through_server.get(p) for p in parts} == pytest.approx(
                {p: own.get(p) for p in parts}, abs=1e-4
            ), args  # recency ages
    assert found[0]["results"][0]["text"] == found[2]["results"][0]["text"] == "Alice is allergic to peanuts"
    assert before["results"] == []
    alone = json.loads(ok(cli(workdir, "--json", "stats")))
    unsettled = {"disk_bytes": None, "unusable_rows": None, "index": None}  # Chroma's files, the server's indexes
    assert {**stats, **unsettled} == {**alone, **unsettled}
    assert stats["by_type"]["memory"] == 3 and stats["by_type"]["persona"] == 2  # serve loaded persona.md
    assert stats["formation"] == alone["formation"] and stats["formation"]["pending"] == 0
    # the server's health: its worker runs, so its summariser part differs; what the store holds does not
    assert health["summariser"]["worker_running"] is True and "version" not in health
    assert health["counts"] == json.loads(ok(cli(workdir, "--json", "health")))["counts"]
    assert health["formation"]["enabled"] is False and "BRAIN_FORMATION" in health["formation"]["off_reason"]
    assert extract.returncode == 1 and extract.stderr.startswith("error: memory formation is off: BRAIN_FORMATION")
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: no conversation 'conv-none' is stored")
    assert missing.returncode == 1 and missing.stderr.startswith("error: no memory with id 'doc-nothing'")


def test_memory_add_and_rm_write_through_the_server(workdir):
    with Served(workdir):
        added = json.loads(
            ok(
                cli(
                    workdir,
                    "--json",
                    "memory",
                    "add",
                    "Carol prefers trains",
                    "--entity",
                    "carol",
                    "--importance",
                    "4",
                    "--tag",
                    "travel",
                )
            )
        )
        assert added["metadata"]["scope"] == "entity:carol" and added["metadata"]["tags"] == ["travel"]
        listed = json.loads(ok(cli(workdir, "--json", "memory", "list", "--scope", "entity:carol")))
        assert [m["id"] for m in listed] == [added["id"]]
        bobs = json.loads(ok(cli(workdir, "--json", "memory", "list", "--scope", "entity:bob")))[0]["id"]
        removed = cli(workdir, "memory", "rm", bobs, "doc-nothing")
        assert removed.returncode == 1 and removed.stdout == f"removed {bobs}\n"
        assert "doc-nothing" in removed.stderr
    after = json.loads(ok(cli(workdir, "--json", "memory", "list")))  # the server wrote them to the store
    texts = {m["text"] for m in after}
    assert "Carol prefers trains" in texts and "Bob supports FC Porto" not in texts
