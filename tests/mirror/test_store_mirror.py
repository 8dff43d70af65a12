"""Writes through the store reach the Engram mirror, atomically with Chroma."""

from __future__ import annotations

import numpy as np
import pytest

from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.features.mirror.sync import restore_from_mirror, sync_mirror, verify_mirror
from brain.model.errors import StoreUnavailable, ValidationError
from brain.store.indexes import memory_index
from brain.store.mirror_link import catch_up_mirror
from brain.store.retrieval import record_memory_use


def chroma_vector(store: RagStore, doc_id: str) -> np.ndarray:
    return np.asarray(store.col.get(ids=[doc_id], include=["embeddings"])["embeddings"][0], dtype=np.float32)


def test_a_memory_write_reaches_the_mirror_with_chromas_vector(store):
    doc_id = store.upsert_memory("Alice is allergic to peanuts", importance=5, tags=["health"])
    [mirrored] = store.mirror.get([doc_id])
    assert mirrored.text == "Alice is allergic to peanuts"
    assert mirrored.metadata["importance"] == 5 and mirrored.metadata["tags"] == ["health"]
    assert np.array_equal(mirrored.embedding, chroma_vector(store, doc_id))
    assert store.settings.mirror_file.exists() or store.settings.chroma_url


def test_only_configured_types_are_mirrored(tmp_path, local_embedder):
    plain = open_store(Settings(data_dir=tmp_path / "a"), embedder=local_embedder)
    faq = plain.upsert_doc("We open at nine.", "faq")
    mem = plain.upsert_memory("Bob likes chess")
    assert plain.mirror.ids() == {mem}
    plain.close()
    wide = open_store(Settings(data_dir=tmp_path / "b", mirror_types="memory,faq,turn"), embedder=local_embedder)
    faq = wide.upsert_doc("We open at nine.", "faq")
    turns = wide.upsert_turn("conv-1", "hello", "hi there")
    summary = wide.upsert_summary("conv-1", "they said hello")
    assert wide.mirror.ids() == {faq, *turns}
    assert summary not in wide.mirror.ids()
    wide.close()


def test_updates_and_deletes_reach_the_mirror(store):
    doc_id = store.upsert_memory("Carol drinks coffee")
    store.update_memory(doc_id, "Carol drinks tea", importance=4)
    [row] = store.mirror.get([doc_id])
    assert row.text == "Carol drinks tea" and row.metadata["importance"] == 4
    assert np.array_equal(row.embedding, chroma_vector(store, doc_id))
    store.delete(doc_id)
    assert store.mirror.get([doc_id]) == []


def test_a_type_change_removes_the_id_from_the_mirror(embedded_store):
    doc_id = embedded_store.upsert_doc("Dana keeps bees", "memory")
    embedded_store.upsert_doc("Dana keeps bees", "faq", id=doc_id)
    assert doc_id not in embedded_store.mirror.ids()


