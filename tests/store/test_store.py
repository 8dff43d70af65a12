"""RagStore against a real embedded Chroma and a real Chroma server, with the real local embedder."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.model.errors import EmbeddingModelMismatch, FilterError, NotFound, StoreUnavailable, ValidationError
from brain.shells.xaibo import BrainMemory
from brain.store import memory_id
from brain.store.indexes import memory_index, refresh_index

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def test_every_type_round_trips_with_utc_timestamp_and_epoch(store):
    ids = {
        "persona": store.upsert_doc("I am Brain, a calm assistant.", "persona", version="v1", topic="core"),
        "faq": store.upsert_doc("OCR reads text in images.", "faq", topic="ocr", _specialist_name="ocr"),
        "memory": store.upsert_memory("The user likes green tea", importance=4, tags=["drinks"]),
        "summary": store.upsert_summary("conv-a", "They talked about tea.", turn_range="1-2"),
    }
    ids["turn"], _ = store.upsert_turn("conv-a", "hi", "hello", user_ts="2026-11-01T14:00:00+02:00")
    for doc_type, doc_id in ids.items():
        doc = store.get_one(doc_id)
        assert doc.metadata["type"] == doc_type
        assert doc.id.startswith("doc-")
        assert doc.metadata["timestamp"].endswith("+00:00")
        parsed = datetime.fromisoformat(doc.metadata["timestamp"])
        assert doc.metadata["ts_epoch"] == pytest.approx(parsed.timestamp())
    turn = store.get_one(ids["turn"])
    assert turn.metadata["timestamp"] == "2026-11-01T12:00:00+00:00"
    faq = store.get_one(ids["faq"]).metadata
    assert faq["_specialist_name"] == "ocr" and faq["_version"] == "auto"
    assert store.get_one(ids["memory"]).metadata["tags"] == ["drinks"]


def test_same_memory_text_in_same_scope_is_one_document_merged(store):
    first = store.upsert_memory("Biscuit is the user's dog", importance=4, tags=["pets"], timestamp=T0)
    again = store.upsert_memory(
        "  biscuit is the USER's   dog ", importance=2, tags=["family"], timestamp=T0 + timedelta(days=1)
    )
    other_scope = store.upsert_memory("Biscuit is the user's dog", scope="entity:alice")
    assert first == again == memory_id("Biscuit is the user's dog")
    assert other_scope != first
    assert store.count("memory") == 2
    meta = store.get_one(first).metadata
    assert meta["importance"] == 4  # the higher importance is kept
    assert meta["tags"] == ["pets", "family"]
    assert meta["timestamp"] == (T0 + timedelta(days=1)).isoformat()
    # a duplicate inside one batch is merged too, not refused by Chroma
    ids = store.upsert_docs(
        [
            {"text": "Likes jazz", "type": "memory", "importance": 1},
            {"text": "likes jazz", "type": "memory", "importance": 5, "tags": ["music"]},
        ]
    )
    assert ids[0] == ids[1]
    assert store.get_one(ids[0]).metadata["importance"] == 5


def test_turn_index_is_consecutive_per_conversation_and_recent_turns_are_chronological(store):
    store.upsert_turn("conv-x", "u1", "a1")
    store.upsert_turn("conv-y", "other", "conversation")
    store.upsert_turn("conv-x", "u2", "a2")
    turns = store.recent_turns("conv-x", k=20)
    assert [(d.metadata["turn_index"], d.metadata["role"], d.text) for d in turns] == [
        (1, "user", "u1"),
        (2, "assistant", "a1"),
        (3, "user", "u2"),
        (4, "assistant", "a2"),
    ]
    assert [d.text for d in store.recent_turns("conv-x", k=3)] == ["a1", "u2", "a2"]
    assert [d.metadata["turn_index"] for d in store.recent_turns("conv-y", k=4)] == [1, 2]


def test_summary_index_is_assigned(store):
    first = store.upsert_summary("conv-s", "first part", turn_range="1-8")
    second = store.upsert_summary("conv-s", "second part", turn_range="9-16")
    assert store.get_one(first).metadata["summary_index"] == 1
    assert store.get_one(second).metadata["summary_index"] == 2
    hits = store.retrieve_summaries("second part", k=2, conversation_id="conv-s")
    assert hits[0].id == second


def test_batch_defaults_are_filled(store):
    [doc_id] = store.upsert_docs([{"text": "Vision describes photos", "type": "faq"}])
    meta = store.get_one(doc_id).metadata
    assert meta["source"] == "system" and meta["scope"] == "global" and meta["timestamp"].endswith("+00:00")


BAD_DOCS = [
    ({"text": "x", "type": "note"}, "type", "unknown document type"),
    ({"text": "x", "type": "turn", "role": "user"}, "conversation_id", "conversation_id is required"),
    ({"text": "x", "type": "memory", "importance": 0}, "importance", "importance must be between 1 and 5"),
    ({"text": "x", "type": "memory", "importance": 6}, "importance", "importance must be between 1 and 5"),
    (
        {"text": "x", "type": "memory", "importance": "high"},
        "importance",
        "importance must be an integer between 1 and 5",
    ),
    ({"text": "x", "type": "memory", "scope": "user:bob"}, "scope", "scope must be 'global' or 'entity:<name>'"),
    ({"text": "x", "type": "memory", "timestamp": "2026-11-01T10:00:00"}, "timestamp", "has no timezone"),
    ({"text": "x", "type": "memory", "timestamp": "yesterday"}, "timestamp", "must be an ISO 8601 time"),
    ({"text": "   ", "type": "memory"}, "text", "text must be a non-empty string"),
    ({"text": "x", "type": "memory", "tags": ["ok", 3]}, "tags", "tags must be a list of strings"),
    ({"text": "x", "type": "memory", "embedding": [float("nan")] * 384}, "embedding", "NaN or Inf"),
    (
        {"text": "x", "type": "memory", "embedding": [0.1] * 12},
        "embedding",
        "has 12 dimensions; this collection stores 384-d",
    ),
]


@pytest.mark.parametrize("bad, field, message", BAD_DOCS, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_DOCS)])
def test_bad_document_in_a_batch_writes_nothing_and_names_item_and_field(store, bad, field, message):
    good = {"text": "A perfectly fine memory", "type": "memory"}
    before = store.count()
    with pytest.raises(ValidationError) as err:
        store.upsert_docs([good, bad, good | {"text": "another fine one"}])
    assert message in str(err.value)
    assert "item 1" in str(err.value)
    assert any(p["item"] == 1 and p["field"].startswith(field) for p in err.value.problems)
    assert store.count() == before


def test_unexpressible_where_is_refused(store):
    with pytest.raises(FilterError, match="importance"):
        store.get(where={"importance": {"$gt": "three"}})
    with pytest.raises(FilterError, match="regex"):
        store.get(where={"topic": {"$regex": "^o"}})


def test_friendly_filters(store):
    store.upsert_memory("Takes the train to work", importance=2, tags=["commute", "routine"])
    store.upsert_memory("Runs every morning", importance=5, tags=["routine"])
    store.upsert_doc("Web search finds fresh pages", "faq", topic="web_search")
    routine = store.get(where={"tags": "routine"}, type="memory")
    assert {d.text for d in routine} == {"Takes the train to work", "Runs every morning"}
    both = store.get(where={"tags": ["routine", "commute"]})
    assert [d.text for d in both] == ["Takes the train to work"]
    important = store.get(where={"type": "memory", "importance": {"$gte": 4}})
    assert [d.text for d in important] == ["Runs every morning"]
    assert store.count("faq", where={"topic": ["web_search", "ocr"]}) == 1


ENTITIES = ("alice", "bob", "carol")
FACTS = ("favourite colour is green", "locker code is 4711", "flight leaves on Friday", "cat is called Miso")


def _write_memory(store, chat, entry: str, entity: str | None, fact: str) -> str:
    """One memory about ``entity`` (None: global) through one of the library's entry points."""
    text = f"{entity or 'everyone'}'s {fact}"
    if entry == "upsert_memory":
        return store.upsert_memory(text, entity=entity)
    if entry == "upsert_memory_scope":
        return store.upsert_memory(text, scope=f"entity:{entity}" if entity else "global")
    if entry == "upsert_docs":
        return store.upsert_docs([{"text": text, "type": "memory", **({"entity": entity} if entity else {})}])[0]
    if entry == "remember":
        return chat.remember(text, entity=entity)
    return asyncio.run(BrainMemory({"entity": entity} if entity else {}, store=store).store_memory(text))


