"""Store <-> mirror: full sync (idempotent), verify (each kind of difference), restore from the mirror."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.features.mirror import EngramMirror, restore_from_mirror, sync_mirror, verify_mirror
from brain.features.mirror.mapping import metadata_json
from brain.model.errors import EmbeddingModelMismatch
from brain.providers.embeddings.base import Embedder
from brain.shells.cli.reports import verify_text

ALL_TYPES = ("memory", "persona", "faq", "summary", "turn")
DEFAULT_TYPES = ("memory", "turn", "summary")  # BRAIN_MIRROR_TYPES' default
MEMORIES_ONLY = ("memory",)


class CountingEmbedder(Embedder):
    """The real local embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: Embedder):
        super().__init__(batch_size=inner.batch_size, cache_size=0)
        self.inner = inner
        self.name = inner.name
        self.texts: list[str] = []

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def _embed(self, texts, kind):
        self.texts.extend(texts)
        return self.inner._embed(texts, kind)


def fill(store: RagStore) -> None:
    store.upsert_memory(
        "Alice is vegetarian",
        scope="entity:alice",
        importance=5,
        tags=["food", "health"],
        timestamp="2026-01-02T03:04:05.123456+00:00",
        conversation_id="conv-7",
    )
    store.upsert_memory("The office wifi password changes every month", importance=2, source="system")
    store.upsert_memory("Bob supports the local football club", scope="entity:bob", tags=["sport"], mood="keen")
    store.upsert_memory("We agreed to ship on Fridays only", importance=4, tags=["work", "episodic"])
    store.upsert_turn("conv-7", "What should I cook for Alice?", "Something without meat: a lentil curry.")
    store.upsert_summary("conv-7", "Planning a dinner for Alice, who is vegetarian.", turn_range="1-2")
    store.upsert_doc("OCR reads the text in images.", "faq", topic="ocr", _specialist_name="ocr")
    store.upsert_doc("You speak warmly and briefly.", "persona", version="v1", topic="tone")


def snapshot(store: RagStore, types=ALL_TYPES) -> dict[str, tuple]:
    out = {}
    for t in types:
        for d in store.get(type=t, include_embeddings=True):
            out[d.id] = (d.text, d.metadata, d.embedding)
    return out


def assert_same_documents(got: dict[str, tuple], expected: dict[str, tuple]) -> None:
    """Same ids, texts and metadata exactly; vectors equal up to Chroma's last-place rounding."""
    assert {k: v[:2] for k, v in got.items()} == {k: v[:2] for k, v in expected.items()}
    for key, (_, _, vector) in expected.items():
        np.testing.assert_allclose(got[key][2], vector, rtol=0, atol=1e-6)


@pytest.fixture
def mirror(tmp_path, local_embedder):
    m = EngramMirror(tmp_path / "mirror.db", local_embedder.name)
    yield m
    m.close()


def test_sync_is_idempotent_and_reuses_chroma_vectors(embedded_store, mirror):
    fill(embedded_store)
    first = sync_mirror(embedded_store, mirror)
    assert (first.added, first.updated, first.deleted, first.unchanged) == (7, 0, 0, 0)
    assert "7 added" in str(first)
    memories = {d.id: d for d in embedded_store.get(type="memory", include_embeddings=True)}
    mirrored = {d.id: d for t in DEFAULT_TYPES for d in embedded_store.get(type=t, include_embeddings=True)}
    assert mirror.ids() == set(mirrored)  # memories, turns and summaries by default; not faq or persona
    assert len(mirrored) == len(memories) + 3
    for doc in mirror.iter_documents():
        assert doc.text == mirrored[doc.id].text and doc.metadata == mirrored[doc.id].metadata
        assert doc.embedding.tobytes() == mirrored[doc.id].embedding.tobytes()  # Chroma's vector, as is
    second = sync_mirror(embedded_store, mirror)
    assert (second.added, second.updated, second.deleted, second.unchanged) == (0, 0, 0, 7)
    assert verify_mirror(embedded_store, mirror).ok

    # changes in the store: one memory merged (importance up), one removed, one new
    embedded_store.upsert_memory("Alice is vegetarian", scope="entity:alice", importance=5, tags=["cooking"])
    gone = next(i for i, d in memories.items() if d.text.startswith("The office wifi"))
    embedded_store.delete(gone)
    embedded_store.upsert_memory("Carol moved to Porto", scope="entity:carol")
    third = sync_mirror(embedded_store, mirror)
    assert (third.added, third.updated, third.deleted, third.unchanged) == (1, 1, 1, 5)
    assert gone not in mirror.ids()
    assert verify_mirror(embedded_store, mirror).ok
    assert sync_mirror(embedded_store, mirror).changed == 0


