"""Memory consolidation: near-duplicates of one scope merged, with a report of every merge."""

from __future__ import annotations

import math

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.features.consolidate import consolidate_memories
from brain.model.errors import ValidationError
from brain.shells.cli.reports import consolidation_text
from brain.store.indexes import refresh_index

DIM = 384


def direction(angle_degrees: float, plane: int = 0) -> np.ndarray:
    """A unit vector at ``angle_degrees`` from axis ``2*plane`` in the plane of axes 2*plane and 2*plane+1."""
    v = np.zeros(DIM, dtype=np.float32)
    a = math.radians(angle_degrees)
    v[2 * plane], v[2 * plane + 1] = math.cos(a), math.sin(a)
    return v


def cos_deg(degrees: float) -> float:
    return math.cos(math.radians(degrees))


@pytest.fixture
def store(tmp_path, local_embedder):
    s = open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder)
    yield s
    s.close()


def memory(text, vec, **meta):
    return {"text": text, "type": "memory", "embedding": vec, **meta}


def snapshot(store):
    return {d.id: (d.text, d.metadata) for d in store.get(type="memory")}


def test_near_duplicates_merge_with_united_fields(store):
    ids = store.upsert_docs(
        [
            memory(
                "User's cat is called Miso",
                direction(0),
                importance=3,
                tags=["pets"],
                timestamp="2024-03-01T00:00:00+00:00",
                created_at="2024-01-05T00:00:00+00:00",
            ),
            memory(
                "The user has a cat named Miso",
                direction(10),
                importance=5,
                tags=["cats", "pets"],
                timestamp="2024-02-01T00:00:00+00:00",
                created_at="2024-02-01T00:00:00+00:00",
            ),
            memory(
                "user's cat: Miso",
                direction(15),
                importance=2,
                tags=["animals"],
                timestamp="2024-05-01T00:00:00+00:00",
                last_used=1_750_000_000.0,
            ),
            memory("The user likes jazz", direction(0, plane=1), importance=4),
        ]
    )
    report = consolidate_memories(store, threshold=0.92)
    assert report.scanned == 4 and report.removed == 2 and not report.dry_run
    (merge,) = report.merges
    assert merge.kept_id == ids[1]  # highest importance is kept
    assert merge.kept_text == "The user has a cat named Miso"
    assert merge.merged_ids == [ids[0], ids[2]]
    assert merge.merged_texts == ["User's cat is called Miso", "user's cat: Miso"]
    assert merge.similarities == pytest.approx([cos_deg(10), cos_deg(5)], abs=1e-5)
    kept = store.get_one(ids[1]).metadata
    assert kept["tags"] == ["cats", "pets", "animals"]
    assert kept["importance"] == 5
    assert kept["created_at"] == "2024-01-05T00:00:00+00:00"  # the earliest creation
    assert kept["timestamp"] == "2024-05-01T00:00:00+00:00"  # the latest timestamp
    assert kept["last_used"] == 1_750_000_000.0
    assert kept["merged_from"] == [ids[0], ids[2]]
    assert {d.id for d in store.get(type="memory")} == {ids[1], ids[3]}
    assert {h.id for h in store.retrieve_memories("cat", k=5, relevance=False)} == {
        ids[1],
        ids[3],
    }  # the index followed
    assert "would merge" not in consolidation_text(report) and ids[0] in consolidation_text(report)


def test_dry_run_changes_nothing_and_reports_the_same(store):
    store.upsert_docs([memory("a", direction(0), importance=4), memory("b", direction(5)), memory("c", direction(90))])
    before = snapshot(store)
    dry = consolidate_memories(store, threshold=0.9, dry_run=True)
    assert snapshot(store) == before
    assert dry.dry_run and dry.removed == 1 and "would merge 1 into 1" in consolidation_text(dry)
    real = consolidate_memories(store, threshold=0.9)
    assert [m.to_dict() for m in real.merges] == [m.to_dict() for m in dry.merges]
    assert len(snapshot(store)) == 2


def test_scopes_never_mix(store):
    store.upsert_docs(
        [
            memory("Likes tea", direction(0)),
            memory("Likes tea", direction(1), scope="entity:alice"),
            memory("Likes tea!", direction(2), scope="entity:bob"),
        ]
    )
    report = consolidate_memories(store, threshold=0.9)
    assert report.merges == [] and store.count("memory") == 3


def test_no_chains_every_merged_memory_is_close_to_the_kept_one(store):
    # a~b and b~c are above the threshold, a~c is not: b joins a, c stays
    ids = store.upsert_docs(
        [
            memory("a", direction(0), importance=5),
            memory("b", direction(16), importance=3),
            memory("c", direction(32), importance=3),
        ]
    )
    report = consolidate_memories(store, threshold=0.92)
    assert [(m.kept_id, m.merged_ids) for m in report.merges] == [(ids[0], [ids[1]])]
    assert {d.id for d in store.get(type="memory")} == {ids[0], ids[2]}


