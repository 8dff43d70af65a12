"""brain.open() and Brain: every part wired once, built on first use, closed in order."""

from __future__ import annotations

import shutil
import sqlite3
import threading

import pytest

import brain
from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.model.errors import ConfigError, StoreNotFound, StoreUnavailable, ValidationError
from brain.providers.summarizers import ExtractiveSummarizer
from brain.shells.cli.reports import backfill_text
from tests.conftest import ROOT, api_settings


def _summary_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "brain-summaries" and t.is_alive())


def test_open_wires_each_part_once(tmp_path, local_embedder):
    with brain.open(api_settings(tmp_path), embedder=local_embedder) as b:
        assert isinstance(b, brain.Brain) and isinstance(b.store, RagStore)
        assert b.settings is b.store.settings and b.store.embedder is local_embedder
        assert b.mirror is b.store.mirror and b.mirror is not None
        assert b.chat is b.chat and b.chat.store is b.store
        assert b.chat.summarizer is b.summarizer  # one summariser, the settings' one
        assert b.summarizer.name == b.summarizer.name and b.summarizer is b.summarizer


def test_settings_or_fields_not_both(tmp_path, local_embedder):
    with pytest.raises(ConfigError, match="not both"):
        brain.open(api_settings(tmp_path), data_dir=tmp_path / "other")
    with brain.open(data_dir=tmp_path / "fields", embedder=local_embedder) as b:
        assert b.settings.data_dir == tmp_path / "fields"


def test_create_false_refuses_to_make_a_store(tmp_path, local_embedder):
    settings = api_settings(tmp_path)
    with pytest.raises(StoreNotFound):
        brain.open(settings, create=False, embedder=local_embedder)
    assert not (settings.data_dir / "chroma").exists()


def test_the_chat_layer_is_built_on_first_use_only(tmp_path, local_embedder):
    before = _summary_threads()
    with brain.open(api_settings(tmp_path), embedder=local_embedder) as b:
        b.store.upsert_memory("Alice likes tea")
        b.store.upsert_memory("Alice likes tea a lot")
        report = b.consolidate(dry_run=True, threshold=0.5)  # consolidation needs no chat layer
        assert report.dry_run and report.scanned == 2 and report.removed == 1
        assert _summary_threads() == before
        b.chat.build_context(None, "tea?")
        assert _summary_threads() == before + 1
    assert _summary_threads() == before


def test_close_writes_queued_summaries_and_closes_the_store(tmp_path, local_embedder):
    settings = api_settings(tmp_path, summary_every_n=1)
    b = brain.open(settings, embedder=local_embedder, start_worker=False, summarizer=ExtractiveSummarizer())
    exchange = b.chat.record_exchange(None, "I'm off to Porto tomorrow.", "Safe travels!")
    assert exchange.summaries_scheduled
    b.close()
    b.close()  # idempotent
    assert b.closed and b.store.mirror is None  # the store closed its mirror
    with pytest.raises(StoreUnavailable, match="closed"):
        _ = b.chat
    with open_store(settings, embedder=local_embedder) as store:
        assert store.count("summary") == 1


def test_a_brain_around_a_given_store_leaves_it_open(embedded_store):
    with brain.Brain(embedded_store, start_worker=False) as b:
        b.chat.remember("Bob plays the cello")
    assert embedded_store.count("memory") == 1  # still open: its opener closes it
    assert embedded_store.mirror is not None


