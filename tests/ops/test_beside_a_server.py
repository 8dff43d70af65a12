"""Everything works beside a running `brain serve` on the same embedded data directory: the README's Python
block, `brain export`, `memory history`, `consolidate --dry-run`, `mirror verify`, `persona load`,
`forget --entity X --yes` and `brain mcp` over stdio, each a real process, each seeing what the others wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.app.test_serve_startup import PERSONA, Served
from tests.conftest import NOBODY
from tests.mcp_client import project, stdio

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def run(workdir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("BRAIN_", "RAG_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        OLLAMA_HOST=NOBODY,
        BRAIN_SUMMARY_RETRIES="0",
        XDG_CONFIG_HOME=str(workdir / "xdg-config"),
        XDG_DATA_HOME=str(workdir / "xdg-data"),
    )
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=workdir, env=env, timeout=300, input=stdin
    )


def brain(workdir: Path, *args: str) -> str:
    """stdout of a `brain` command that must succeed."""
    result = run(workdir, "-m", "brain.shells.cli", *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def readme_python_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## A chat backend in Python") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A project whose data directory a `brain serve` process holds for the whole module."""
    workdir = project(tmp_path_factory.mktemp("beside"))
    (workdir / "persona.md").write_text(PERSONA, encoding="utf-8")
    with Served(workdir) as server:
        yield workdir, server


def test_the_readme_python_block_runs_as_written(served):
    workdir, server = served
    result = run(workdir, "-c", readme_python_block())
    assert result.returncode == 0, result.stderr
    assert "Alice is allergic to peanuts" in result.stdout  # in the prompt the server built
    assert "'similarity_part'" in result.stdout  # the scores of a memory in the context
    # the script's writes are the server's: another process reads them there
    listed = json.loads(brain(workdir, "--json", "memory", "list", "--entity", "alice"))
    assert "Alice is allergic to peanuts" in [m["text"] for m in listed]
    conversations = httpx.get(f"{server.url}/v1/conversations", params={"entity": "alice"}, timeout=30).json()
    assert conversations["conversations"][0]["turns"] == 2


def test_memory_history_follows_a_change_made_through_the_server(served):
    workdir, server = served
    old = httpx.post(
        f"{server.url}/v1/memories", json={"text": "Dave lives in Berlin", "entity": "dave"}, timeout=60
    ).json()
    new = json.loads(
        brain(workdir, "--json", "memory", "supersede", old["id"], "Dave lives in Lisbon", "--entity", "dave")
    )["new"]
    chain = json.loads(brain(workdir, "--json", "memory", "history", new["id"], "--entity", "dave"))
    assert [d["text"] for d in chain] == ["Dave lives in Berlin", "Dave lives in Lisbon"]
    assert chain[0]["metadata"]["status"] == "superseded"
    # the server ranks what the command wrote: the current fact only
    found = httpx.get(
        f"{server.url}/v1/memories/search", params={"q": "where does Dave live", "entity": "dave"}, timeout=60
    ).json()["results"]
    assert [h["text"] for h in found][:1] == ["Dave lives in Lisbon"]


def test_consolidate_dry_run_and_mirror_verify_report_on_the_servers_store(served):
    workdir, _ = served
    brain(workdir, "memory", "add", "The office closes at six on Fridays")
    brain(workdir, "memory", "add", "On Fridays the office closes at six")
    report = json.loads(brain(workdir, "--json", "consolidate", "--dry-run", "--threshold", "0.8"))
    assert report["dry_run"] is True and report["scanned"] >= 2
    merged = {text for m in report["merges"] for text in [m["kept_text"], *m["merged_texts"]]}
    assert merged == {"The office closes at six on Fridays", "On Fridays the office closes at six"}
    assert len(json.loads(brain(workdir, "--json", "memory", "list", "--scope", "global"))) == 2  # nothing merged
    verified = json.loads(brain(workdir, "--json", "mirror", "verify"))
    assert verified["ok"] is True and verified["checked"] >= 5


def test_persona_load_is_read_here_and_loaded_by_the_server(served):
    workdir, server = served
    (workdir / "persona.md").write_text(PERSONA + "\n## Allergies\nAlways check for allergies.\n", encoding="utf-8")
    loaded = json.loads(brain(workdir, "--json", "persona", "load"))
    assert loaded["changed"] is True and loaded["sections"] == 3 and loaded["path"].endswith("persona.md")
    sections = httpx.get(f"{server.url}/v1/persona", timeout=30).json()["sections"]
    assert [s["heading"] for s in sections][-1] == "Allergies"
    assert json.loads(brain(workdir, "--json", "persona", "load"))["changed"] is False  # the same text again
    assert "Always check for allergies." in brain(workdir, "persona", "show")


def test_export_writes_the_servers_memories_here(served):
    workdir, _ = served
    report = json.loads(brain(workdir, "--json", "export", str(workdir / "export")))
    document = json.loads((workdir / "export" / "memory-store.json").read_text(encoding="utf-8"))
    texts = {m["content"] for m in document["memories"]}
    assert {"Alice is allergic to peanuts", "Dave lives in Lisbon"} <= texts
    assert report["memories"] == len(document["memories"]) and report["out_dir"] == str(workdir / "export")
    assert (workdir / "export" / "embeddings.json").is_file() and report["conversations"] >= 1
    # the same folder again: replaced file for file, as an export of an open store is
    again = json.loads(brain(workdir, "--json", "export", str(workdir / "export")))
    assert "memory-store.json" in again["replaced"]


def test_brain_mcp_over_stdio_works_through_the_server_and_forget_removes_what_it_wrote(served):
    workdir, server = served
    with stdio(workdir) as client:
        stored = client.call("remember", text="Carol is training for the Berlin marathon", entity="carol", importance=4)
        assert stored["metadata"]["scope"] == "entity:carol"
        recalled = client.call("recall", query="what is Alice allergic to?", entity="alice")
        assert recalled["results"][0]["text"] == "Alice is allergic to peanuts"  # the README script's write
    carol = json.loads(brain(workdir, "--json", "memory", "list", "--scope", "entity:carol"))
    assert [m["text"] for m in carol] == ["Carol is training for the Berlin marathon"]
    forgotten = json.loads(brain(workdir, "--json", "forget", "--entity", "carol", "--yes"))
    assert forgotten["deleted"]["memory"] == 1
    left = httpx.get(f"{server.url}/v1/memories", params={"entity": "carol"}, timeout=30).json()["memories"]
    assert all(m["metadata"]["scope"] != "entity:carol" for m in left)
    assert server.proc.poll() is None  # the server served every one of them and is still up
