"""Keys the store interprets cannot be set to values it cannot use, by any write path; rows written
around the schema never break ranking; update_memory cannot move a memory or replace its vector."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.features.chat import ChatMemory
from brain.model.errors import NotFound, ValidationError
from brain.model.schemas import RESERVED_KEYS
from brain.store.retrieval import record_memory_use

TS = "2026-01-01T00:00:00+00:00"


# ---- no write path takes a value the store cannot read back --------------------------------------------


def bad_last_used_writes(store: RagStore, memory_id: str):
    yield "upsert_docs", lambda: store.upsert_docs([{"text": "Bad one", "type": "memory", "last_used": "yesterday"}])
    yield "upsert_doc", lambda: store.upsert_doc("Bad one", "memory", last_used="yesterday")
    yield "upsert_memory", lambda: store.upsert_memory("Bad one", last_used="yesterday")
    yield "update_memory", lambda: store.update_memory(memory_id, metadata={"last_used": "yesterday"})
    yield "record_memory_use", lambda: record_memory_use(store, {memory_id: "yesterday"})


def test_last_used_yesterday_is_refused_by_every_write_path(store):
    memory_id = store.upsert_memory("The user's bike is blue")
    before = store.get_one(memory_id).metadata
    for _name, write in bad_last_used_writes(store, memory_id):
        with pytest.raises(ValidationError, match="last_used|last-use"):
            write()
    assert store.get_one(memory_id).metadata == before
    assert store.count("memory") == 1
    assert store.retrieve_memories("bike", k=1, relevance=False)[0].id == memory_id


def test_chat_remember_refuses_reserved_and_own_keys_in_metadata(store):
    chat = ChatMemory(store, start_worker=False)
    try:
        for key in ("scope", "embedding", "ts_epoch", "importance", "entity"):
            with pytest.raises(ValidationError, match=f"metadata.{key}"):
                chat.remember("Sneaky", metadata={key: "entity:bob" if key == "scope" else 1})
        with pytest.raises(ValidationError, match="last_used"):
            chat.remember("Sneaky", metadata={"last_used": "yesterday"})
        assert store.count("memory") == 0
    finally:
        chat.close()


# ---- rows written around the schema ------------------------------------------------------------------------


BAD_ROWS = {
    "doc-bad-used": ({"last_used": "yesterday"}, "last_used"),
    "doc-bad-importance": ({"importance": "high"}, "importance"),
    "doc-bad-epoch": ({"ts_epoch": "soon"}, "ts_epoch"),
    "doc-bad-tags": ({"tags": "solo"}, "tags"),
    "doc-bad-status": ({"pam_status": 7}, None),  # not a status: ranked as active
}


def write_raw(store: RagStore, doc_id: str, text: str, **meta):
    """A memory row written straight into Chroma, as an older version or another tool might."""
    row = {
        "type": "memory",
        "scope": "global",
        "importance": 3,
        "timestamp": TS,
        "ts_epoch": 1767225600.0,
        "source": "chat",
        **meta,
    }
    store.col.upsert(
        ids=[doc_id], embeddings=[store.embedder.embed_documents([text])[0]], documents=[text], metadatas=[row]
    )


def test_rows_the_index_cannot_use_never_break_search_or_context(backend_settings, local_embedder, caplog):
    with open_store(backend_settings, embedder=local_embedder) as store:
        good = store.upsert_memory("The user's passport expires in March", importance=5)
        for doc_id, (meta, _) in BAD_ROWS.items():
            write_raw(store, doc_id, f"The user's passport note {doc_id}", **meta)
        write_raw(store, "doc-bad-scope", "The user's passport is blue", scope="entity:")
        write_raw(store, "doc-legacy-entity", "Bob's passport is red", entity="bob")  # global + entity: older code
    with (
        caplog.at_level(logging.WARNING, logger="brain.store.memory_index"),
        open_store(backend_settings, embedder=local_embedder) as store,
    ):  # across a restart
        hits = store.retrieve_memories("when does the passport expire?", k=10, relevance=False)
        ids = {h.id for h in hits}
        assert good in ids and set(BAD_ROWS) <= ids and "doc-legacy-entity" in ids
        assert "doc-bad-scope" not in {
            h.id for h in store.retrieve_memories("passport", k=20, all_scopes=True, relevance=False)
        }
        problems = store.index_problems()["memory"]
        assert {doc_id for doc_id, (_, field) in BAD_ROWS.items() if field} | {"doc-bad-scope"} == set(problems)
        for doc_id, (_, field) in BAD_ROWS.items():
            if field:
                assert field in problems[doc_id]
        assert store.stats()["unusable_rows"]["memory"] == len(problems)
        assert "stored rows hold values the index cannot use" in caplog.text
        # the bad importance ranks as the default, the bad time as the oldest
        by_id = {h.id: h for h in hits}
        assert by_id["doc-bad-importance"].importance_part == pytest.approx(0.5 * 3 / 5)
        assert by_id["doc-bad-epoch"].recency_part < 1e-6
        chat = ChatMemory(store, start_worker=False)
        try:
            ctx = chat.build_context("conv-1", "when does my passport expire?", entity="bob")
            assert {i.id for i in ctx.memory}
            # record_memory_use over the bad last_used repairs it
            assert record_memory_use(store, {"doc-bad-used": 1_800_000_000.0}) == 1
            assert store.get_one("doc-bad-used").metadata["last_used"] == 1_800_000_000.0
            assert "doc-bad-used" not in store.index_problems()["memory"]
        finally:
            chat.close()
        # rewriting a bad row through the store repairs it; so does writing the same memory again
        store.update_memory("doc-bad-importance", importance=4)
        assert store.get_one("doc-bad-importance").metadata["importance"] == 4
        assert "doc-bad-importance" not in store.index_problems()["memory"]
        store.update_memory("doc-legacy-entity", importance=2)  # read as global: no crash, the entity goes
        legacy = store.get_one("doc-legacy-entity").metadata
        assert legacy["scope"] == "global" and "entity" not in legacy
        store.delete(["doc-bad-scope"])
        assert "doc-bad-scope" not in store.index_problems()["memory"]


# ---- update_memory: reserved keys, scope, vector, entity -------------------------------------------------


@pytest.mark.parametrize("key", sorted(RESERVED_KEYS))
def test_update_memory_refuses_reserved_keys_naming_them(store, key):
    bob = store.upsert_memory("Bob's locker code is 4711", entity="bob")
    before = store.get([bob], include_embeddings=True)[0]
    value = {
        "scope": "global",
        "embedding": [1.0] * store.dimension,
        "type": "faq",
        "ts_epoch": 5.0,
        "id": "doc-x",
        "text": "changed",
        "timestamp": TS,
        "source": "kb",
    }[key]
    with pytest.raises(ValidationError) as info:
        store.update_memory(bob, metadata={key: value})
    assert info.value.problems[0]["field"] == f"metadata.{key}"
    assert repr(key) in str(info.value) and "nothing was written" in str(info.value)
    after = store.get([bob], include_embeddings=True)[0]
    assert after.metadata == before.metadata and after.text == before.text
    assert np.array_equal(after.embedding, before.embedding)


def test_update_memory_never_moves_a_memory_into_another_scope(store):
    bob = store.upsert_memory("Bob's locker code is 4711", entity="bob")
    with pytest.raises(ValidationError, match="disagree"):
        store.update_memory(bob, metadata={"entity": "alice"})
    store.update_memory(bob, "Bob's locker code is 1234", replace_metadata=True, metadata={"note": "x"})
    meta = store.get_one(bob).metadata
    assert meta["scope"] == "entity:bob" and meta["note"] == "x"
    assert store.retrieve_memories("locker code", k=5, relevance=False) == []  # still not global
    # the new text got the store's own embedding of it
    (doc,) = store.get([bob], include_embeddings=True)
    expected = store.embedder.embed_documents(["Bob's locker code is 1234"])[0]
    assert float(doc.embedding @ expected) / float(np.linalg.norm(doc.embedding)) > 0.999


def test_update_and_delete_act_only_inside_the_entitys_view(store):
    bob = store.upsert_memory("Bob's locker code is 4711", entity="bob")
    shared = store.upsert_memory("The office opens at 8")
    with pytest.raises(NotFound, match="visible to entity 'alice'"):
        store.update_memory(bob, importance=5, entity="alice")
    assert store.delete([bob], entity="alice") == 0
    assert store.delete(where={"importance": 3}, type="memory", entity="alice") == 1  # the global one only
    assert store.get([shared]) == [] and store.get([bob])
    assert store.update_memory(bob, importance=5, entity="bob").metadata["importance"] == 5
    assert store.get([bob], entity="alice") == [] and store.get([bob], entity="bob")[0].id == bob
    assert store.delete([bob], type="memory", entity="bob") == 1
    with pytest.raises(ValidationError, match="entity"):
        store.delete([bob], entity="")


def test_an_explicit_id_cannot_move_a_memory_into_another_scope(store):
    bob = store.upsert_memory("Bob's locker code is 4711", entity="bob")
    with pytest.raises(ValidationError, match="scope never changes") as info:
        store.upsert_docs([{"id": bob, "text": "Bob's locker code is 4711", "type": "memory", "scope": "global"}])
    assert info.value.problems[0]["field"] == "scope"
    assert store.get_one(bob).metadata["scope"] == "entity:bob"
    assert store.retrieve_memories("locker code", k=5, relevance=False) == []


@pytest.mark.parametrize("value", [float("inf"), -1.0, float("nan"), True, "yesterday"])
def test_recorded_memory_use_follows_the_last_used_rule(embedded_store, value):
    doc_id = embedded_store.upsert_memory("The boiler is serviced in May")
    with pytest.raises(ValidationError, match="epoch seconds"):
        record_memory_use(embedded_store, {doc_id: value})
    assert "last_used" not in embedded_store.get_one(doc_id).metadata