def test_threshold_is_strict_and_checked(store):
    store.upsert_docs([memory("x", direction(0)), memory("y", direction(20))])
    assert consolidate_memories(store, threshold=cos_deg(20) + 1e-4).merges == []
    assert len(consolidate_memories(store, threshold=cos_deg(20) - 1e-4, dry_run=True).merges) == 1
    for bad in (0, 1.5, -0.2, "0.9", True):
        with pytest.raises(ValidationError, match="threshold"):
            consolidate_memories(store, threshold=bad)


def test_whole_set_is_validated_before_anything_is_written(store):
    # two pairs of near-duplicates; the second pair's merged tags would exceed MAX_TAGS
    store.upsert_docs(
        [
            memory("good one", direction(0), importance=5),
            memory("good two", direction(5)),
            memory("tagged one", direction(0, 1), tags=[f"a{i}" for i in range(60)]),
            memory("tagged two", direction(5, 1), tags=[f"b{i}" for i in range(60)]),
        ]
    )
    before = snapshot(store)
    with pytest.raises(ValidationError, match=r"tags: 120 tags given; a memory has at most 100 \(MAX_TAGS\)"):
        consolidate_memories(store, threshold=0.9)
    assert snapshot(store) == before  # the valid merge was not applied either


@pytest.mark.parametrize(
    "bad",
    [
        {"importance": 9},
        {"last_used": "yesterday"},
        {"created_at": "last week"},
        {"tags": "solo"},
        {"importance": "high"},
    ],
)
def test_rows_written_around_the_schema_are_left_alone_and_reported(store, bad):
    kept = store.upsert_docs([memory("good one", direction(0), importance=5), memory("good two", direction(5))])
    raw = {
        "type": "memory",
        "scope": "global",
        "importance": 3,
        "timestamp": "2024-01-01T00:00:00+00:00",
        "ts_epoch": 1704067200.0,
        "source": "chat",
        **bad,
    }
    store.col.add(
        ids=["doc-raw-1", "doc-raw-2"],
        embeddings=[direction(0, 1), direction(3, 1)],
        documents=["raw one", "raw two"],
        metadatas=[raw, raw],
    )
    refresh_index(store)
    raw_before = {d.id: d.metadata for d in store.get(["doc-raw-1", "doc-raw-2"])}
    report = consolidate_memories(store, threshold=0.9)
    assert set(report.skipped) == {"doc-raw-1", "doc-raw-2"}
    assert next(iter(bad)) in report.skipped["doc-raw-1"] and "skipped doc-raw-1" in consolidation_text(report)
    assert [m.kept_id for m in report.merges] == [kept[0]] and report.merges[0].merged_ids == [kept[1]]
    assert {d.id: d.metadata for d in store.get(["doc-raw-1", "doc-raw-2"])} == raw_before  # untouched


def test_chat_memory_uses_the_configured_threshold(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", consolidate_threshold=0.999)
    store = open_store(settings, embedder=local_embedder)
    chat = ChatMemory(store, start_worker=False)
    try:
        store.upsert_docs([memory("p", direction(0)), memory("q", direction(5))])  # cosine 0.996
        assert chat.consolidate(dry_run=True).merges == []
        assert len(chat.consolidate(dry_run=True, threshold=0.99).merges) == 1
        assert chat.consolidate().threshold == 0.999
    finally:
        chat.close()
        store.close()


def test_parts_and_memories_with_parts_are_left_alone_other_adapter_rows_merge(embedded_store, local_embedder):
    vec = local_embedder.embed_documents(["Alice is vegetarian"])[0]
    near = vec + 0.001  # near-duplicates of each other
    embedded_store.upsert_docs(
        [
            {
                "id": "doc-head",
                "text": "Alice is vegetarian",
                "type": "memory",
                "embedding": vec,
                "xaibo.revision": "r",
            },
            {
                "id": "doc-chunk",
                "text": "Alice is vegetarian!",
                "type": "memory",
                "embedding": near,
                "part_of": "doc-head",
                "xaibo.revision": "r",
            },
            {
                "id": "doc-xaibo",
                "text": "Bob is vegetarian",
                "type": "memory",
                "embedding": vec * 2,
                "xaibo.revision": "s",
                "importance": 5,
            },  # a Xaibo memory without parts: merged like any memory
            {"id": "doc-plain", "text": "Bob is a vegetarian", "type": "memory", "embedding": near},
        ]
    )
    report = consolidate_memories(embedded_store, threshold=0.9)
    assert [(m.kept_id, m.merged_ids) for m in report.merges] == [("doc-xaibo", ["doc-plain"])]
    assert report.scanned == 2  # the memory with parts and its part are not scanned
    assert {d.id for d in embedded_store.get(type="memory")} == {"doc-head", "doc-chunk", "doc-xaibo"}