def test_failed_chroma_write_leaves_the_mirror_unchanged(embedded_store, monkeypatch):
    store = embedded_store
    kept = store.upsert_memory("Erin plays the oboe")

    def failing_upsert(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(store.col, "upsert", failing_upsert)
    with pytest.raises(StoreUnavailable):
        store.upsert_memory("Frank collects stamps")
    with pytest.raises(StoreUnavailable):
        store.update_memory(kept, "Erin plays the bassoon")
    monkeypatch.undo()
    assert store.mirror.ids() == {kept}
    assert store.mirror.get([kept])[0].text == "Erin plays the oboe"
    assert verify_mirror(store, store.mirror).ok


def test_invalid_batch_touches_neither(embedded_store):
    with pytest.raises(ValidationError):
        embedded_store.upsert_docs(
            [{"text": "fine", "type": "memory"}, {"text": "bad", "type": "memory", "importance": 7}]
        )
    assert embedded_store.mirror.count() == 0 and embedded_store.count() == 0


def test_mirror_can_be_disabled(tmp_path, local_embedder):
    store = open_store(Settings(data_dir=tmp_path / "d", mirror_enabled=False), embedder=local_embedder)
    store.upsert_memory("Gus sails")
    assert store.mirror is None and not (tmp_path / "d" / "mirror.db").exists()
    store.close()


def test_lost_chroma_store_is_rebuilt_from_the_mirror_without_embedding(tmp_path, local_embedder):
    class Counting:
        def __init__(self, inner):
            self.inner, self.calls = inner, 0
            self.name, self.dimension = inner.name, inner.dimension

        def embed_documents(self, texts):
            self.calls += len(texts)
            return self.inner.embed_documents(texts)

        def embed_query(self, text):
            return self.inner.embed_query(text)

    settings = Settings(data_dir=tmp_path / "data", mirror_path=tmp_path / "keep" / "mirror.db")
    original = open_store(settings, embedder=local_embedder)
    ids = [
        original.upsert_memory(f"fact number {i}: {w}", importance=1 + i % 5, tags=[w], scope=s)
        for i, (w, s) in enumerate([("tea", "global"), ("chess", "entity:bob"), ("jazz", "global")])
    ]
    before = {d.id: (d.text, d.metadata) for d in original.get(type="memory")}
    vectors = {i: chroma_vector(original, i) for i in ids}
    original.close()
    # Chroma is lost (a new, empty data directory); the mirror file is kept
    counting = Counting(local_embedder)
    rebuilt = open_store(settings.model_copy(update={"data_dir": tmp_path / "new"}), embedder=counting)
    assert rebuilt.count() == 0
    report = restore_from_mirror(rebuilt, rebuilt.mirror)
    assert report.restored == 3 and counting.calls == 0
    after = {d.id: (d.text, d.metadata) for d in rebuilt.get(type="memory")}
    assert after == before
    for i in ids:
        assert np.array_equal(chroma_vector(rebuilt, i), vectors[i])
    assert rebuilt.retrieve_memories("who plays chess?", entity="bob", k=1, relevance=False)[0].id == ids[1]
    assert verify_mirror(rebuilt, rebuilt.mirror).ok
    rebuilt.close()


def test_sync_fills_a_mirror_that_missed_writes(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data")
    unmirrored = open_store(settings, embedder=local_embedder, mirror=False)
    unmirrored.upsert_memory("Hana runs marathons")
    unmirrored.upsert_memory("Ivo bakes bread")
    unmirrored.close()
    store = open_store(settings, embedder=local_embedder)
    assert not verify_mirror(store, store.mirror).ok
    first = sync_mirror(store, store.mirror)
    assert first.changed == 2
    assert sync_mirror(store, store.mirror).changed == 0
    assert verify_mirror(store, store.mirror).ok
    store.close()


# ---- review findings ---------------------------------------------------------------------------


def test_restore_keeps_rows_engram_wrote_itself(tmp_path, local_embedder):
    from engram import Memory

    settings = Settings(data_dir=tmp_path / "data", mirror_path=tmp_path / "keep" / "mirror.db")
    with open_store(settings, embedder=local_embedder) as store:
        store.upsert_memory("Alice likes tea")
    engram = Memory(str(tmp_path / "keep" / "mirror.db"))
    engram.set_extractor(None)
    own = engram.add("Carol prefers window seats", type="opinion", importance=0.7, extract=False)
    engram.close()
    import sqlite3

    def engram_row():
        with sqlite3.connect(tmp_path / "keep" / "mirror.db") as raw:
            return raw.execute(
                "SELECT metadata, importance, source, memory_type FROM memories WHERE id = ?", (own,)
            ).fetchone()

    before = engram_row()
    with open_store(settings.model_copy(update={"data_dir": tmp_path / "new"}), embedder=local_embedder) as rebuilt:
        report = restore_from_mirror(rebuilt, rebuilt.mirror)
        assert report.restored == 2 and report.foreign == 1
        assert rebuilt.get_one(own).metadata["origin"] == "engram"
        assert rebuilt.mirror.ids(foreign=True) == {own}
    assert engram_row() == before  # engram's own row is untouched


def test_access_tracking_does_not_make_the_mirror_differ(tmp_path, local_embedder):
    from brain.features.chat import ChatMemory

    settings = Settings(data_dir=tmp_path / "data", track_access=True, summarizer="extractive")
    with open_store(settings, embedder=local_embedder) as store, ChatMemory(store, start_worker=False) as chat:
        chat.remember("Bob is allergic to cats", importance=4)
        chat.build_context(None, "is Bob allergic to anything?")
        assert chat.flush_access() == 1
        assert "last_used" in store.get(type="memory")[0].metadata
        assert verify_mirror(store, store.mirror).ok


def test_recorded_use_does_not_overwrite_what_another_process_changed(embedded_store):
    store = embedded_store
    doc_id = store.upsert_memory("Dana owns a kayak", importance=2)
    memory_index(store)  # built: its copy says importance 2
    store.col.update(ids=[doc_id], metadatas=[{"importance": 5}])  # another process raises it
    record_memory_use(store, {doc_id: 1_800_000_000.0})
    stored = store.col.get(ids=[doc_id], include=["metadatas"])["metadatas"][0]
    assert stored["importance"] == 5 and stored["last_used"] == 1_800_000_000.0


def test_mirror_commit_failure_after_chroma_keeps_the_index_in_step(embedded_store, monkeypatch):
    from contextlib import contextmanager

    store = embedded_store
    doc_id = store.upsert_memory("Erin plays the oboe")
    real = store.mirror.transaction

    depth = []

    @contextmanager
    def failing_commit():
        depth.append(1)
        try:
            with real():
                yield store.mirror
        finally:
            depth.pop()
        if not depth:
            raise StoreUnavailable("disk I/O error")  # as if the outermost COMMIT failed

    monkeypatch.setattr(store.mirror, "transaction", failing_commit)
    # stored in Chroma, so not reported as failed: the mirror is degraded and catches up later
    store.update_memory(doc_id, "Erin plays the bassoon")
    assert store.mirror_health.status == "degraded" and store.mirror_health.behind == 1
    monkeypatch.undo()
    assert store.get_one(doc_id).text == "Erin plays the bassoon"
    assert (
        store.retrieve_memories("what instrument does Erin play?", k=1, relevance=False)[0].text
        == "Erin plays the bassoon"
    )
    assert catch_up_mirror(store) == 1 and store.mirror_health.status == "ok"
    assert verify_mirror(store, store.mirror).ok
