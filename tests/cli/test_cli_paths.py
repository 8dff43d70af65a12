"""`brain` from any working directory: one store per project, read-only commands never create one.

Each test builds a small project under its temp directory (``config/defaults.env``, ``persona.md``,
``config/kb``) and runs the CLI in process (CliRunner) from different folders, and once as a
subprocess. No BRAIN_DATA_DIR is set: the paths come from the project, as for a user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import brain.store.facade
import brain.wiring
from brain.shells.cli import cli

PERSONA = "You are Brain.\n\n## Tone\nWarm and brief.\n"
FAQ = "".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in [
    ("Can you read text in photos?", "Yes, the OCR specialist does."),
    ("Can you set reminders?", "Yes, the calendar specialist does."),
    ("Can you search the web?", "Yes, ask in plain words."),
])
GUIDE = "# Scanning\nLay the page flat.\n\n## Light\nUse even light.\n"


@pytest.fixture(autouse=True)
def _model(monkeypatch, local_embedder):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    monkeypatch.setattr(brain.wiring, "get_embedder", lambda settings: local_embedder, raising=False)


@pytest.fixture
def proj(tmp_path) -> Path:
    root = tmp_path / "proj"
    (root / "config" / "kb" / "more").mkdir(parents=True)
    (root / "config" / "defaults.env").write_text("BRAIN_DATA_DIR=data\nBRAIN_PERSONA_PATH=persona.md\n")
    (root / "persona.md").write_text(PERSONA)
    (root / "config" / "kb" / "faq.jsonl").write_text(FAQ)
    (root / "config" / "kb" / "more" / "guide.md").write_text(GUIDE)
    return root


def run(cwd: Path, *args: str):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, list(args))
    finally:
        os.chdir(old)


def run_json(cwd: Path, *args: str):
    result = run(cwd, "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def data_dirs(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("data") if p.is_dir())


READ_ONLY = [
    ["stats"], ["search", "anything"], ["search", "anything", "--type", "memory", "--entity", "alice"],
    ["memory", "list"], ["memory", "show", "doc-1"], ["memory", "rm", "doc-1"], ["turns", "conv-1"],
    ["persona", "show"], ["consolidate", "--dry-run"], ["mirror", "verify"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_read_only_commands_never_create_a_store(proj, args):
    result = run(proj / "config", *args)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and result.stdout == ""
    line = lines[0]
    assert line.startswith("error: there is no brain store in ")
    assert str(proj / "data") in line  # where it looked
    assert f"BRAIN_DATA_DIR in {proj / 'config' / 'defaults.env'}" in line  # and why there
    assert "brain init" in line and "brain ingest" in line  # how to make one
    assert data_dirs(proj.parent) == []


def test_export_and_mirror_recall_never_create_a_store(proj, tmp_path):
    exported = run(proj, "export", str(tmp_path / "out"))
    assert exported.exit_code == 1 and "no brain store" in exported.stderr and not (tmp_path / "out").exists()
    recalled = run(proj, "mirror", "recall", "tea")
    assert recalled.exit_code == 1
    assert f"no mirror at {proj / 'data' / 'mirror.db'}" in recalled.stderr
    assert data_dirs(proj.parent) == []


def test_outside_any_project_read_only_commands_name_the_user_level_place(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run(elsewhere, "stats")
    assert result.exit_code == 1
    assert str(tmp_path / "xdg-data" / "brain") in result.stderr and "user-level" in result.stderr
    assert not (elsewhere / "data").exists() and not (tmp_path / "xdg-data").exists()


def test_init_creates_and_every_folder_of_the_project_reaches_the_same_store(proj):
    created = run_json(proj / "config" / "kb", "init")
    assert created["persona"]["sections"] == 2 and created["persona"]["changed"] is True
    assert (proj / "data" / "chroma").is_dir() and data_dirs(proj.parent) == [proj / "data"]
    run_json(proj / "config", "memory", "add", "Alice drinks green tea", "--entity", "alice")
    for cwd in (proj, proj / "config", proj / "config" / "kb" / "more"):
        stats = run_json(cwd, "stats")
        assert stats["backend"] == str(proj / "data" / "chroma")
        assert stats["by_type"]["memory"] == 1 and stats["by_type"]["persona"] == 2
        assert run_json(cwd, "persona", "show")["text"].startswith("You are Brain.")
        assert run_json(cwd, "init")["persona"]["changed"] is False
    assert data_dirs(proj.parent) == [proj / "data"]


def test_data_dir_and_persona_options_are_relative_to_the_working_directory(proj, tmp_path):
    assert run(proj / "config", "--data-dir", "../data", "init", "--persona", "../persona.md").exit_code == 0
    assert run_json(proj, "stats")["by_type"]["persona"] == 2  # the same store, seen from the project root
    other = run_json(tmp_path, "--data-dir", "proj/data", "stats")
    assert other["backend"] == str(proj / "data" / "chroma")


def test_project_option_and_paths_command(proj, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    described = run_json(elsewhere, "--project", str(proj), "paths")
    assert described["project"] == str(proj)
    assert described["data_dir"] == {"path": str(proj / "data"), "exists": False,
                                     "from": f"BRAIN_DATA_DIR in {proj / 'config' / 'defaults.env'}"}
    assert described["persona_path"]["exists"] is True and described["store"] is False
    assert run(elsewhere, "--project", str(proj), "init").exit_code == 0
    assert run_json(proj / "config", "paths")["store"] is True
    text = run(proj / "config", "paths").stdout
    assert f"project      the project {proj}" in text and str(proj / "persona.md") in text


def test_ingesting_the_kb_from_another_folder_or_path_adds_nothing(proj, tmp_path):
    """The issue's case: `cd config && brain --data-dir ../data ingest kb` after an ingest from the root."""
    first = run_json(proj, "ingest", "config/kb")
    assert first["files_new"] == 2 and first["added"] > 0 and first["embedded"] > 0
    count = run_json(proj, "stats")["by_type"]["faq"]
    (tmp_path / "link").symlink_to(proj / "config" / "kb")
    for cwd, args in [
        (proj / "config", ["--data-dir", "../data", "ingest", "kb"]),
        (proj / "config" / "kb", ["ingest", "."]),
        (tmp_path, ["--data-dir", "proj/data", "ingest", str(proj / "config" / "kb")]),
        (tmp_path, ["--data-dir", "proj/data", "ingest", "link", "--prune"]),
        (proj / "config" / "kb" / "more", ["ingest", "../faq.jsonl", "guide.md"]),
    ]:
        again = run_json(cwd, *args)
        assert (again["added"], again["embedded"], again["removed"], again["files_unchanged"]) == (0, 0, 0, 2), args
        assert run_json(proj, "stats")["by_type"]["faq"] == count
    text = run(proj, "ingest", "config/kb").stdout
    assert text.startswith("2 files read, 0 new, 0 changed, 2 unchanged.")


