"""Writing an existing memory again: the first text, vector and creation time stay; importance, tags
and the timestamp merge; a write that adds nothing writes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from brain.features.chat import ChatMemory

T0 = "2026-01-01T09:00:00+00:00"
T1 = "2026-03-01T09:00:00+00:00"


@pytest.fixture
def chroma_writes(store, monkeypatch):
    """Every upsert/update/add call that reaches the Chroma collection."""
    calls: list[str] = []
    for name in ("upsert", "update", "add"):
        real = getattr(store.col, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(store.col, name, counted)
    return calls


def test_a_duplicate_in_another_spelling_keeps_the_first_text_time_and_vector(store, chroma_writes):
    first = store.upsert_memory("The user likes Jazz", importance=2, tags=["music"], timestamp=T0)
    (before,) = store.get([first], include_embeddings=True)
    again = store.upsert_memory("  the USER likes jazz ", importance=4, tags=["evenings"], timestamp=T1)
    assert again == first
    (after,) = store.get([first], include_embeddings=True)
    assert after.text == "The user likes Jazz"
    assert np.array_equal(after.embedding, before.embedding)
    meta = after.metadata
    assert meta["importance"] == 4 and meta["tags"] == ["music", "evenings"]
    assert meta["timestamp"] == T1 and meta["created_at"] == T0
    assert store.retrieve_memories("jazz", k=1, relevance=False)[0].text == "The user likes Jazz"
    if store.mirror is not None:
        assert store.mirror.get(first)[0].text == "The user likes Jazz"


def test_a_duplicate_that_adds_nothing_writes_nothing(store, chroma_writes):
    first = store.upsert_memory("The user likes Jazz", importance=4, tags=["music"], timestamp=T0)
    before = store.get_one(first).metadata
    chroma_writes.clear()
    assert store.upsert_memory("the user likes jazz", importance=2, tags=["music"], timestamp=T1) == first
    assert store.upsert_docs([{"text": "The user likes Jazz", "type": "memory", "tags": ["music"]}]) == [first]
    assert chroma_writes == []
    assert store.get_one(first).metadata == before  # the timestamp did not move either


def test_duplicates_within_one_batch_keep_the_first_spelling(store):
    ids = store.upsert_docs(
        [
            {"text": "Alice drinks green tea", "type": "memory", "importance": 2, "timestamp": T0},
            {"text": "alice drinks GREEN tea", "type": "memory", "importance": 5, "tags": ["drinks"], "timestamp": T1},
        ]
    )
    assert ids[0] == ids[1]
    doc = store.get_one(ids[0])
    assert doc.text == "Alice drinks green tea"
    assert doc.metadata["importance"] == 5 and doc.metadata["created_at"] == T0 and doc.metadata["timestamp"] == T1


def test_remember_again_keeps_the_creation_time(store):
    chat = ChatMemory(store, start_worker=False)
    try:
        first = chat.remember("Bob's birthday is in May", entity="bob", timestamp=T0)
        assert chat.remember("bob's birthday is in may", entity="bob", importance=5, timestamp=T1) == first
        meta = store.get_one(first).metadata
        assert meta["created_at"] == T0 and meta["importance"] == 5
        assert store.get_one(first).text == "Bob's birthday is in May"
    finally:
        chat.close()


def test_an_explicit_id_with_a_new_text_is_an_edit(store):
    first = store.upsert_docs(
        [{"id": "doc-pam-1", "text": "The user lives in Porto", "type": "memory", "timestamp": T0}]
    )[0]
    store.upsert_docs([{"id": first, "text": "The user lives in Lisbon", "type": "memory", "timestamp": T1}])
    doc = store.get_one(first)
    assert doc.text == "The user lives in Lisbon" and doc.metadata["created_at"] == T0
    assert (
        store.retrieve_memories("where does the user live?", k=1, relevance=False)[0].text == "The user lives in Lisbon"
    )
