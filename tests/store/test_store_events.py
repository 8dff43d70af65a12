"""Write events: one per committed write, in sequence; staged before Chroma, committed or aborted after;
the mirror and the in-process state follow them; writes report the positions they assigned."""

from __future__ import annotations

import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.features.mirror import EngramMirror
from brain.model.errors import StoreUnavailable
from brain.store import WriteEvent, WriteSubscriber
from brain.store.indexes import memory_index
from brain.store.retrieval import record_memory_use


class Recorder(WriteSubscriber):
    """Records every phase it is told of, and optionally what the mirror holds while an event is staged."""

    def __init__(self, mirror: EngramMirror | None = None):
        self.calls: list[tuple[str, WriteEvent]] = []
        self.mirror = mirror
        self.mirror_while_staged: list[set[str]] = []

    def stage(self, event: WriteEvent) -> None:
        self.calls.append(("stage", event))
        if self.mirror is not None:
            self.mirror_while_staged.append({d.id for d in self.mirror.get(list(event.ids))})

    def commit(self, event: WriteEvent) -> None:
        self.calls.append(("commit", event))

    def abort(self, event: WriteEvent) -> None:
        self.calls.append(("abort", event))

    def phases(self) -> list[tuple[str, str, int]]:
        return [(phase, event.op, event.sequence) for phase, event in self.calls]


def test_every_committed_write_is_one_event_in_increasing_sequence(embedded_store):
    store = embedded_store
    seen = store.subscribe(Recorder())
    mem = store.upsert_memory("Gina keeps bees", importance=2)
    store.upsert_memory("Gina keeps bees", importance=2)  # changes nothing: no write, no event
    store.update_memory(mem, "Gina keeps two hives of bees")
    record_memory_use(store, {mem: 1_800_000_000.0})
    assert store.delete(mem) == 1
    assert store.delete("doc-absent") == 0  # nothing to delete: no event

    committed = [event for phase, event in seen.calls if phase == "commit"]
    assert [e.op for e in committed] == ["upsert", "upsert", "metadata", "delete"]
    assert all(e.ids == (mem,) for e in committed)
    sequences = [e.sequence for e in committed]
    assert sequences == sorted(set(sequences))  # increasing, each once
    # every event was staged just before it was committed
    assert seen.phases() == [(p, e.op, e.sequence) for e in committed for p in ("stage", "commit")]
    upsert = committed[1]
    assert upsert.texts == ("Gina keeps two hives of bees",) and upsert.vectors.shape == (1, store.dimension)
    assert upsert.metadatas[0]["type"] == "memory"
    assert committed[2].metadatas == ({"last_used": 1_800_000_000.0},)  # only the key that changed


def _store_whose_chroma_refuses_our_vectors(settings: Settings, embedder, mirror):
    """A store whose collection Chroma has fixed to 3-d vectors (one 3-d record written straight into it and
    deleted again; Chroma keeps the dimension) while its metadata says 384: Chroma refuses every write."""
    store = open_store(settings, embedder=embedder, mirror=mirror)
    store.col.add(ids=["probe"], embeddings=[[1.0, 0.0, 0.0]], documents=["probe"], metadatas=[{"type": "probe"}])
    store.col.delete(ids=["probe"])
    return store


def test_a_failed_chroma_write_is_aborted_and_leaves_the_mirror_unchanged(tmp_path, local_embedder):
    mirror = EngramMirror(tmp_path / "mirror.db", local_embedder.name)
    vector = local_embedder.embed_documents(["Hal repairs clocks"])[0]
    mirror.upsert(
        [
            {
                "id": "doc-seed",
                "text": "Hal repairs clocks",
                "metadata": {
                    "type": "memory",
                    "scope": "global",
                    "importance": 3,
                    "timestamp": "2026-11-01T00:00:00+00:00",
                },
                "embedding": vector,
            }
        ]
    )
    before = [(d.id, d.text, d.metadata) for d in mirror.get(["doc-seed"])]
    try:
        with _store_whose_chroma_refuses_our_vectors(
            Settings(data_dir=tmp_path / "data"), local_embedder, mirror
        ) as store:
            seen = store.subscribe(Recorder(mirror))  # after the mirror: it sees the mirror's staged rows
            with pytest.raises(StoreUnavailable, match="nothing was written"):
                store.upsert_docs(
                    [
                        {"text": "Ivy sings in a choir", "type": "memory", "id": "doc-ivy"},
                        {"text": "Hal repairs clocks", "type": "memory", "id": "doc-seed"},
                    ]
                )
            assert [(phase, op) for phase, op, _ in seen.phases()] == [("stage", "upsert"), ("abort", "upsert")]
            assert seen.mirror_while_staged == [{"doc-ivy", "doc-seed"}]  # the mirror had staged both rows...
            assert mirror.ids() == {"doc-seed"}  # ...and rolled them back
            assert [(d.id, d.text, d.metadata) for d in mirror.get(["doc-seed"])] == before
            assert store.count() == 0 and store.mirror_health.status == "ok"
    finally:
        mirror.close()


