"""Keyword recall over the mirror: stemmed words (read by engramai too), older indexes rebuilt, BM25 labelled."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

import brain.store.facade
import brain.wiring
from brain.app.core import open_store
from brain.config import Settings
from brain.features.mirror import EngramMirror, KeywordHit
from brain.features.mirror.schema import FTS_TOKENIZER, fts_is_current
from brain.shells.cli import cli

MODEL = "local/minilm-l6-v2"
TS = "2026-03-01T10:00:00+00:00"
OLD_FTS = "CREATE VIRTUAL TABLE memories_fts USING fts5(content, content=memories, content_rowid=rowid)"


def meta(**extra):
    base = {"type": "memory", "timestamp": TS, "source": "chat", "scope": "global", "importance": 3, "tags": []}
    return {**base, **extra}


DOCS = [
    {"id": "m-peanuts", "text": "Alice is allergic to peanuts", "metadata": meta(importance=5)},
    {"id": "m-running", "text": "Bob runs along the river every morning", "metadata": meta()},
    {"id": "m-tea", "text": "Carol drinks green tea", "metadata": meta()},
]


@pytest.fixture(autouse=True)
def _no_engram_extractor(monkeypatch):
    """engramai would call an LLM to extract facts when these are set; the tests use its raw storage."""
    for key in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "ENGRAM_EXTRACTOR_MODEL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent-home-for-engram")


def fts_sql(path) -> str:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts'").fetchone()[0]


def test_keyword_recall_matches_other_forms_of_a_word(tmp_path):
    with EngramMirror(tmp_path / "m.db", MODEL) as mirror:
        mirror.upsert(DOCS)
        assert [h.id for h in mirror.keyword_recall("peanut", 5)] == ["m-peanuts"]
        assert [h.id for h in mirror.keyword_recall("running", 5)] == ["m-running"]
        assert [h.id for h in mirror.keyword_recall("Teas", 5)] == ["m-tea"]
        assert mirror.keyword_recall("coffee", 5) == []
    assert fts_is_current(fts_sql(tmp_path / "m.db"))


def test_engramai_reads_the_stemmed_index_and_writes_into_it(tmp_path):
    from engram import Memory
    from engram.store import SQLiteStore

    path = tmp_path / "m.db"
    with EngramMirror(path, MODEL) as mirror:
        mirror.upsert(DOCS)
    store = SQLiteStore(str(path))  # engram's own keyword search
    try:
        assert [e.id for e in store.search_fts("peanut")] == ["m-peanuts"]
        assert [e.id for e in store.search_fts("running")] == ["m-running"]
    finally:
        store.close()
    mem = Memory(str(path))
    mem.set_extractor(None)
    try:
        assert mem.recall("peanut", limit=1)[0]["id"] == "m-peanuts"
        own = mem.add("Dana collects vintage postcards", type="relational", extract=False)
    finally:
        mem.close()
    assert fts_is_current(fts_sql(path))  # engram kept our tokenizer
    with EngramMirror(path, MODEL) as mirror:
        assert mirror.fts_rebuilt is False
        assert [h.id for h in mirror.keyword_recall("postcard", 5)] == [own]
        assert mirror.integrity_check() == "ok"


def test_an_index_without_stemming_is_rebuilt_at_open(tmp_path):
    path = tmp_path / "m.db"
    with EngramMirror(path, MODEL) as mirror:
        mirror.upsert(DOCS)
    with sqlite3.connect(path) as raw:  # the index as an older brain (or engramai) created it
        raw.execute("DROP TABLE memories_fts")
        raw.execute(OLD_FTS)
        raw.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
        assert raw.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'peanut'").fetchall() == []
    assert not fts_is_current(fts_sql(path))
    with EngramMirror(path, MODEL) as mirror:
        assert mirror.fts_rebuilt is True
        assert [h.id for h in mirror.keyword_recall("peanut", 5)] == ["m-peanuts"]
        mirror.upsert([{"id": "m-new", "text": "Erin bakes cookies", "metadata": meta()}])  # triggers still work
        assert [h.id for h in mirror.keyword_recall("cookie", 5)] == ["m-new"]
        assert mirror.integrity_check() == "ok"
    assert f"tokenize='{FTS_TOKENIZER}'" in fts_sql(path)
    with EngramMirror(path, MODEL) as mirror:
        assert mirror.fts_rebuilt is False  # once


def test_a_file_engramai_created_gets_the_stemmed_index(tmp_path):
    from engram import Memory

    path = tmp_path / "engram.db"
    mem = Memory(str(path))
    mem.set_extractor(None)
    own = mem.add("Frank grows tomatoes", type="factual", extract=False)
    mem.close()
    assert not fts_is_current(fts_sql(path))
    with EngramMirror(path, MODEL) as mirror:
        assert [h.id for h in mirror.keyword_recall("tomato", 5)] == [own]


def test_keyword_hits_carry_a_bm25_score_not_a_similarity(tmp_path):
    with EngramMirror(tmp_path / "m.db", MODEL) as mirror:
        mirror.upsert(DOCS + [{"id": "m-peanut-butter", "text": "peanut butter on toast", "metadata": meta()}])
        hits = mirror.keyword_recall("peanut butter", 5)
    assert all(isinstance(h, KeywordHit) for h in hits)
    assert [h.id for h in hits] == ["m-peanut-butter", "m-peanuts"]  # both words beat one
    assert hits[0].bm25 > hits[1].bm25 > 0 and hits[0].score == hits[0].bm25
    data = hits[0].to_dict()
    assert "bm25" in data and "similarity" not in data


@pytest.fixture
def cli_env(monkeypatch, local_embedder, tmp_path):
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    monkeypatch.setattr(brain.wiring, "get_embedder", lambda settings: local_embedder, raising=False)
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder) as store:
        return store.upsert_memory("Alice is allergic to peanuts", importance=5)


def test_cli_keyword_recall_finds_peanuts_and_says_bm25(cli_env):
    result = CliRunner().invoke(cli, ["mirror", "recall", "peanut", "--keyword"])
    assert result.exit_code == 0, result.stderr
    line = result.stdout.strip()
    assert line.startswith("bm25 ") and cli_env in line and "similarity" not in line
    data = json.loads(CliRunner().invoke(cli, ["--json", "mirror", "recall", "peanut", "--keyword"]).stdout)
    assert [h["id"] for h in data["results"]] == [cli_env] and data["results"][0]["bm25"] > 0
    vector = CliRunner().invoke(cli, ["mirror", "recall", "what is Alice allergic to?"])
    assert vector.exit_code == 0 and vector.stdout.startswith("cosine ")


def test_cli_recall_without_a_mirror_creates_nothing(monkeypatch, tmp_path, local_embedder):
    monkeypatch.setattr(brain.wiring, "get_embedder", lambda settings: local_embedder, raising=False)
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "none"), "mirror", "recall", "x", "--keyword"])
    assert result.exit_code == 1 and "there is no mirror" in result.stderr
    assert not (tmp_path / "none").exists()

