"""The README's main job: builds ./data, prints ranked memories with score parts, FAQ hits and persona."""

from __future__ import annotations

import re
import shutil
import sqlite3

import pytest

from brain.shells.demo import main
from tests.conftest import ROOT


@pytest.mark.slow
def test_demo_builds_the_store_and_is_idempotent(tmp_path, monkeypatch, capsys):
    shutil.copy(ROOT / "persona.md", tmp_path / "persona.md")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    assert main([]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "data" / "chroma").is_dir()
    assert "Persona: 4 sections, loaded" in out
    added = int(re.search(r"Knowledge base: \d+ files, (\d+) documents added", out).group(1))
    assert added >= 12  # every sample FAQ row, plus the Markdown sections
    lines = [line for line in out.splitlines() if re.match(r"\s+\d\.\d{3} = ", line)]
    # only the memory relevant to the question (photos of train tickets), with its score parts; the others
    # (a passport, a preference, a commute, trains in Portugal) are below the relevance floor, and the output
    # says so; alice's most important facts are always kept in mind, whatever the question
    assert len(lines) == 1 and "train tickets" in lines[0] and "entity:alice" in lines[0]
    core = out.split("Always kept in mind about alice")[1].split("Ranked memories")[0]
    assert "[importance 5]  Alice's passport expires in March 2027" in core
    assert (
        "## Always keep in mind about this person" in out
        and "- Alice's passport expires in March 2027 (about alice, " in out
    )
    for line in lines:
        total, sim, lex, imp, rec = map(float, re.findall(r"-?\d\.\d{3}", line)[:5])
        assert abs(total - (sim + lex + imp + rec)) < 0.002
    # the question is in the first person ("my train ticket"), so alice's memories that stand out among hers pass
    # a lower floor: one more of them does, and the margin below the best keeps it out of the section
    assert re.search(r"\(3 of 5 memories below the relevance floor 0\.\d\d", out)
    faq = out.split("FAQ hits")[1].split("Recent turns")[0]
    assert "[ocr]" in faq.splitlines()[1]  # the sample question is about reading text in a photo
    specialists = out.split("Specialists for this question")[1].split("Prompt block")[0]
    assert specialists.splitlines()[1].split()[-1] == "ocr"
    prompt = out.split("Prompt block")[1]
    assert "## Persona" in prompt and "Tone" in prompt and "## What you remember" in prompt
    assert "Engram mirror: 5 memories" in out

    assert main([]) == 0
    again = capsys.readouterr().out
    assert "Persona: 4 sections, unchanged" in again
    assert f"0 documents added, {added} unchanged, 0 removed; conversation: 0 new turns" in again
    assert "'memory': 5" in again and "'turn': 2" in again

    # another person is shown none of alice's facts and none of her conversation
    assert main(["What do you know about my passport?", "--entity", "bob"]) == 0
    bob = capsys.readouterr().out.split("Question:")[1]
    assert "Alice" not in bob and "Porto again" not in bob


def test_demo_reports_bad_settings_as_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_MEMORY_TOP_K", "99")
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "RAG_MEMORY_TOP_K='99'" in err and "1..20" in err


def _stored(tmp_path, local_embedder) -> tuple[dict, dict]:
    """Everything the demo stored: Chroma's documents (text, metadata, vector) and the mirror's tables."""
    from brain.app.core import open_store
    from brain.config import Settings

    settings = Settings(data_dir=tmp_path / "data")
    with open_store(settings, embedder=local_embedder, mirror=False) as store:
        docs = {d.id: (d.text, d.metadata, d.embedding.tobytes()) for d in store.get(include_embeddings=True)}
    con = sqlite3.connect(f"file:{settings.mirror_file}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        mirror = {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}  # noqa: S608 - names from sqlite_master
    finally:
        con.close()
    return docs, mirror


@pytest.mark.slow
def test_running_the_demo_again_writes_nothing(tmp_path, monkeypatch, capsys, local_embedder):
    shutil.copy(ROOT / "persona.md", tmp_path / "persona.md")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    assert main([]) == 0
    first_docs, first_mirror = _stored(tmp_path, local_embedder)
    assert sum(1 for _, meta, _ in first_docs.values() if meta["type"] == "memory") == 5
    assert main([]) == 0
    again_docs, again_mirror = _stored(tmp_path, local_embedder)
    assert again_docs == first_docs  # no text, metadata (timestamps included) or vector changed
    assert again_mirror == first_mirror


@pytest.mark.slow
def test_demo_finds_its_project_from_a_subfolder(tmp_path, monkeypatch, capsys):
    """Persona, knowledge base and data directory come from the project, not the working directory."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "persona.md", project / "persona.md")
    shutil.copytree(ROOT / "config", project / "config")
    (project / "notes" / "deep").mkdir(parents=True)
    monkeypatch.chdir(project / "notes" / "deep")
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "Persona: 4 sections, loaded" in out and "Engram mirror: 5 memories" in out
    assert (project / "data" / "chroma").is_dir() and not (project / "notes" / "deep" / "data").exists()


def test_demo_without_a_project_says_where_to_point_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no knowledge base to ingest") and "--kb" in err