def test_sync_of_every_type_and_foreign_rows_are_kept(embedded_store, mirror, tmp_path):
    fill(embedded_store)
    sync_mirror(embedded_store, mirror, types=ALL_TYPES)
    assert mirror.count() == 9  # 4 memories + 2 turns + summary + faq + persona
    from engram import Memory

    mem = Memory(str(tmp_path / "mirror.db"))
    mem.set_extractor(None)
    own = mem.add("Engram's own note about lentils", extract=False)
    mem.close()
    report = sync_mirror(embedded_store, mirror, types=ALL_TYPES)
    assert report.changed == 0 and report.foreign == 1
    assert own in mirror.ids()
    verify = verify_mirror(embedded_store, mirror, types=ALL_TYPES)
    assert verify.ok and verify.foreign == [own]
    # narrowing the mirrored types removes our rows of the others, never engram's
    narrowed = sync_mirror(embedded_store, mirror, types=("memory",))
    assert narrowed.deleted == 5
    assert mirror.ids(foreign=True) == {own} and len(mirror.ids(foreign=False)) == 4


def test_verify_finds_each_kind_of_difference(embedded_store, mirror, tmp_path):
    fill(embedded_store)
    sync_mirror(embedded_store, mirror, types=MEMORIES_ONLY)
    ids = sorted(mirror.ids())
    missing, text, meta, vector = ids
    mirror.delete([missing])
    mirror.upsert([{"id": "orphan", "text": "only in the mirror", "metadata": {**mirror.get([text])[0].metadata}}])
    with sqlite3.connect(tmp_path / "mirror.db") as raw:
        raw.execute("UPDATE memories SET content = content || ' (edited)' WHERE id = ?", (text,))
        changed = {**mirror.get([meta])[0].metadata, "importance": 1}
        raw.execute("UPDATE memories SET metadata = ? WHERE id = ?", (metadata_json(changed), meta))
        (blob,) = raw.execute("SELECT embedding FROM memory_embeddings WHERE memory_id = ?", (vector,)).fetchone()
        flipped = (-np.frombuffer(blob, dtype="<f4")).astype("<f4").tobytes()
        raw.execute("UPDATE memory_embeddings SET embedding = ? WHERE memory_id = ?", (flipped, vector))
    report = verify_mirror(embedded_store, mirror, types=MEMORIES_ONLY)
    assert not report.ok
    assert report.missing == [missing]
    assert report.extra == ["orphan"]
    assert report.text == [text]
    assert report.metadata == [meta]
    assert report.vectors == [vector]
    assert report.checked == 4
    shown = verify_text(report)
    assert "1 missing, 1 extra" in shown and "orphan" in shown
    # a vector absent from the mirror is a difference too; sync repairs everything
    with sqlite3.connect(tmp_path / "mirror.db") as raw:
        raw.execute("DELETE FROM memory_embeddings WHERE memory_id = ?", (meta,))
    assert sorted(verify_mirror(embedded_store, mirror, types=MEMORIES_ONLY).vectors) == sorted([meta, vector])
    repaired = sync_mirror(embedded_store, mirror, types=MEMORIES_ONLY)
    assert (repaired.added, repaired.updated, repaired.deleted) == (1, 3, 1)
    assert verify_mirror(embedded_store, mirror, types=MEMORIES_ONLY).ok


