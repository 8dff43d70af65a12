"""brain.store.migrations: a store written with the old status and part markers, opened by today's code."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import numpy as np
import pytest

from brain.app.core import open_store
from brain.features.mirror.sync import verify_mirror
from brain.shells.xaibo import BrainMemory, BrainVectorIndex
from brain.store.migrations import migrate_typed_fields

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
OLD_KEYS = ("pam_status", "xaibo.kind", "xaibo.chunk", "xaibo.memory_id")


def old_row(text: str, **meta):
    """A memory row as the code before the typed fields wrote it (the store's own fields plus ``meta``)."""
    return text, {
        "type": "memory",
        "timestamp": WHEN.isoformat(),
        "ts_epoch": WHEN.timestamp(),
        "source": "import",
        "scope": "global",
        "importance": 3,
        **meta,
    }


# id -> (text, metadata): what a PAM import of retracted/superseded/deprecated memories, a long Xaibo
# memory (head and continuation chunk) and a Xaibo vector row left in Chroma
OLD_ROWS = {
    "doc-active": old_row("Alice lives in Porto"),
    "doc-retracted": old_row("Alice lives in Lisbon (retracted)", pam_status="retracted"),
    "doc-superseded": old_row("Alice lives in Braga (superseded)", pam_status="superseded"),
    "doc-deprecated": old_row("Alice lives in Faro (deprecated)", pam_status="deprecated"),
    "doc-archived": old_row("Alice lives in Evora (archived)", pam_status="archived", scope="entity:al", entity="al"),
    "doc-head": old_row(
        "Garden notes: the roses in bed one were pruned",
        **{
            "xaibo.kind": "memory",
            "xaibo.memory_id": "doc-head",
            "xaibo.chunk": 0,
            "xaibo.revision": "r1",
            "xaibo.chunks": 2,
        },
    ),
    "doc-chunk": old_row(
        "The vault combination is 31-17-08",
        **{"xaibo.kind": "memory", "xaibo.memory_id": "doc-head", "xaibo.chunk": 1, "xaibo.revision": "r1"},
    ),
    "doc-vector": old_row(
        "Alice lives in Porto, says the vector row",
        **{"xaibo.kind": "vector", "xaibo.index": "default", "xaibo.attr.chunk_text": "x"},
    ),
}


@pytest.fixture
def old_store(settings, local_embedder):
    """The settings of a store holding OLD_ROWS in Chroma and in the mirror, as today's code left them."""
    with open_store(settings, embedder=local_embedder) as store:  # creates the collection and the mirror
        ids = list(OLD_ROWS)
        texts = [OLD_ROWS[i][0] for i in ids]
        metas = [OLD_ROWS[i][1] for i in ids]
        vectors = np.asarray(local_embedder.embed_documents(texts), dtype=np.float32)
        raw = store.client.get_collection(settings.collection)  # straight through chromadb
        raw.add(ids=ids, documents=texts, metadatas=metas, embeddings=vectors)
        with store.mirror.transaction():
            store.mirror.upsert(
                {"id": i, "text": t, "metadata": m, "embedding": v} for i, t, m, v in zip(ids, texts, metas, vectors)
            )
    return settings


def test_an_old_store_opens_with_every_memory_part_and_status_intact(old_store, local_embedder):
    with open_store(old_store, embedder=local_embedder) as store:
        docs = {d.id: d for d in store.get(type="memory")}
        assert set(docs) == set(OLD_ROWS)
        assert all(docs[i].text == OLD_ROWS[i][0] for i in OLD_ROWS)
        for doc in docs.values():
            assert not set(OLD_KEYS) & set(doc.metadata), doc
        assert {i: d.metadata.get("status") for i, d in docs.items() if d.metadata.get("status")} == {
            "doc-retracted": "retracted",
            "doc-superseded": "superseded",
            "doc-deprecated": "deprecated",
            "doc-archived": "archived",
        }
        assert docs["doc-chunk"].metadata["part_of"] == "doc-head"
        assert docs["doc-vector"].metadata["part_of"] == "xaibo-index:default"
        assert "part_of" not in docs["doc-head"].metadata
        assert docs["doc-head"].metadata["xaibo.revision"] == "r1"  # the adapter's own keys stay
        assert docs["doc-vector"].metadata["xaibo.attr.chunk_text"] == "x"

        # ranking: active memories only (deprecated is active), each once by its head
        ranked = {h.id for h in store.retrieve_memories("where does Alice live?", k=20, relevance=False)}
        assert ranked == {"doc-active", "doc-deprecated", "doc-head"}
        everything = {
            h.id for h in store.retrieve_memories("where does Alice live?", k=20, all_scopes=True, relevance=False)
        }
        assert everything == set(OLD_ROWS)

        # the Xaibo modules find their parts: the chunk's secret under its memory, the vector row in its index
        hits = asyncio.run(BrainMemory(store=store).search_memory("vault combination", k=3))
        assert hits[0].memory_id == "doc-head"
        assert "doc-chunk" not in {h.memory_id for h in hits}
        vector = local_embedder.embed_query("Alice lives in Porto")
        rows = asyncio.run(BrainVectorIndex(store=store).search(vector, k=5))
        assert [r.vector_id for r in rows] == ["doc-vector"]

        # the mirror followed, and a second migration finds nothing to do
        assert verify_mirror(store, store.mirror).ok
        assert migrate_typed_fields(store.col, store.chroma.max_batch_size, store.mirror) == 0


def test_the_migration_pages_by_the_batch_size_and_is_idempotent(old_store, local_embedder):
    with open_store(old_store, embedder=local_embedder, mirror=False) as store:
        pass  # migrated on open, without the mirror
    with open_store(old_store, embedder=local_embedder) as store:
        assert migrate_typed_fields(store.col, 1, store.mirror) == 0
        assert not verify_mirror(store, store.mirror).ok  # the mirror was off during the migration
        raw = store.client.get_collection(old_store.collection)
        raw.update(
            ids=["doc-retracted", "doc-chunk"],
            metadatas=[
                {"pam_status": "retracted", "status": None},
                {"xaibo.kind": "memory", "xaibo.chunk": 1, "xaibo.memory_id": "doc-head", "part_of": None},
            ],
        )
        assert migrate_typed_fields(store.col, 1, None) == 2  # one row per call
        got = {d.id: d.metadata for d in store.get(["doc-retracted", "doc-chunk"])}
        assert got["doc-retracted"]["status"] == "retracted" and "pam_status" not in got["doc-retracted"]
        assert got["doc-chunk"]["part_of"] == "doc-head" and "xaibo.chunk" not in got["doc-chunk"]


def test_pam_status_given_by_a_caller_is_the_status(embedded_store):
    doc_id = embedded_store.upsert_memory("Bob lives in Leeds", pam_status="retracted")
    meta = embedded_store.get_one(doc_id).metadata
    assert meta["status"] == "retracted" and "pam_status" not in meta
    assert doc_id not in {h.id for h in embedded_store.retrieve_memories("where does Bob live?", k=5, relevance=False)}