@hypothesis_settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(
        st.tuples(
            st.sampled_from(["upsert_memory", "upsert_memory_scope", "upsert_docs", "remember", "xaibo"]),
            st.sampled_from((None, *ENTITIES)),
            st.sampled_from(FACTS),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_entity_scoping_never_leaks_another_entity(store, writes):
    """Whatever is written through whichever entry point, a caller acting for an entity never reads,
    edits or deletes another entity's memory; ``entity`` always means the scope."""
    chat = ChatMemory(store, start_worker=False)
    try:
        for entry, entity, fact in writes:
            doc = store.get_one(_write_memory(store, chat, entry, entity, fact))
            assert doc.metadata["scope"] == (f"entity:{entity}" if entity else "global")
            assert doc.metadata.get("entity") == entity
        memories = store.get(type="memory")
        for viewer in (None, *ENTITIES):
            visible = {"global", *([f"entity:{viewer}"] if viewer else [])}
            xaibo = BrainMemory({"entity": viewer} if viewer else {}, store=store)
            seen = {
                "retrieve_memories": {
                    h.metadata["scope"]
                    for h in store.retrieve_memories("what is the code?", k=50, entity=viewer, relevance=False)
                },
                # get/update/delete without an entity are the operator's (every scope)
                "get": {d.metadata["scope"] for d in store.get(type="memory", entity=viewer)} if viewer else set(),
                "build_context": {
                    i.metadata["scope"] for i in chat.build_context(None, "what is the code?", entity=viewer).memory
                },
                "xaibo list": {m["scope"] for m in asyncio.run(xaibo.list_memories())},
                "xaibo search": {
                    store.get_one(r.memory_id).metadata["scope"]
                    for r in asyncio.run(xaibo.search_memory("what is the code?", k=50))
                },
            }
            for entry, scopes in seen.items():
                assert scopes <= visible, (entry, viewer, scopes)
            for other in (m for m in memories if m.metadata["scope"] not in visible):
                if viewer is not None:
                    with pytest.raises(NotFound):
                        store.update_memory(other.id, importance=5, entity=viewer)
                    assert store.delete([other.id], entity=viewer) == 0
                    assert store.get([other.id], entity=viewer) == []
                assert asyncio.run(xaibo.get_memory(other.id)) is None
                assert asyncio.run(xaibo.update_memory(other.id, "changed")) is False
                assert asyncio.run(xaibo.delete_memory(other.id)) is False
        assert {(m.id, m.text, m.metadata["importance"]) for m in store.get(type="memory")} == {
            (m.id, m.text, m.metadata["importance"]) for m in memories
        }  # nothing was changed for another
    finally:
        chat.close()


def test_entity_and_scope_must_agree_and_a_global_memory_has_no_entity(store):
    with pytest.raises(ValidationError, match="entity 'bob' and scope 'global' disagree"):
        store.upsert_memory("Bob likes tea", scope="global", entity="bob")
    with pytest.raises(ValidationError, match="disagree"):
        store.upsert_memory("Bob likes tea", scope="entity:alice", entity="bob")
    assert store.count() == 0
    same = store.upsert_memory("Bob likes tea", scope="entity:bob", entity="bob")
    assert same == store.upsert_memory("Bob likes tea", entity="bob")
    assert "entity" not in store.get_one(store.upsert_memory("Everyone likes tea")).metadata


def test_memories_stored_global_with_an_entity_by_older_versions_read_as_global(store):
    text = "Bob's office is on floor 3"
    legacy = memory_id(text, "global")
    store.col.add(
        ids=[legacy],
        embeddings=[store.embedder.embed_documents([text])[0]],
        documents=[text],
        metadatas=[
            {
                "type": "memory",
                "scope": "global",
                "entity": "bob",
                "importance": 3,
                "source": "chat",
                "timestamp": "2025-01-01T00:00:00+00:00",
                "ts_epoch": 1735689600.0,
            }
        ],
    )
    refresh_index(store)
    for viewer in (None, "alice", "bob"):
        assert [
            h.id for h in store.retrieve_memories("which floor is the office on?", k=1, entity=viewer, relevance=False)
        ] == [legacy]
    assert store.get([legacy], entity="alice")[0].id == legacy
    # writing the same memory again merges with it (and drops the stray entity) instead of failing
    assert store.upsert_memory("bob's office is on floor 3", importance=4) == legacy
    meta = store.get_one(legacy).metadata
    assert meta["scope"] == "global" and "entity" not in meta and meta["importance"] == 4
    assert store.get_one(legacy).text == text
    store.update_memory(legacy, tags=["office"])
    assert store.get_one(legacy).metadata["tags"] == ["office"]


def test_score_parts_add_up_and_importance_matters(store):
    store.upsert_memory("The user is allergic to peanuts", importance=5, timestamp=T0)
    store.upsert_memory("The user is allergic to cats", importance=1, timestamp=T0)
    hits = store.retrieve_memories("is the user allergic to anything?", k=2, now=T0, relevance=False)
    assert [h.text for h in hits][0] == "The user is allergic to peanuts"
    for h in hits:
        assert h.score == pytest.approx(h.similarity_part + h.importance_part + h.recency_part)
        assert h.similarity_part == pytest.approx(0.5 * h.similarity)
        assert h.importance_part == pytest.approx(0.5 * h.metadata["importance"] / 5)
        assert h.recency_part == pytest.approx(0.1)  # age 0 at `now`
    later = store.retrieve_memories(
        "is the user allergic to anything?", k=1, now=T0 + timedelta(days=30), relevance=False
    )
    assert later[0].recency_part == pytest.approx(0.05)  # one half-life later


def test_exact_ranking_finds_an_important_memory_that_similarity_alone_would_bury(store):
    """Over-fetching k*N by similarity would miss it; exact ranking must not."""
    filler = [
        {
            "text": f"The user asked about the weather forecast for day {i}",
            "type": "memory",
            "importance": 1,
            "timestamp": T0,
        }
        for i in range(60)
    ]
    store.upsert_docs(filler)
    key = store.upsert_memory("The user's flight to Lisbon leaves on Friday", importance=5, timestamp=T0)
    query = "what is the weather forecast?"
    by_similarity = store.search(query, k=30, type="memory")
    assert key not in {h.id for h in by_similarity}  # buried by similarity
    top = store.retrieve_memories(query, k=1, now=T0, relevance=False)  # the reference formula
    assert top[0].id == key
    # and the whole top-k equals brute force over every stored memory
    docs = store.get(type="memory", include_embeddings=True)
    q = store.embedder.embed_query(query)
    scores = {}
    for d in docs:
        v = d.embedding / np.linalg.norm(d.embedding)
        scores[d.id] = (
            0.5 * float(v @ q)
            + 0.5 * d.metadata["importance"] / 5
            + 0.1 * 0.5 ** (max(T0.timestamp() - d.metadata["ts_epoch"], 0) / (30 * 86400))
        )
    expected = sorted(scores, key=lambda i: (-scores[i], i))[:10]
    got = store.retrieve_memories(query, k=10, now=T0, relevance=False)
    assert [h.id for h in got] == expected
    assert [h.score for h in got] == pytest.approx([scores[i] for i in expected], abs=1e-6)


def test_delete_and_update_reach_the_ranking(store):
    doomed = store.upsert_memory("The user's locker code is 4711", importance=5)
    assert store.retrieve_memories("locker code", k=1, relevance=False)[0].id == doomed
    assert store.delete(doomed) == 1
    assert all(h.id != doomed for h in store.retrieve_memories("locker code", k=5, relevance=False))
    kept = store.upsert_memory("The user's bike is blue", importance=1, tags=["bike"])
    store.upsert_memory("the user's bike is blue", importance=5)
    assert store.retrieve_memories("bike colour", k=1, relevance=False)[0].metadata["importance"] == 5
    assert store.delete(where={"tags": "bike"}, type="memory") == 1
    assert store.get(kept) == []
    with pytest.raises(ValidationError, match="refusing to delete everything"):
        store.delete()


def test_tags_and_min_importance_filter_retrieval(store):
    store.upsert_memory("Prefers window seats on planes", importance=2, tags=["travel"])
    store.upsert_memory("Prefers aisle seats at the cinema", importance=4, tags=["leisure"])
    hits = store.retrieve_memories("seat preference", k=5, tags=["travel"], relevance=False)
    assert [h.text for h in hits] == ["Prefers window seats on planes"]
    assert [h.text for h in store.retrieve_memories("seat preference", k=5, min_importance=3, relevance=False)] == [
        "Prefers aisle seats at the cinema"
    ]


def test_faq_and_persona_retrieval_by_meaning(store):
    store.upsert_docs(
        [
            {
                "text": "The ocr specialist reads printed or handwritten text from images.",
                "type": "faq",
                "topic": "ocr",
            },
            {
                "text": "The web_search specialist looks things up on the internet.",
                "type": "faq",
                "topic": "web_search",
            },
            {
                "text": "Speak warmly and briefly; never use sarcasm.",
                "type": "persona",
                "version": "v1",
                "topic": "tone",
            },
            {"text": "You are Brain, the household's assistant.", "type": "persona", "version": "v1", "topic": "core"},
        ]
    )
    assert store.retrieve_faq("read the words in this photo", k=1)[0].metadata["topic"] == "ocr"
    assert store.retrieve_faq("find it online", k=1)[0].metadata["topic"] == "web_search"
    assert store.retrieve_faq("find it online", k=2, topic="ocr")[0].metadata["topic"] == "ocr"
    assert store.retrieve_persona("how should you talk?", k=1)[0].metadata["topic"] == "tone"


def test_precomputed_unit_vectors_are_stored_as_given(store):
    vec = np.random.default_rng(0).standard_normal(384).astype(np.float32)
    vec /= np.linalg.norm(vec)
    doc_id = store.upsert_doc("a memory with its own vector", "memory", embedding=vec)
    stored = store.get(doc_id, include_embeddings=True)[0].embedding
    assert np.array_equal(stored, vec)


def test_index_notices_writes_that_bypassed_the_store(backend_settings, local_embedder):
    settings = backend_settings.model_copy(update={"index_refresh_seconds": 0.0})
    store = open_store(settings, embedder=local_embedder)
    store.upsert_memory("Known memory", importance=3)
    assert len(memory_index(store)) == 1
    vec = local_embedder.embed_documents(["Sneaked in memory"])[0]
    store.col.add(
        ids=["doc-sneaky"],
        embeddings=[vec],
        documents=["Sneaked in memory"],
        metadatas=[
            {
                "type": "memory",
                "importance": 5,
                "scope": "global",
                "ts_epoch": 1.0,
                "timestamp": "1970-01-01T00:00:01+00:00",
                "source": "system",
            }
        ],
    )
    assert store.retrieve_memories("sneaked", k=1, relevance=False)[0].id != "doc-sneaky"  # refresh disabled
    refresh_index(store)
    assert store.retrieve_memories("sneaked", k=1, relevance=False)[0].id == "doc-sneaky"
    quick = open_store(backend_settings.model_copy(update={"index_refresh_seconds": 1e-9}), embedder=local_embedder)
    memory_index(quick)
    store.col.delete(ids=["doc-sneaky"])
    assert all(h.id != "doc-sneaky" for h in quick.retrieve_memories("sneaked", k=2, relevance=False))


def test_reopening_with_another_embedder_is_refused(settings, local_embedder):
    open_store(settings, embedder=local_embedder).upsert_memory("x y z")
    other = settings.model_copy(update={"embedder": "ollama/nomic-embed-text"})
    with pytest.raises(EmbeddingModelMismatch, match="local/minilm-l6-v2.*ollama/nomic-embed-text"):
        open_store(other)
    # the same embedder reopens the same data
    again = open_store(settings, embedder=local_embedder)
    assert again.count("memory") == 1


def test_failed_multi_chunk_write_is_rolled_back(embedded_store, monkeypatch):
    store = embedded_store
    store.upsert_memory("Existing fact number one", importance=2)
    before = {d.id: d.metadata for d in store.get()}
    store.chroma.max_batch_size = 2
    real_upsert = store.col.upsert
    calls = {"n": 0}

    def failing_upsert(**kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk full")
        return real_upsert(**kwargs)

    monkeypatch.setattr(store.col, "upsert", failing_upsert)
    docs = [{"text": "Existing fact number one", "type": "memory", "importance": 5}] + [
        {"text": f"new fact {i}", "type": "memory"} for i in range(4)
    ]
    with pytest.raises(StoreUnavailable, match="disk full"):
        store.upsert_docs(docs)
    monkeypatch.setattr(store.col, "upsert", real_upsert)
    after = {d.id: d.metadata for d in store.get()}
    assert after == before


def test_unreachable_chroma_server_is_a_clear_error(tmp_path, local_embedder):
    from tests.conftest import free_port

    settings = Settings(data_dir=tmp_path, chroma_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StoreUnavailable, match="chroma run"):
        open_store(settings, embedder=local_embedder)


def test_retrieval_arguments_are_validated(store):
    with pytest.raises(ValidationError, match="query"):
        store.retrieve_memories("   ", relevance=False)
    with pytest.raises(ValidationError, match="k must be"):
        store.retrieve_memories("x", k=0, relevance=False)
    with pytest.raises(ValidationError, match="entity"):
        store.retrieve_memories("x", entity=" padded ", relevance=False)
    assert store.retrieve_memories("nothing stored yet", relevance=False) == []
    assert math.isfinite(store.weights.half_life_seconds)


def test_typed_retrieval_in_process_matches_chromas_filtered_query(backend_settings, local_embedder):
    docs = [
        {"text": "The ocr specialist reads text from photos and scans.", "type": "faq", "topic": "ocr"},
        {"text": "OCR works best on flat, well-lit pages.", "type": "faq", "topic": "ocr"},
        {"text": "web_search finds fresh information online.", "type": "faq", "topic": "web_search"},
        {"text": "vision describes what is in a picture.", "type": "faq", "topic": "vision"},
        {
            "text": "The user planned a trip to Porto in May.",
            "type": "summary",
            "conversation_id": "conv-a",
            "turn_range": "1-6",
        },
        {
            "text": "They compared train and bus prices.",
            "type": "summary",
            "conversation_id": "conv-b",
            "turn_range": "1-4",
        },
        {"text": "Be warm and brief.", "type": "persona", "version": "v1", "topic": "tone"},
        {"text": "You are Brain.", "type": "persona", "version": "v1", "topic": "core"},
    ]
    indexed = open_store(backend_settings, embedder=local_embedder)
    indexed.upsert_docs(docs)
    via_chroma = open_store(backend_settings.model_copy(update={"index_types": "memory"}), embedder=local_embedder)
    cases = [
        (lambda s: s.retrieve_faq("read the words on this receipt photo", k=3)),
        (lambda s: s.retrieve_faq("read the words on this receipt photo", k=3, topic="ocr")),
        (lambda s: s.retrieve_summaries("travel plans", k=2)),
        (lambda s: s.retrieve_summaries("travel plans", k=2, conversation_id="conv-b")),
        (lambda s: s.retrieve_persona("who are you?", k=2)),
    ]
    for case in cases:
        mine, theirs = case(indexed), case(via_chroma)
        assert [h.id for h in mine] == [h.id for h in theirs]
        assert [h.similarity for h in mine] == pytest.approx([h.similarity for h in theirs], abs=1e-5)
    assert {h.metadata["topic"] for h in cases[1](indexed)} == {"ocr"}
    assert [h.metadata["conversation_id"] for h in cases[3](indexed)] == ["conv-b"]


def test_faq_updates_and_deletes_reach_typed_retrieval(store):
    [doc_id] = store.upsert_docs(
        [{"id": "doc-faq-1", "text": "Printers jam when paper is damp.", "type": "faq", "topic": "printer"}]
    )
    assert store.retrieve_faq("why does the printer jam?", k=1)[0].id == doc_id
    store.upsert_doc("Vision can read a chart and explain it.", "faq", topic="vision", id=doc_id)
    hit = store.retrieve_faq("explain this chart", k=1)[0]
    assert hit.id == doc_id and hit.metadata["topic"] == "vision" and "chart" in hit.text
    store.delete(doc_id)
    assert store.retrieve_faq("explain this chart", k=1) == []


def test_index_types_setting_is_validated():
    from brain.model.errors import ConfigError

    with pytest.raises(ConfigError, match="BRAIN_INDEX_TYPES.*must include memory"):
        Settings(index_types="faq")
    with pytest.raises(ConfigError, match="unknown document types"):
        Settings(index_types="memory,notes")
    assert Settings(index_types=" memory , faq,faq").indexed_types == ("memory", "faq")


def test_large_reads_are_paged(store, monkeypatch):
    """Chroma refuses one get over tens of thousands of documents; every read must page."""
    import brain.store.chroma as chroma

    rng = np.random.default_rng(1)
    docs = [
        {
            "text": f"memory {i}",
            "type": "memory",
            "importance": 1 + i % 5,
            "embedding": rng.standard_normal(384).astype(np.float32),
        }
        for i in range(53)
    ]
    docs += [
        {"text": f"faq {i}", "type": "faq", "topic": "t", "embedding": rng.standard_normal(384).astype(np.float32)}
        for i in range(20)
    ]
    store.upsert_docs(docs)
    monkeypatch.setattr(chroma, "PAGE", 7)
    assert store.count("memory") == 53
    assert len(store.get(type="memory")) == 53
    assert [d.text for d in store.get(type="faq", limit=9, offset=5)] == [d.text for d in store.get(type="faq")][5:14]
    assert len(store.get([f"nope-{i}" for i in range(3)] + [d.id for d in store.get(type="faq")])) == 20
    assert len(refresh_index(store)) == 53
    assert store.delete(where={"importance": 1}, type="memory") == 11
    assert store.count("memory") == 42 and len(memory_index(store)) == 42


def test_recent_turns_cache_follows_writes_deletes_and_outside_changes(backend_settings, local_embedder):
    store = open_store(backend_settings.model_copy(update={"index_refresh_seconds": 1e-9}), embedder=local_embedder)
    first, _ = store.upsert_turn("conv-cache", "u1", "a1")
    assert [d.text for d in store.recent_turns("conv-cache", k=10)] == ["u1", "a1"]  # now cached
    store.upsert_turn("conv-cache", "u2", "a2")
    assert [d.metadata["turn_index"] for d in store.recent_turns("conv-cache", k=10)] == [1, 2, 3, 4]
    store.delete(first)
    assert [d.text for d in store.recent_turns("conv-cache", k=10)] == ["a1", "u2", "a2"]
    # another writer adds a turn straight into Chroma: noticed by the count check
    vec = local_embedder.embed_documents(["u3"])[0]
    store.col.add(
        ids=["doc-outside"],
        embeddings=[vec],
        documents=["u3"],
        metadatas=[
            {
                "type": "turn",
                "conversation_id": "conv-cache",
                "role": "user",
                "turn_index": 5,
                "scope": "global",
                "source": "chat",
                "timestamp": "2026-11-01T00:00:00+00:00",
                "ts_epoch": 1793491200.0,
            }
        ],
    )
    assert [d.text for d in store.recent_turns("conv-cache", k=10)][-1] == "u3"
    assert (
        store.upsert_turn("conv-cache", "u4", "a4")
        and store.recent_turns("conv-cache", k=1)[0].metadata["turn_index"] == 7
    )
    with pytest.raises(ValidationError, match="conversation_id"):
        store.recent_turns("not-a-conversation")


def test_turn_cache_keeps_only_recent_conversations(embedded_store, monkeypatch):
    monkeypatch.setattr(embedded_store.state.conversations, "maxsize", 2)
    for n in range(4):
        embedded_store.upsert_turn(f"conv-{n}", f"hello {n}", f"hi {n}")
        embedded_store.recent_turns(f"conv-{n}")
    assert list(embedded_store.state.conversations) == ["conv-2", "conv-3"]
    assert [d.text for d in embedded_store.recent_turns("conv-0")] == ["hello 0", "hi 0"]  # re-read from Chroma
    embedded_store.upsert_turn("conv-0", "again", "yes")
    assert [d.metadata["turn_index"] for d in embedded_store.recent_turns("conv-0")] == [1, 2, 3, 4]


# ---- update_memory: in place, replacing values ----------------------------------------------------


def test_update_memory_replaces_values_and_keeps_the_id(store):
    doc_id = store.upsert_memory("Alice drinks coffee", importance=5, tags=["food", "morning"], source="chat")
    updated = store.update_memory(doc_id, "Alice drinks tea now", importance=2, tags=["drinks"])
    assert updated.id == doc_id
    assert updated.text == "Alice drinks tea now"
    assert updated.metadata["importance"] == 2  # replaced, not max-merged
    assert updated.metadata["tags"] == ["drinks"]
    assert updated.metadata["source"] == "chat"
    assert store.count("memory") == 1
    # the new text is what retrieval finds now, through the in-process index and Chroma alike
    hit = store.retrieve_memories("what does Alice drink, tea?", k=1, relevance=False)[0]
    assert hit.id == doc_id and hit.text == "Alice drinks tea now"
    fresh = store.embedder.embed_documents(["Alice drinks tea now"])[0]
    stored = store.get([doc_id], include_embeddings=True)[0].embedding
    assert float(stored @ fresh) > 0.999


def test_update_memory_metadata_merge_and_replace(store):
    doc_id = store.upsert_memory("Bob plays chess", topic="games", level="club")
    merged = store.update_memory(doc_id, metadata={"level": "master", "city": "Oslo"})
    assert (merged.metadata["topic"], merged.metadata["level"], merged.metadata["city"]) == ("games", "master", "Oslo")
    assert merged.text == "Bob plays chess"
    replaced = store.update_memory(doc_id, metadata={"city": "Bergen"}, replace_metadata=True)
    assert "topic" not in replaced.metadata and "level" not in replaced.metadata
    assert replaced.metadata["city"] == "Bergen" and replaced.metadata["importance"] == 3


def test_update_memory_unknown_id_and_bad_values_write_nothing(store):
    doc_id = store.upsert_memory("Carol likes jazz", importance=4)
    with pytest.raises(NotFound):
        store.update_memory("doc-missing", "x")
    with pytest.raises(ValidationError, match="importance"):
        store.update_memory(doc_id, "Carol likes blues", importance=9)
    kept = store.get_one(doc_id)
    assert (kept.text, kept.metadata["importance"]) == ("Carol likes jazz", 4)


def test_rewriting_a_document_drops_keys_the_new_version_lacks(store):
    """Chroma merges metadata on upsert; the store must replace it (and agree with its own index)."""
    doc_id = store.upsert_doc("The office opens at nine", "faq", topic="hours", building="north")
    store.upsert_doc("The office opens at ten", "faq", id=doc_id)
    stored = store.col.get(ids=[doc_id], include=["metadatas"])["metadatas"][0]
    assert "topic" not in stored and "building" not in stored
    assert "building" not in store.retrieve_faq("when does the office open?", k=1)[0].metadata
    mem = store.upsert_memory("Dana keeps bees", tags=["hobby"])
    store.update_memory(mem, tags=[])
    assert "tags" not in store.col.get(ids=[mem], include=["metadatas"])["metadatas"][0]
    assert store.get_one(mem).metadata["tags"] == []


def test_rewriting_many_memories_merges_across_id_chunks(embedded_store):
    """Chroma caps the ids of one get (about 32k in embedded Chroma): the merge lookup is chunked."""
    store = embedded_store
    texts = [f"fact {i} about the garden" for i in range(10)]
    store.upsert_docs([{"text": t, "type": "memory", "importance": 2, "tags": ["old"]} for t in texts])
    store.chroma.max_batch_size = 3  # the lookup of existing memories now spans four gets
    store.upsert_docs([{"text": t, "type": "memory", "importance": 4, "tags": ["new"]} for t in texts])
    docs = store.get(type="memory")
    assert len(docs) == 10
    assert all(d.metadata["importance"] == 4 and set(d.metadata["tags"]) == {"old", "new"} for d in docs)


def test_retracted_superseded_and_archived_memories_are_kept_but_never_retrieved(store):
    live = store.upsert_memory("Alice lives in Porto", importance=3)
    gone = {
        status: store.upsert_memory(f"Alice lives in Lisbon ({status})", importance=5, pam_status=status)
        for status in ("retracted", "superseded", "archived")
    }
    deprecated = store.upsert_memory("Alice lives in Faro (deprecated)", importance=5, pam_status="deprecated")
    hits = {h.id for h in store.retrieve_memories("where does Alice live?", k=10, relevance=False)}
    assert live in hits and deprecated in hits and not hits & set(gone.values())
    assert store.count("memory") == 5  # still stored
    operator = {h.id for h in store.retrieve_memories("where does Alice live?", k=10, all_scopes=True, relevance=False)}
    assert set(gone.values()) <= operator
    store.update_memory(gone["retracted"], metadata={"pam_status": "active"})  # reinstated
    assert gone["retracted"] in {h.id for h in store.retrieve_memories("where does Alice live?", k=10, relevance=False)}


def test_writing_a_memorys_old_text_after_an_in_place_change_keeps_both(store):
    paris = store.upsert_memory("The user lives in Paris", importance=3)
    store.update_memory(paris, "The user lives in Berlin")
    again = store.upsert_memory("The user lives in Paris", importance=2)
    assert again != paris
    texts = {d.id: d.text for d in store.get(type="memory")}
    assert texts == {paris: "The user lives in Berlin", again: "The user lives in Paris"}
    # idempotent: the same text lands on the same (alternative) id again
    assert store.upsert_memory("the user lives in  PARIS") == again
    assert store.count("memory") == 2


def test_a_given_vector_is_stored_at_unit_length(store):
    """The collection compares by cosine and the ranking's error bound assumes unit rows: a caller's
    vector of another length is scaled, one already of unit length is kept bit for bit."""
    rng = np.random.default_rng(7)
    unit = rng.standard_normal(store.dimension).astype(np.float32)
    unit /= np.linalg.norm(unit)
    long_id = store.upsert_doc("all sevens", "memory", embedding=[7.0] * store.dimension)
    unit_id = store.upsert_doc("a unit vector", "memory", embedding=unit)
    stored = {d.id: d.embedding for d in store.get([long_id, unit_id], include_embeddings=True)}
    assert np.linalg.norm(stored[long_id]) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(stored[long_id], 1 / np.sqrt(store.dimension), atol=1e-6)
    assert np.array_equal(stored[unit_id], unit)
    hit = store.retrieve_memories("anything", 2, query_vector=np.full(store.dimension, 1.0), relevance=False)[0]
    assert hit.id == long_id and hit.similarity == pytest.approx(1.0, abs=1e-3)


def test_get_with_an_id_given_twice_returns_it_once(store):
    kept = store.upsert_memory("Ada plays the cello")
    assert [d.id for d in store.get([kept, "doc-missing", kept])] == [kept]
