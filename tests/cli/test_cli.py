"""The `brain` command: in process with click's CliRunner, and end to end as a subprocess.

Every test runs in its own temp cwd (conftest), made a project (an empty ``config/defaults.env``,
so ``persona.md`` there is the default persona), with BRAIN_DATA_DIR set to the absolute
``<tmp>/data``: the store the ``embedded_store`` fixture opens, which seeds documents the CLI reads.
(Absolute, because chromadb caches its embedded clients per path *string* within a process: a
relative ``data/chroma`` would reach another test's store after the cwd changed.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

import brain.store.facade
from brain.features.ingest.report import IngestReport
from brain.model.errors import NotFound
from brain.model.schemas import DOC_TYPES
from brain.shells.cli import cli
from brain.shells.cli.reports import ingest_text

PERSONA = """You are Brain, a careful household assistant.

## Tone
Warm and brief.

## Boundaries
Never share one person's memories with another.
"""


@pytest.fixture(autouse=True)
def _cli_env(monkeypatch, local_embedder, tmp_path):
    """The CLI's store is this test's; every in-process store it opens uses the suite's one loaded
    model (the same real model, loaded once)."""
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "defaults.env").touch()
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


def run_json(*args: str):
    result = run("--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# ---- help, usage, errors ------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    [], ["init"], ["persona"], ["persona", "load"], ["persona", "show"], ["ingest"], ["search"],
    ["memory"], ["memory", "add"], ["memory", "list"], ["memory", "count"], ["memory", "show"], ["memory", "rm"],
    ["turns"], ["schema"], ["stats"], ["serve"], ["mirror"], ["mirror", "sync"], ["mirror", "verify"],
    ["mirror", "recall"], ["mirror", "backfill"], ["restore"], ["export"], ["import"], ["consolidate"],
    ["specialists"], ["specialists", "list"], ["specialists", "find"], ["forget"], ["mcp"], ["reindex"],
    ["index"], ["index", "snapshot"],
])
def test_every_command_has_help(command):
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: brain")


def test_group_help_lists_the_command_tree():
    out = run("--help").stdout
    for name in ("init", "persona", "ingest", "search", "memory", "turns", "schema", "stats", "serve", "mirror",
                 "restore", "export", "import", "consolidate", "specialists", "forget", "mcp", "reindex", "index"):
        assert f"  {name} " in out
    for option in ("--json", "--debug", "--data-dir"):
        assert option in out


def test_usage_errors_are_one_line_and_exit_2():
    result = run("search", "hello", "--type", "bogus")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "--type" in line and "bogus" in line and "brain search --help" in line
    assert run("memory", "frobnicate").exit_code == 2
    assert run("search").exit_code == 2  # missing QUERY
    assert run("memory", "show").exit_code == 2  # missing ID


def test_bad_setting_is_one_line_exit_1():
    result = run("stats", env={"RAG_MEMORY_TOP_K": "99"})
    assert result.exit_code == 1
    line = one_error_line(result)
    assert "RAG_MEMORY_TOP_K" in line and "99" in line
    assert result.stdout == ""


def test_debug_lets_the_exception_through(embedded_store):
    result = run("--debug", "memory", "show", "doc-nope")
    assert result.exit_code == 1
    assert isinstance(result.exception, NotFound)
    quiet = run("memory", "show", "doc-nope")
    assert quiet.exit_code == 1 and isinstance(quiet.exception, SystemExit)


# ---- memory ------------------------------------------------------------------------------------

def test_memory_add_list_show_rm_text_output():
    added = run("memory", "add", "Alice is vegetarian", "--importance", "5", "--tag", "food",
                "--scope", "entity:alice")
    assert added.exit_code == 0, added.stderr
    assert added.stdout.startswith("stored doc-")
    doc_id = added.stdout.split()[1]
    assert "imp 5" in added.stdout and "entity:alice" in added.stdout and "food" in added.stdout

    listed = run("memory", "list")
    assert listed.exit_code == 0 and doc_id in listed.stdout and "Alice is vegetarian" in listed.stdout
    assert run("memory", "count").stdout.strip() == "1 memory"
    assert run("memory", "count", "--entity", "bob").stdout.strip() == "0 memories"
    assert json.loads(run("--json", "memory", "count", "--tag", "food").stdout) == {"count": 1}

    shown = run("memory", "show", doc_id)
    assert shown.exit_code == 0
    assert f"id: {doc_id}" in shown.stdout and "importance: 5" in shown.stdout and "scope: entity:alice" in shown.stdout

    removed = run("memory", "rm", doc_id)
    assert removed.exit_code == 0 and removed.stdout.strip() == f"removed {doc_id}"
    assert run("memory", "list").stdout.strip() == "no memories"


@pytest.mark.parametrize("char, escaped", [("\x00", "\\u0000"), ("\u202e", "\\u202e"), ("\u2028", "\\u2028"),
                                           ("\x1b", "\\u001b"), ("\n", "\\n")])
def test_memory_list_escapes_every_control_and_format_character(char, escaped):
    added = run_json("memory", "add", f"before{char}after", "--tag", f"t{char}g")
    assert added["text"] == f"before{char}after"  # stored as given; only printing escapes it
    for args in (["memory", "list"], ["--json", "memory", "list"], ["memory", "show", added["id"]]):
        shown = run(*args)
        assert shown.exit_code == 0, shown.stderr
        assert char == "\n" or char not in shown.stdout, args  # a line break is the layout's too
    line = run("memory", "list").stdout
    assert f"before{escaped}after" in line and f"t{escaped}g" in line and len(line.strip().splitlines()) == 1
    assert json.loads(run("--json", "memory", "list").stdout)[0]["text"] == f"before{char}after"


def test_memory_add_json_shape_and_defaults():
    doc = run_json("memory", "add", "The user likes trains", "--tag", "travel", "--tag", "routine")
    assert set(doc) == {"id", "text", "metadata"}
    assert doc["text"] == "The user likes trains"
    meta = doc["metadata"]
    assert meta["type"] == "memory" and meta["importance"] == 3 and meta["scope"] == "global"
    assert meta["tags"] == ["travel", "routine"]
    assert "embedding" not in doc


def test_memory_add_same_text_updates_the_one_memory():
    first = run_json("memory", "add", "Bob drinks tea", "--importance", "2", "--tag", "drinks")
    second = run_json("memory", "add", "bob  DRINKS tea", "--importance", "4", "--tag", "morning")
    assert first["id"] == second["id"]
    assert second["metadata"]["importance"] == 4
    assert set(second["metadata"]["tags"]) == {"drinks", "morning"}
    assert len(run_json("memory", "list")) == 1


def test_memory_add_entity_is_the_scope():
    doc = run_json("memory", "add", "Alice keeps receipts as photos", "--entity", "alice")
    assert doc["metadata"]["scope"] == "entity:alice"
    same = run_json("memory", "add", "alice keeps receipts as photos", "--scope", "entity:alice", "--entity", "alice")
    assert same["id"] == doc["id"]  # --entity and the agreeing --scope name one scope


def test_entity_with_a_conflicting_scope_is_a_usage_error():
    for scope in ("global", "entity:bob"):
        result = run("memory", "add", "Alice likes tea", "--entity", "alice", "--scope", scope)
        assert result.exit_code == 2
        line = one_error_line(result)
        assert "--entity alice" in line and scope in line
    listed = run("memory", "list", "--entity", "alice", "--scope", "global")
    assert listed.exit_code == 2 and "--scope global" in one_error_line(listed)
    assert not (Path(os.environ["BRAIN_DATA_DIR"]) / "chroma").exists()  # nothing was written


@pytest.mark.parametrize("args, name", [
    (["memory", "add", "x", "--importance", "9"], "--importance"),
    (["memory", "add", "x", "--importance", "0"], "--importance"),
    (["memory", "add", "x", "--importance", "high"], "--importance"),
    (["memory", "add", "x", "--scope", "team"], "--scope"),
    (["memory", "add", "x", "--entity", " bob"], "--entity"),
    (["memory", "list", "--limit", "0"], "--limit"),
    (["memory", "list", "--entity", ""], "--entity"),
    (["search", "q", "--k", "0"], "--k"),
    (["search", "q", "--k", "abc"], "--k"),
    (["search", "q", "--k", "1001"], "--k"),
    (["search", "q", "--type", "memory", "--entity", ""], "--entity"),
    (["turns", "conv-1", "--k", "0"], "--k"),
    (["turns", "conv-1", "--k", "x"], "--k"),
    (["persona", "show", "--max-chars", "0"], "--max-chars"),
    (["specialists", "find", "q", "--k", "0"], "--k"),
    (["consolidate", "--threshold", "2"], "--threshold"),
])
def test_every_out_of_range_or_mistyped_argument_is_a_usage_error(args, name):
    result = run(*args)
    assert result.exit_code == 2, result.stderr
    line = one_error_line(result)
    assert line.startswith(f"error: Invalid value for '{name}'") and "--help" in line, line
    assert result.stdout == ""
    assert not (Path(os.environ["BRAIN_DATA_DIR"]) / "chroma").exists()  # refused before the store is touched


def test_memory_list_filters_by_entity_tag_and_limit(embedded_store):
    embedded_store.upsert_memory("Alice is vegetarian", scope="entity:alice", tags=["food"])
    embedded_store.upsert_memory("Alice runs on Sundays", scope="entity:alice", tags=["sport"])
    embedded_store.upsert_memory("Bob is allergic to nuts", scope="entity:bob", tags=["food", "health"])
    embedded_store.upsert_turn("conv-1", "hi", "hello")  # not a memory: never listed

    assert len(run_json("memory", "list")) == 3
    alice = run_json("memory", "list", "--entity", "alice")
    assert {d["text"] for d in alice} == {"Alice is vegetarian", "Alice runs on Sundays"}
    food = run_json("memory", "list", "--tag", "food")
    assert {d["text"] for d in food} == {"Alice is vegetarian", "Bob is allergic to nuts"}
    both = run_json("memory", "list", "--tag", "food", "--tag", "health")
    assert [d["text"] for d in both] == ["Bob is allergic to nuts"]
    assert len(run_json("memory", "list", "--limit", "2")) == 2
    assert run("memory", "list", "--limit", "0").exit_code == 2


def test_memory_show_unknown_id_is_one_line_exit_1(embedded_store):
    result = run("memory", "show", "doc-unknown")
    assert result.exit_code == 1
    assert "doc-unknown" in one_error_line(result)
    assert result.stdout == ""


def test_memory_show_and_rm_leave_other_document_types_alone(embedded_store):
    user_id, _ = embedded_store.upsert_turn("conv-1", "hi", "hello")
    assert run("memory", "show", user_id).exit_code == 1
    result = run("--json", "memory", "rm", user_id)
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"removed": [], "not_found": [user_id]}
    assert embedded_store.get([user_id])  # the turn is still there


def test_memory_rm_removes_known_ids_and_reports_unknown(embedded_store):
    keep = embedded_store.upsert_memory("Keep me")
    drop = embedded_store.upsert_memory("Drop me")
    result = run("--json", "memory", "rm", drop, "doc-missing")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"removed": [drop], "not_found": ["doc-missing"]}
    assert "doc-missing" in one_error_line(result)
    assert [d["id"] for d in run_json("memory", "list")] == [keep]


# ---- search ------------------------------------------------------------------------------------

@pytest.fixture
def seeded(embedded_store, tmp_path):
    s = embedded_store
    s.upsert_memory("Alice is vegetarian", scope="entity:alice", importance=5, tags=["food"])
    s.upsert_memory("Bob is allergic to nuts", scope="entity:bob", importance=5, tags=["food"])
    s.upsert_memory("The user commutes by train", importance=3)
    s.upsert_doc("Q: Can you read text in photos?\nA: Yes, the OCR specialist does.", "faq", topic="ocr")
    s.upsert_doc("Q: Can you set reminders?\nA: Yes, the calendar specialist does.", "faq", topic="calendar")
    s.upsert_summary("conv-trip", "Planned a weekend trip to Porto by train.", turn_range="1-4")
    s.upsert_turn("conv-trip", "Book the train to Porto", "Booked the 8:05 to Porto.")
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    return s


def test_search_memories_shows_score_parts(seeded):
    result = run("search", "what should I cook for Alice?", "--type", "memory", "--entity", "alice")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "score = similarity + words in common + importance + recency"
    assert lines[1].split()[1] == "=" and "Alice is vegetarian" in lines[1]
    assert "Bob" not in result.stdout  # another entity's memory is never returned


def test_search_memories_json_carries_every_part(seeded):
    data = run_json("search", "what should I cook for Alice?", "--type", "memory", "--entity", "alice", "--k", "2")
    assert data["query"] == "what should I cook for Alice?" and data["type"] == "memory"
    assert len(data["results"]) == 1  # the relevant one: ranked as the context ranks, behind the same floor
    for hit in data["results"]:
        assert set(hit) >= {"id", "text", "metadata", "score", "similarity", "similarity_part", "lexical_part",
                            "importance_part", "recency_part", "floor"}
        parts = hit["similarity_part"] + hit["lexical_part"] + hit["importance_part"] + hit["recency_part"]
        assert hit["score"] == pytest.approx(parts, abs=1e-5)
        assert hit["metadata"]["scope"] in ("global", "entity:alice")
    assert data["results"][0]["text"] == "Alice is vegetarian"
    global_only = run_json("search", "how does the user commute?", "--type", "memory")
    assert {h["metadata"]["scope"] for h in global_only["results"]} == {"global"}


@pytest.mark.parametrize("doc_type, query, expected", [
    ("faq", "read the words on this picture", "Q: Can you read text in photos?"),
    ("summary", "weekend in Porto", "Planned a weekend trip"),
    ("turn", "train booking", "Book"),
])
def test_search_each_type_returns_that_type(seeded, doc_type, query, expected):
    data = run_json("search", query, "--type", doc_type, "--k", "1")
    assert len(data["results"]) == 1
    hit = data["results"][0]
    assert hit["metadata"]["type"] == doc_type and hit["text"].startswith(expected)
    assert set(hit) == {"id", "text", "metadata", "similarity"}
    text = run("search", query, "--type", doc_type)
    assert text.exit_code == 0 and text.stdout.splitlines()[0] == "similarity"
    assert f"  {doc_type}  " in text.stdout


def test_search_persona_after_loading_it(seeded):
    assert run("persona", "load").exit_code == 0
    data = run_json("search", "how should you sound?", "--type", "persona", "--k", "1")
    assert data["results"][0]["text"] == "Warm and brief."


def test_search_without_type_searches_every_document(seeded):
    data = run_json("search", "train to Porto", "--k", "20")
    assert data["type"] is None
    assert {h["metadata"]["type"] for h in data["results"]} == {"memory", "faq", "summary", "turn"}
    assert len(run_json("search", "train to Porto")["results"]) == 5  # the library's default k


def test_search_bad_k_is_a_usage_error(seeded):
    for k in ("0", "many", "1001"):
        result = run("search", "anything", "--k", k)
        assert result.exit_code == 2
        assert "Invalid value for '--k'" in one_error_line(result)


def test_search_empty_store_says_so(embedded_store):
    result = run("search", "anything", "--type", "faq")
    assert result.exit_code == 0 and result.stdout.strip() == "no results"


# ---- turns, persona, schema, stats ---------------------------------------------------------------

def test_turns_oldest_first(embedded_store):
    embedded_store.upsert_turn("conv-42", "first question", "first answer")
    embedded_store.upsert_turn("conv-42", "second question", "second answer")
    docs = run_json("turns", "conv-42")
    assert [d["text"] for d in docs] == ["first question", "first answer", "second question", "second answer"]
    last = run_json("turns", "conv-42", "--k", "1")
    assert [d["metadata"]["turn_index"] for d in last] == [4]
    text = run("turns", "conv-42", "--k", "2").stdout.splitlines()
    assert text[0].startswith("#3 user ") and text[0].endswith("second question")
    assert run("turns", "conv-empty").stdout.strip() == "no turns in conv-empty"


def test_turns_bad_conversation_id_is_reported():
    result = run("turns", "not-a-conversation")
    assert result.exit_code == 1
    assert "conversation_id" in one_error_line(result)


def test_persona_load_and_show(tmp_path):
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    first = run_json("persona", "load")  # default path: BRAIN_PERSONA_PATH = persona.md
    assert first["changed"] is True and first["sections"] == 3
    again = run("persona", "load", str(tmp_path / "persona.md"))
    assert again.exit_code == 0 and "unchanged" in again.stdout

    block = run_json("persona", "show")["text"]
    assert block.startswith("You are Brain") and "Warm and brief." in block
    cut = run("persona", "show", "--max-chars", "20")
    assert cut.exit_code == 0 and len(cut.stdout.rstrip("\n")) == 20


def test_persona_show_without_persona_and_load_of_missing_file(embedded_store):
    empty = run("persona", "show")
    assert empty.exit_code == 0 and empty.stdout == "" and "brain persona load" in empty.stderr
    missing = run("persona", "load", "nowhere.md")
    assert missing.exit_code == 1
    assert "nowhere.md" in one_error_line(missing)


def test_schema_all_and_one():
    every = run_json("schema")
    assert set(every) == set(DOC_TYPES)
    memory = run_json("schema", "memory")
    assert memory["document_type"] == "memory" and "importance" in memory["fields"]
    text = run("schema", "memory").stdout
    assert text.startswith("memory:") and "importance" in text and "required" in text
    assert all(f"{t}:" in run("schema").stdout for t in DOC_TYPES)


def test_schema_unknown_type_is_a_usage_error():
    result = run("schema", "recipe")
    assert result.exit_code == 2
    assert "recipe" in one_error_line(result)


def test_stats_counts_types_and_disk_size(embedded_store):
    embedded_store.upsert_memory("One fact")
    embedded_store.upsert_turn("conv-1", "hi", "hello")
    data = run_json("stats")
    assert data["by_type"] == {"persona": 0, "faq": 0, "memory": 1, "turn": 2, "summary": 0}
    assert data["documents"] == 3
    assert data["embedder"] == "local/minilm-l6-v2" and data["dimension"] == 384
    assert data["disk_bytes"] > 0
    text = run("stats").stdout
    assert "documents   3" in text and "local/minilm-l6-v2" in text and "on disk" in text


def test_json_is_accepted_on_the_group_and_on_the_command(embedded_store):
    embedded_store.upsert_memory("One fact")
    on_group = run("--json", "stats")
    on_command = run("stats", "--json")
    assert on_group.exit_code == on_command.exit_code == 0
    assert json.loads(on_group.stdout) == json.loads(on_command.stdout)


def test_data_dir_option_overrides_the_environment(tmp_path):
    env = {"BRAIN_DATA_DIR": str(tmp_path / "from-env")}
    assert run("--data-dir", str(tmp_path / "from-option"), "memory", "add", "Stored here", env=env).exit_code == 0
    assert (tmp_path / "from-option" / "chroma").is_dir()
    assert not (tmp_path / "from-env").exists()
    assert run_json("--data-dir", str(tmp_path / "from-option"), "stats")["by_type"]["memory"] == 1
    assert run("--json", "init", env=env).exit_code == 0
    assert (tmp_path / "from-env" / "chroma").is_dir()


# ---- init and ingest: the CLI's wiring, with stand-ins for the library calls -----------------------

def ingest_report(ok=True):
    errors = [] if ok else [{"path": "kb/bad.jsonl", "line": 3, "message": "not valid JSON"}]
    return IngestReport(files_read=2, added=5, files_new=2, embedded=5, errors=errors)


def test_ingest_passes_options_through_and_exits_1_on_errors(monkeypatch, tmp_path):
    calls = []

    def ingest_paths(store, paths, *, prune=False, dry_run=False, progress=False):
        calls.append((paths, prune, dry_run, progress))
        return ingest_report(ok=not any(p.name == "bad" for p in paths))

    monkeypatch.setitem(sys.modules, "brain.features.ingest", types.SimpleNamespace(ingest_paths=ingest_paths))
    (tmp_path / "kb").mkdir()
    (tmp_path / "bad").mkdir()
    ok = run("ingest", "kb", "--prune", "--dry-run")
    assert ok.exit_code == 0 and ok.stdout.strip() == ingest_text(ingest_report())
    assert ok.stdout.startswith("2 files read, 2 new, 0 changed, 0 unchanged. 5 documents added (5 embedded)")
    assert calls == [([Path("kb")], True, True, True)]
    failed = run("ingest", "bad")
    assert failed.exit_code == 1
    assert failed.stdout.strip() == ingest_text(ingest_report(ok=False))
    assert failed.stdout.strip().endswith("1 error:\n  kb/bad.jsonl:3: not valid JSON")
    assert failed.stderr.strip() == "error: ingest found 1 error; the report lists them"
    as_json = run("--json", "ingest", "bad")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["ok"] is False
    assert run("ingest", "missing-dir").exit_code == 2
    assert run("ingest").exit_code == 2


def test_ingest_stopped_with_ctrl_c_exits_130_saying_how_to_complete(monkeypatch, tmp_path):
    def ingest_paths(store, paths, **options):
        raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "brain.features.ingest", types.SimpleNamespace(ingest_paths=ingest_paths))
    (tmp_path / "kb").mkdir()
    result = run("ingest", "kb")
    assert result.exit_code == 130 and result.stdout == ""
    assert "run the same command again" in one_error_line(result)


@pytest.mark.subprocess
def test_a_command_closes_what_it_opened(tmp_path):
    added = run_json("memory", "add", "Alice is vegetarian")
    # the in-process command released the data directory: another process can open it
    listed = brain_subprocess(tmp_path, "--json", "memory", "list")
    assert listed.returncode == 0, listed.stderr
    assert [d["id"] for d in json.loads(listed.stdout)] == [added["id"]]


def test_init_calls_startup_with_settings_and_persona_path(monkeypatch, tmp_path):
    calls = []

    class Store:
        def stats(self):
            return {"backend": "embedded", "embedder": "local/minilm-l6-v2", "dimension": 384, "documents": 0}

    class Report:
        store, persona, indexed, seconds, warnings, mirror_sync = Store(), None, {"memory": 0}, 0.5, [], None

        def to_dict(self):
            return {"persona": None}

    def startup(settings=None, *, persona_path=None):
        calls.append((settings.data_dir, persona_path))
        return Report()

    monkeypatch.setitem(sys.modules, "brain.app.startup", types.SimpleNamespace(startup=startup))
    result = run("--data-dir", str(tmp_path / "d"), "init", "--persona", "p.md")
    assert result.exit_code == 0 and result.stdout.strip() == (
        "store: embedded (local/minilm-l6-v2, 384-d), 0 documents\npersona: none loaded\nin-process indexes: memory 0\n"
        "ready in 0.50 s")
    assert calls == [(tmp_path / "d", Path("p.md"))]
    assert run_json("init") == {"persona": None}


# ---- init and ingest against the real modules ------------------------------------------------------

def test_init_opens_the_store_and_loads_the_persona(tmp_path):
    pytest.importorskip("brain.app.startup")
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    first = run_json("init")
    assert first["persona"]["changed"] is True and first["persona"]["sections"] == 3
    assert first["store"]["by_type"]["persona"] == 3
    again = run("init")
    assert again.exit_code == 0, again.stderr
    assert "unchanged" in again.stdout
    assert run_json("init")["persona"]["changed"] is False


def test_init_without_persona_file_still_starts(tmp_path):
    pytest.importorskip("brain.app.startup")
    result = run("init", "--persona", "nowhere.md")
    assert result.exit_code == 0, result.stderr
    assert "nowhere.md" in result.stdout


def _write_kb(directory: Path) -> Path:
    directory.mkdir()
    rows = [
        {"question": "Can you read text in photos?", "answer": "Yes, the OCR specialist does.", "topic": "ocr"},
        {"question": "Can you set reminders?", "answer": "Yes, the calendar specialist does.", "topic": "calendar"},
    ]
    path = directory / "faq.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_ingest_adds_then_finds_nothing_new(tmp_path):
    pytest.importorskip("brain.features.ingest")
    _write_kb(tmp_path / "kb")
    dry = run_json("ingest", "kb", "--dry-run")
    assert dry["dry_run"] is True and dry["errors"] == []
    assert run_json("stats")["by_type"]["faq"] == 0
    first = run_json("ingest", "kb")
    assert first["files_read"] == 1 and first["added"] >= 1 and first["errors"] == []
    again = run_json("ingest", "kb")
    assert again["added"] == 0 and again["updated"] == 0 and again["unchanged"] >= 1
    text = run("ingest", "kb")
    assert text.exit_code == 0 and text.stdout.strip()
    assert run_json("search", "read the words in a picture", "--type", "faq", "--k", "1")["results"]


def test_ingest_reports_a_bad_line_and_exits_1(tmp_path):
    pytest.importorskip("brain.features.ingest")
    path = _write_kb(tmp_path / "kb")
    path.write_text(path.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    result = run("--json", "ingest", "kb")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["errors"] and report["errors"][0]["path"].endswith("faq.jsonl")
    text = run("ingest", "kb")
    assert text.exit_code == 1
    assert "faq.jsonl:3" in text.stdout  # the report names the file and line
    assert one_error_line(text).startswith("error: ingest found")


# ---- end to end, in a subprocess -----------------------------------------------------------------

def brain_subprocess(tmp_path: Path, *args: str, extra_env: dict[str, str] | None = None):
    env = {**os.environ, "BRAIN_DATA_DIR": str(tmp_path / "data"), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "brain.shells.cli", *args], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )


@pytest.mark.subprocess
def test_subprocess_help(tmp_path):
    result = brain_subprocess(tmp_path, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: brain ") and "memory" in result.stdout
    installed = Path(sys.executable).with_name("brain")
    if installed.exists():  # the console script declared in pyproject.toml
        out = subprocess.run([str(installed), "memory", "--help"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0 and "add" in out.stdout


@pytest.mark.subprocess
def test_subprocess_memory_round_trip_json(tmp_path):
    added = brain_subprocess(tmp_path, "--json", "memory", "add", "Alice is vegetarian", "--importance", "5",
                             "--tag", "food", "--scope", "entity:alice")
    assert added.returncode == 0, added.stderr
    doc = json.loads(added.stdout)
    assert doc["metadata"]["importance"] == 5 and doc["metadata"]["tags"] == ["food"]

    listed = json.loads(brain_subprocess(tmp_path, "memory", "list", "--json").stdout)
    assert [d["id"] for d in listed] == [doc["id"]]
    shown = json.loads(brain_subprocess(tmp_path, "--json", "memory", "show", doc["id"]).stdout)
    assert shown["text"] == "Alice is vegetarian" and shown["metadata"]["scope"] == "entity:alice"
    removed = json.loads(brain_subprocess(tmp_path, "--json", "memory", "rm", doc["id"]).stdout)
    assert removed == {"removed": [doc["id"]], "not_found": []}

    gone = brain_subprocess(tmp_path, "memory", "show", doc["id"])
    assert gone.returncode == 1 and gone.stdout == ""
    assert gone.stderr.count("\n") == 1 and gone.stderr.startswith("error: ")
    assert (tmp_path / "data" / "chroma").is_dir()


@pytest.mark.subprocess
def test_subprocess_usage_error_exits_2(tmp_path):
    result = brain_subprocess(tmp_path, "search", "hello", "--type", "recipe")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and "--type" in result.stderr


@pytest.mark.subprocess
def test_subprocess_bad_setting_is_one_line_without_traceback(tmp_path):
    result = brain_subprocess(tmp_path, "stats", extra_env={"RAG_MEMORY_TOP_K": "99"})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "RAG_MEMORY_TOP_K" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.subprocess
def test_subprocess_debug_shows_the_traceback(tmp_path):
    result = brain_subprocess(tmp_path, "--debug", "memory", "show", "doc-nope")
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr and "NotFound" in result.stderr


# ---- the reports the commands print --------------------------------------------------------------

def test_every_mirror_report_has_to_dict_and_text():
    from brain.app.restore import RebuildReport, RecoveryReport
    from brain.features.mirror import RestoreReport, SyncReport, VerifyReport
    from brain.shells.cli.reports import rebuild_text, recovery_text, restore_text, verify_text

    sync = SyncReport(added=2, unchanged=1)
    reports = [sync, VerifyReport(checked=3, missing=["doc-a"]), RestoreReport(restored=1, by_type={"memory": 1}),
               RecoveryReport(RestoreReport(restored=1), not_restored=["the FAQ: brain ingest"]),
               RebuildReport("m.db", ["m.db.old"], sync)]
    texts = [SyncReport.summary, verify_text, restore_text, recovery_text, rebuild_text]
    for report, text in zip(reports, texts):
        data = report.to_dict()
        json.dumps(data)
        assert text(report)
    assert reports[0].to_dict()["changed"] == 2 and reports[1].to_dict()["ok"] is False
    assert reports[3].to_dict()["mirror"]["restored"] == 1 and reports[4].to_dict()["written"] == 2