def test_search_ranks_each_type_its_own_way(embedded_store):
    embedded_store.upsert_memory("Alice is vegetarian", entity="alice", importance=5)
    embedded_store.upsert_memory("Bob eats anything", entity="bob")
    embedded_store.upsert_memory("Alice's team meets on Mondays")
    embedded_store.upsert_doc("OCR reads text in images.", "faq", topic="ocr")
    embedded_store.upsert_doc("Bob's camera reads text in images.", "faq", topic="ocr", scope="entity:bob")
    b = brain.Brain(embedded_store)
    memories = b.search("what does Alice eat?", type="memory", entity="alice")
    assert memories[0].text == "Alice is vegetarian" and memories[0].importance_part > 0
    assert [h.metadata["type"] for h in b.search("read a photo", type="faq", k=1)] == ["faq"]
    untyped = b.search("Alice", k=10)
    assert {h.metadata["type"] for h in untyped} >= {"memory", "faq"}
    assert {h.metadata["scope"] for h in untyped} == {"global"}  # a search for no entity: no entity's documents
    # every type keeps to the scope rule: Bob's entry exists for Bob only
    assert [h.text for h in b.search("read a photo", type="faq", entity="alice", k=5)] == ["OCR reads text in images."]
    assert len(b.search("read a photo", type="faq", entity="bob", k=5)) == 2
    with pytest.raises(ValidationError, match="recipe"):
        b.search("x", type="recipe")


def test_specialists_are_registered_once_and_the_outcome_kept(tmp_path, local_embedder):
    yaml = tmp_path / "specialists.yaml"
    with brain.open(api_settings(tmp_path, specialists_path=yaml), embedder=local_embedder) as b:
        with pytest.raises(ConfigError, match="specialists.yaml"):
            _ = b.specialists
        shutil.copy(ROOT / "config" / "specialists.yaml", yaml)
        with pytest.raises(ConfigError, match="specialists.yaml"):
            _ = b.specialists  # the first registration's outcome stands: a read never registers
        registry = b.register_specialists(again=True)
        assert (
            registry is b.specialists and b.specialists.find_specialists("read the text in this photo")[0].id == "ocr"
        )
        assert b.register_specialists() is registry  # once: no second registration


def test_health_reports_each_part(tmp_path, local_embedder):
    with brain.open(api_settings(tmp_path), embedder=local_embedder, start_worker=False) as b:
        b.store.upsert_memory("Alice likes tea")
        plain, detailed = b.health(), b.health(detail=True)
    # the summariser is unreachable, and optional: information, not a fault
    assert plain["status"] == "ok" and plain["store"] == {"ok": True} and plain["notes"]
    assert detailed["store"] == {"ok": True, "documents": 1, "backend": "embedded"}
    assert detailed["embedder"]["name"] == local_embedder.name and "summarizer" in detailed["summariser"]
    assert detailed["mirror"]["ok"] is True


def test_startup_prepares_a_given_brain(tmp_path, local_embedder):
    from brain.app.startup import startup

    (tmp_path / "persona.md").write_text("You are Brain.\n\n## Tone\nWarm.\n", encoding="utf-8")
    settings = api_settings(tmp_path, persona_path=tmp_path / "persona.md")
    with brain.open(settings, embedder=local_embedder) as b:
        report = startup(brain=b, warm=False)
        assert report.brain is b and report.store is b.store and report.persona.sections == 2
        with pytest.raises(ConfigError, match="not both"):
            startup(Settings(data_dir=tmp_path / "x"), brain=b)


def test_the_mirror_calls_report_what_they_did(tmp_path, local_embedder):
    with brain.open(api_settings(tmp_path), embedder=local_embedder) as b:
        stored = b.store.upsert_memory("Alice is allergic to peanuts", importance=5)
        with sqlite3.connect(b.mirror.path) as conn:  # as if engram had written the row without a vector
            conn.execute("DELETE FROM memory_embeddings")
        report = b.backfill_mirror(progress=False)
        assert report.embedded == 1 and report.coverage.memories == 1 and report.coverage.with_vectors == 1
        assert report.to_dict()["coverage"]["ratio"] == 1.0 and "1 of 1 memories" in backfill_text(report)
        assert backfill_text(report).startswith("embedded 1 document;")
        assert b.verify_mirror().ok
        b.store.col.update(ids=[stored], metadatas=[{"importance": 2}])  # in Chroma only
        assert not b.verify_mirror().ok
        assert b.sync_mirror().updated == 1 and b.verify_mirror().ok