def test_a_subscriber_that_refuses_to_stage_fails_the_write_before_chroma(embedded_store):
    store = embedded_store

    class Refusing(WriteSubscriber):
        def stage(self, event):
            raise StoreUnavailable("the feed is full")

    seen = store.subscribe(Recorder())
    refusing = store.subscribe(Refusing())
    with pytest.raises(StoreUnavailable, match="the feed is full"):
        store.upsert_memory("Jo swims at dawn")
    assert store.count() == 0 and store.mirror.count() == 0
    assert [phase for phase, _, _ in seen.phases()] == ["stage", "abort"]
    store.events.unsubscribe(refusing)
    store.upsert_memory("Jo swims at dawn")
    assert [phase for phase, _, _ in seen.phases()][-2:] == ["stage", "commit"]


def test_the_indexes_and_turn_cache_follow_edits_and_deletes(store):
    kept = store.upsert_memory("Kim grows tomatoes")
    edited = store.upsert_memory("Kim drives a red van")
    assert (
        store.retrieve_memories("what colour is Kim's van?", k=1, relevance=False)[0].id == edited
    )  # the index is built now
    store.update_memory(edited, "Kim drives a green van")
    hit = store.retrieve_memories("what colour is Kim's van?", k=1, relevance=False)[0]
    assert (hit.id, hit.text) == (edited, "Kim drives a green van")
    store.delete(edited)
    assert edited not in memory_index(store) and kept in memory_index(store)
    assert [h.id for h in store.retrieve_memories("Kim's van", k=5, relevance=False)] == [kept]

    first, _ = store.upsert_turn("conv-follow", "u1", "a1")
    assert [d.text for d in store.conversation_turns("conv-follow")] == ["u1", "a1"]  # cached now
    store.upsert_docs(
        [
            {
                "id": first,
                "text": "u1, corrected",
                "type": "turn",
                "conversation_id": "conv-follow",
                "role": "user",
                "turn_index": 1,
            }
        ]
    )
    store.delete(where={"role": "assistant"}, type="turn")
    assert [d.text for d in store.conversation_turns("conv-follow")] == ["u1, corrected"]


def test_writes_report_the_positions_they_assigned(embedded_store):
    store = embedded_store
    first = store.write_turns("conv-pos", "hello", "hi")
    second = store.write_turns("conv-pos", "how are you?", "fine")
    assert [first.position(i) for i in first.ids] == [1, 2]
    assert [second.position(i) for i in second.ids] == [3, 4]
    assert {d.id: d.metadata["turn_index"] for d in store.conversation_turns("conv-pos")} == {
        **first.positions,
        **second.positions,
    }
    summaries = store.write_docs(
        [{"text": f"summary {n}", "type": "summary", "conversation_id": "conv-pos"} for n in range(2)]
    )
    assert sorted(summaries.positions.values()) == [1, 2]
    assert [d.text for d in store.conversation_summaries("conv-pos")] == ["summary 0", "summary 1"]
    memory = store.write_docs([{"text": "Lee reads maps", "type": "memory"}])
    assert memory.positions == {}  # memories have no position


def test_record_exchange_takes_the_positions_from_its_write(embedded_store):
    store = embedded_store
    with ChatMemory(store, start_worker=False) as chat:
        one = chat.record_exchange(None, "hello", "hi")
        store.upsert_turn(one.conversation_id, "from elsewhere", "noted")  # another writer: indexes 3, 4
        two = chat.record_exchange(one.conversation_id, "and now?", "now this")
    assert (one.user_turn_index, one.assistant_turn_index) == (1, 2)
    assert (two.user_turn_index, two.assistant_turn_index) == (5, 6)
    stored = {d.id: d.metadata["turn_index"] for d in store.conversation_turns(one.conversation_id)}
    assert stored[two.user_turn_id] == 5 and stored[two.assistant_turn_id] == 6


def test_the_store_imports_neither_the_mirror_nor_the_persona():
    import ast
    from pathlib import Path

    import brain.store

    for path in Path(brain.store.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not {m for m in imported if m.startswith(("brain.features.mirror", "brain.features.persona"))}, path.name


def test_a_bare_store_has_no_mirror_until_one_is_subscribed(tmp_path, local_embedder):
    from brain.features.mirror.subscriber import open_mirror_subscriber
    from brain.store import Store

    settings = Settings(data_dir=tmp_path / "data")
    with Store(settings, embedder=local_embedder) as bare:
        bare.upsert_memory("Max collects stamps")
        assert bare.mirror is None and bare.mirror_health is None
        link = open_mirror_subscriber(settings, local_embedder.name)
        bare.mirror_link = bare.subscribe(link, close=link.close)
        later = bare.upsert_memory("Max mends bicycles")
        assert bare.mirror.ids() == {later}  # it follows the writes from the moment it subscribed
    assert link.mirror is None  # closed with the store
