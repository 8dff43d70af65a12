"""Metadata Chroma cannot survive is refused before anything is written, and Chroma's own failures
reach callers as brain's errors, never as chromadb tracebacks."""

from __future__ import annotations

import numpy as np
import pytest

from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.model.errors import BrainError, FilterError, StoreError, ValidationError
from brain.model.schemas import MAX_LIST_ITEMS, MAX_TAGS
from brain.store import GuardedCollection

TAGS_5470 = [f"tag-{i}" for i in range(5470)]
LIST_6000 = [f"item-{i}" for i in range(6000)]


def hostile_writes(store: RagStore, memory_id: str):
    """Every way a caller can hand the store a metadata list longer than Chroma can take."""
    return [
        (
            "upsert_memory tags",
            lambda: store.upsert_memory("Too many tags", tags=TAGS_5470),
            "tags",
            f"at most {MAX_TAGS} (MAX_TAGS)",
        ),
        (
            "upsert_memory extra list",
            lambda: store.upsert_memory("A huge list", huge=LIST_6000),
            "huge",
            f"at most {MAX_LIST_ITEMS} (MAX_LIST_ITEMS)",
        ),
        (
            "upsert_docs faq list",
            lambda: store.upsert_docs([{"text": "FAQ", "type": "faq", "huge": LIST_6000}]),
            "huge",
            f"at most {MAX_LIST_ITEMS} (MAX_LIST_ITEMS)",
        ),
        (
            "upsert_turn list",
            lambda: store.upsert_turn("conv-big", "hi", "hello", huge=LIST_6000),
            "huge",
            f"at most {MAX_LIST_ITEMS} (MAX_LIST_ITEMS)",
        ),
        (
            "update_memory tags",
            lambda: store.update_memory(memory_id, tags=TAGS_5470),
            "tags",
            f"at most {MAX_TAGS} (MAX_TAGS)",
        ),
        (
            "update_memory metadata",
            lambda: store.update_memory(memory_id, metadata={"huge": LIST_6000}),
            "huge",
            f"at most {MAX_LIST_ITEMS} (MAX_LIST_ITEMS)",
        ),
        (
            "many keys",
            lambda: store.upsert_memory("Many keys", **{f"k{i}": i for i in range(6000)}),
            "metadata",
            "(MAX_METADATA_KEYS)",
        ),
    ]


def test_lists_chroma_cannot_store_are_refused_and_the_store_keeps_working(backend_settings, local_embedder):
    with open_store(backend_settings, embedder=local_embedder) as store:
        kept = store.upsert_memory("The user's bike is blue", tags=["bike"])
        before = store.count()
        for name, write, field, limit in hostile_writes(store, kept):
            with pytest.raises(ValidationError) as info:
                write()
            assert limit in str(info.value), name
            assert any(p["field"] == field for p in info.value.problems), name
            assert "nothing was written" in str(info.value), name
        assert store.count() == before
        assert store.get_one(kept).metadata["tags"] == ["bike"]
        # writes and reads still work
        new = store.upsert_memory("The user's car is red", tags=[f"t{i}" for i in range(MAX_TAGS)])
        assert store.retrieve_memories("what colour is the car?", k=1, relevance=False)[0].id == new
        store.update_memory(kept, importance=5)
    with open_store(backend_settings, embedder=local_embedder) as reopened:  # and after a restart
        assert reopened.count() == before + 1
        assert reopened.get_one(kept).metadata["importance"] == 5
        assert reopened.retrieve_memories("bike colour", k=1, relevance=False)[0].id == kept
        reopened.upsert_memory("The user's boat is green")
        assert reopened.count() == before + 2


def test_chroma_internal_errors_become_store_errors(tmp_path):
    """What the limits prevent, done straight to a scratch collection: Chroma's compaction failure
    comes out of the guarded collection as a StoreError saying what to do."""
    import chromadb

    client = chromadb.PersistentClient(
        path=str(tmp_path / "scratch"), settings=chromadb.Settings(anonymized_telemetry=False)
    )
    col = GuardedCollection(client.create_collection("scratch", embedding_function=None), "a scratch store")
    with pytest.raises(StoreError) as info:
        col.upsert(ids=["a"], embeddings=[[0.1, 0.2, 0.3]], documents=["x"], metadatas=[{"tags": TAGS_5470}])
    message = str(info.value)
    assert "Chroma failed internally in collection.upsert() on the Chroma store at a scratch store" in message
    assert "brain restore --from-mirror" in message
    assert isinstance(info.value, BrainError)


def test_chroma_refusals_become_store_errors(embedded_store):
    embedded_store.upsert_memory("The first record fixes the collection's dimension")
    with pytest.raises(StoreError, match=r"Chroma refused collection.add\(\)"):
        embedded_store.col.add(
            ids=["x"], embeddings=[np.ones(3, dtype=np.float32)], documents=["x"], metadatas=[{"type": "memory"}]
        )  # 3-d vectors into a 384-d collection
    with pytest.raises(StoreError, match=r"Chroma refused collection.get\(\)"):
        embedded_store.col.get(include=["bogus"])
    with pytest.raises(FilterError, match=r"where\['\$bogus'\]: unknown key or operator"):
        embedded_store.col.get(where={"$bogus": 1})  # read as store.get reads a filter, before Chroma