def test_restore_from_mirror_equals_the_original_without_embedding(embedded_store, mirror, tmp_path, local_embedder):
    fill(embedded_store)
    sync_mirror(embedded_store, mirror, types=ALL_TYPES)
    original = snapshot(embedded_store)
    counting = CountingEmbedder(local_embedder)
    fresh = open_store(Settings(data_dir=tmp_path / "fresh"), embedder=counting)
    report = restore_from_mirror(fresh, mirror)
    assert counting.texts == []  # every vector came from the mirror
    assert (report.restored, report.reused_vectors, report.embedded, report.skipped) == (9, 9, 0, [])
    assert_same_documents(snapshot(fresh), original)
    # Chroma's last-place rounding of the restored vectors is not a difference
    assert verify_mirror(fresh, mirror, types=ALL_TYPES).ok
    assert sync_mirror(fresh, mirror, types=ALL_TYPES).changed == 0
    assert (
        fresh.retrieve_memories("what does Alice eat?", k=1, entity="alice", relevance=False)[0].text
        == "Alice is vegetarian"
    )
    assert [t.text for t in fresh.recent_turns("conv-7")] == [t.text for t in embedded_store.recent_turns("conv-7")]


def test_restore_embeds_only_what_is_missing_and_keeps_engram_rows(embedded_store, mirror, tmp_path, local_embedder):
    fill(embedded_store)
    sync_mirror(embedded_store, mirror, types=MEMORIES_ONLY)
    lost = sorted(mirror.ids())[0]
    lost_text = mirror.get([lost])[0].text
    with sqlite3.connect(tmp_path / "mirror.db") as raw:
        raw.execute("DELETE FROM memory_embeddings WHERE memory_id = ?", (lost,))
    from engram import Memory

    mem = Memory(str(tmp_path / "mirror.db"))
    mem.set_extractor(None)
    own = mem.add("Engram remembers the boiler was serviced in March", type="episodic", importance=0.8, extract=False)
    mem.close()
    counting = CountingEmbedder(local_embedder)
    fresh = open_store(Settings(data_dir=tmp_path / "fresh"), embedder=counting)
    report = restore_from_mirror(fresh, mirror)
    assert sorted(counting.texts) == sorted([lost_text, "Engram remembers the boiler was serviced in March"])
    assert (report.restored, report.reused_vectors, report.embedded, report.foreign) == (5, 3, 2, 1)
    original = snapshot(embedded_store, ("memory",))
    restored = snapshot(fresh, ("memory",))
    assert {k: v[:2] for k, v in restored.items() if k != own} == {k: v[:2] for k, v in original.items()}
    np.testing.assert_allclose(restored[lost][2], original[lost][2], atol=1e-6)  # re-embedded by the same model
    engram_doc = fresh.get_one(own)
    assert engram_doc.metadata["origin"] == "engram" and engram_doc.metadata["engram_type"] == "episodic"
    assert engram_doc.metadata["importance"] == 4 and engram_doc.metadata["source"] == "import"
    # written back, the restored engram row keeps its engram type
    sync_mirror(fresh, mirror, types=MEMORIES_ONLY)
    with sqlite3.connect(tmp_path / "mirror.db") as raw:
        assert raw.execute("SELECT memory_type FROM memories WHERE id = ?", (own,)).fetchone() == ("episodic",)
    assert mirror.ids(foreign=True) == set()
    assert verify_mirror(fresh, mirror, types=MEMORIES_ONLY).ok


def test_models_must_agree(embedded_store, tmp_path):
    other = EngramMirror(tmp_path / "m.db", "ollama/nomic-embed-text")
    with pytest.raises(EmbeddingModelMismatch):
        sync_mirror(embedded_store, other)
    with pytest.raises(EmbeddingModelMismatch):
        verify_mirror(embedded_store, other)
