"""What the `brain` command says: counts in words, questions a script cannot answer, the order specialists
are listed in, log files, usage errors and entity names in one canonical form.

In process with click's CliRunner against a real embedded store and the real embedder; the MCP log test
runs `brain mcp` as a subprocess with its stderr in a file.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import brain
import brain.store.facade
from brain.config import Settings
from brain.shells.cli import cli
from brain.text.wording import counted, plural
from tests.conftest import free_port
from tests.mcp_client import SOURCE_ROOT, HttpServer, http, project, stdio

REPO_CONFIG = Path(SOURCE_ROOT) / "config"


@pytest.fixture(autouse=True)
def _cli_env(monkeypatch, local_embedder, tmp_path):
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "defaults.env").touch()
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def seed(tmp_path, local_embedder) -> None:
    with brain.open(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, start_worker=False) as b:
        b.chat.remember("bob keeps bees", entity="bob")
        b.chat.remember("bob takes the night train", entity="bob")
        b.chat.record_exchange(None, "I am bob, hello", "Hello bob", entity="bob")
        b.chat.remember("The shop closes at six")


# ---- counts in words ------------------------------------------------------------------------------

@pytest.mark.parametrize("noun, many", [
    ("memory", "memories"), ("summary", "summaries"), ("conversation", "conversations"), ("turn", "turns"),
    ("FAQ entry", "FAQ entries"), ("persona section", "persona sections"), ("match", "matches"),
    ("day", "days"), ("is", "are"), ("bad file", "bad files"), ("box", "boxes"),
])
def test_one_plural_rule(noun, many):
    assert plural(noun) == many
    assert counted(1, noun) == f"1 {noun}" and counted(0, noun) == f"0 {many}" and counted(2, noun) == f"2 {many}"


def test_forget_export_and_import_count_in_words(tmp_path, local_embedder):
    seed(tmp_path, local_embedder)
    forgot = run("forget", "--entity", "bob", "--yes")
    assert forgot.exit_code == 0, forgot.stderr
    assert "forgot entity 'bob': 2 memories, 2 turns" in forgot.stdout and "memorys" not in forgot.stdout

    with brain.open(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, start_worker=False) as b:
        b.chat.record_exchange(None, "What time does the shop close?", "At six")
    exported = run("export", "--format", "pam", str(tmp_path / "out"))
    assert exported.exit_code == 0, exported.stderr
    assert "exported 1 memory to" in exported.stdout and "1 conversation (2 messages" in exported.stdout
    imported = run("import", str(tmp_path / "out"))
    assert imported.exit_code == 0, imported.stderr
    assert "imported 1 memory:" in imported.stdout and "; 1 conversation: 2 turns" in imported.stdout


# ---- forget asks only when there is something to forget, and never a script -------------------------

def test_forget_checks_before_asking_and_names_what_goes(tmp_path, local_embedder):
    seed(tmp_path, local_embedder)
    nothing = run("forget", "--entity", "carol", input="y\n")
    assert nothing.exit_code == 1
    assert nothing.stderr.startswith("error: nothing is stored for entity 'carol'") and "[y/N]" not in nothing.stderr

    refused = run("forget", "--entity", "bob", input="n\n")
    assert refused.exit_code == 1
    assert "delete 2 memories, 2 turns in scope entity:bob" in refused.stderr
    assert "nothing was done" in refused.stderr


def test_forget_without_an_answer_says_to_pass_yes(tmp_path, local_embedder):
    seed(tmp_path, local_embedder)
    result = run("forget", "--entity", "bob", input="")  # stdin at its end, as `brain forget ... </dev/null`
    assert result.exit_code == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no answer") and "--yes" in last and "aborted" not in result.stderr
    assert "[y/N]: error" not in result.stderr  # the error is a line of its own
    assert run("--json", "memory", "list", "--entity", "bob").exit_code == 0
    assert len(json.loads(run("--json", "memory", "list", "--scope", "entity:bob").stdout)) == 2  # nothing went


# ---- specialists: listed in the order of what is shown ---------------------------------------------

@pytest.mark.slow
def test_specialists_are_listed_by_the_confidence_shown_first(tmp_path):
    for name in ("specialists.yaml", "specialists_examples.jsonl"):
        shutil.copy(REPO_CONFIG / name, tmp_path / "config" / name)
    for request in ("read the text on this photo and translate it", "what's the weather like in Porto",
                    "remind me to call mum", "look this up online"):
        text = run("specialists", "find", request, "--k", "3")
        assert text.exit_code == 0, text.stderr
        header, *rows = text.stdout.splitlines()
        assert header.split()[0] == "confidence" and len(rows) == 3
        shown = [float(row.split()[0]) for row in rows]
        assert shown == sorted(shown, reverse=True), text.stdout
        data = json.loads(run("--json", "specialists", "find", request, "--k", "3").stdout)
        assert data["order"] == "confidence"
        confidences = [r["confidence"] for r in data["results"]]
        assert confidences == sorted(confidences, reverse=True)
        assert [round(c, 3) for c in confidences] == shown


# ---- logs in a file are one record a line ----------------------------------------------------------

# brain's records, and uvicorn's own ("INFO:     Uvicorn running on ...")
RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ \S+: |[A-Z]+: +\S")


@pytest.mark.subprocess
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_logs_to_a_file_are_not_wrapped(tmp_path, transport):
    workdir = project(tmp_path / "mcp")
    if transport == "stdio":
        with stdio(workdir) as client:
            client.call("remember", text="Frank takes the train to Porto on Sundays", entity="frank")
        log = (workdir / "stderr.log").read_text()
    else:
        with HttpServer(workdir, free_port()) as server, http(server.url) as client:
            client.call("remember", text="Frank takes the train to Porto on Sundays", entity="frank")
        log = server.log.read_text()
    records = [line for line in log.splitlines() if line.strip()]
    assert any(len(line) > 100 for line in records), log  # long records stay whole (rich cut them at 80)
    for line in records:  # every line starts a record: none continues a wrapped one
        assert RECORD.match(line), log


# ---- usage errors, and entity names in one form -------------------------------------------------

@pytest.mark.parametrize("args", [
    ["memory", "add", ""], ["memory", "add", "   "], ["search", ""], ["search", " ", "--type", "memory"],
    ["specialists", "find", ""], ["memory", "add", "Alice likes tea", "--tag", "t" * 101],
])
def test_empty_text_or_a_tag_over_its_limit_is_a_usage_error(args):
    result = run(*args)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stderr.startswith("error: ") and result.stdout == ""


def test_a_global_option_after_the_command_says_where_it_goes(tmp_path):
    result = run("serve", "--data-dir", str(tmp_path / "elsewhere"))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "error: --data-dir is an option of brain itself, given before the command: "
        "'brain --data-dir ... serve', not 'brain serve --data-dir'")
    unknown = run("serve", "--nope")  # an option of no one: click's message
    assert unknown.exit_code == 2 and "No such option '--nope'" in unknown.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_entity_names_are_one_canonical_form_in_every_command(tmp_path, local_embedder):
    seed(tmp_path, local_embedder)
    own = json.loads(run("--json", "memory", "list", "--entity", "bob").stdout)
    for name in ("Bob", "BOB", "\uff42\uff4f\uff42"):  # the last one fullwidth
        listed = run("--json", "memory", "list", "--entity", name)
        assert listed.exit_code == 0 and json.loads(listed.stdout) == own, name
        found = run("--json", "search", "bees", "--type", "memory", "--entity", name)
        assert found.exit_code == 0 and json.loads(found.stdout)["results"][0]["text"] == "bob keeps bees"
    for name in ("entity:bob", "../bob", "/", "a\\b", "bob\u202e"):
        refused = run("memory", "list", "--entity", name)
        assert refused.exit_code == 2 and refused.stderr.startswith("error: "), name
    forgot = run("forget", "--entity", "BOB", "--yes")
    assert forgot.exit_code == 0, forgot.stderr
    assert json.loads(run("--json", "memory", "list", "--entity", "bob").stdout) == [
        d for d in own if d["metadata"]["scope"] == "global"]
    assert re.search(r"Bob and bob are\s+one\s+entity", run("memory", "add", "--help").stdout)