def test_first_ingest_summary_counts_new_and_bad_files(proj):
    (proj / "config" / "kb" / "broken.jsonl").write_text("{not json\n")
    result = run(proj, "ingest", "config/kb")
    assert result.exit_code == 1
    assert result.stdout.startswith("2 files read, 2 new, 0 changed, 0 unchanged; 1 bad file.")


@pytest.mark.subprocess
def test_subprocess_from_a_subfolder_finds_the_project(proj):
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    missing = subprocess.run([sys.executable, "-m", "brain.shells.cli", "stats"], cwd=proj / "config" / "kb", env=env,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "brain init" in missing.stderr and data_dirs(proj.parent) == []
    made = subprocess.run([sys.executable, "-m", "brain.shells.cli", "--json", "init"], cwd=proj / "config", env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert data_dirs(proj.parent) == [proj / "data"]


@pytest.mark.server
def test_read_only_commands_never_create_a_collection_on_a_chroma_server(proj, chroma_server, monkeypatch):
    import uuid

    import chromadb

    name = f"t-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("BRAIN_CHROMA_URL", chroma_server)
    monkeypatch.setenv("BRAIN_COLLECTION", name)
    result = run(proj, "stats")
    assert result.exit_code == 1
    assert f"the Chroma server at {chroma_server} has no collection {name!r}" in result.stderr
    assert "brain init" in result.stderr
    host, port = chroma_server.rsplit(":", 1)
    client = chromadb.HttpClient(host=host.split("//")[1], port=int(port))
    assert name not in {c.name for c in client.list_collections()}
    assert run(proj, "init").exit_code == 0
    assert name in {c.name for c in client.list_collections()}
    assert run_json(proj, "stats")["collection"] == name
