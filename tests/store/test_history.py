"""Change with history: supersede never deletes, the chain is one call, ``as_of`` answers with what held
then, and expired memories stop ranking at their expiry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from brain.app.core import open_store
from brain.app.forget import forget_entity
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.features.consolidate import consolidate_memories as store_consolidate
from brain.features.mirror.sync import verify_mirror
from brain.model.errors import NotFound, ValidationError
from brain.model.schemas import utc_now
from brain.rules import ranking
from brain.rules.ranking import ScoreWeights
from brain.store.memory_index import MemoryIndex
from brain.store.memory_query import MemoryQuery
from brain.store.write_intents import WriteIntentLog
from tests.conftest import ROOT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MOVED = T0 + timedelta(days=150)


def _texts(hits):
    return [h.text for h in hits]


def _paris(store, entity="alice"):
    return store.upsert_memory(
        "Alice lives in Paris", entity=entity, importance=4, tags=["home"], created_at=T0.isoformat(), timestamp=T0
    )


def test_a_supersession_keeps_the_old_memory_linked_to_the_new_one(embedded_store):
    store = embedded_store
    old_id = _paris(store)
    done = store.supersede(old_id, "Alice lives in Berlin", kind="update", at=MOVED, entity="alice")
    old, new = store.get_one(old_id), store.get_one(done.new.id)
    assert old.text == "Alice lives in Paris"  # never deleted, text kept
    assert old.metadata["status"] == "superseded"
    assert old.metadata["valid_until"] == MOVED.isoformat()
    assert old.metadata["superseded_by"] == new.id
    assert old.metadata["timestamp"] == T0.isoformat()  # not restated: its own time stays
    assert new.metadata["supersedes"] == old_id and new.metadata["change"] == "update"
    assert new.metadata["valid_from"] == MOVED.isoformat()
    assert new.metadata["scope"] == "entity:alice"
    assert new.metadata["importance"] == 4 and new.metadata["tags"] == ["home"]  # the old one's unless given
    assert "status" not in new.metadata
    assert done.old.metadata == old.metadata and done.new.id == new.id and done.kind == "update"
    # only the current memory ranks
    assert _texts(store.retrieve_memories("where does Alice live", entity="alice", relevance=False)) == [
        "Alice lives in Berlin"
    ]
    # the history is one call, oldest first, from either end
    assert [d.id for d in store.history(old_id)] == [old_id, new.id]
    assert [d.id for d in store.history(new.id, entity="alice")] == [old_id, new.id]


def test_as_of_answers_with_what_was_held_true_then(embedded_store):
    store = embedded_store
    old_id = _paris(store)
    new_id = store.supersede(old_id, "Alice lives in Berlin", kind="contradict", at=MOVED, entity="alice").new.id
    assert store.get_one(new_id).metadata["change"] == "contradict"
    query = "where does Alice live"
    before = store.retrieve_memories(query, entity="alice", as_of=MOVED - timedelta(days=1), relevance=False)
    assert [h.id for h in before] == [old_id]
    assert _texts(store.retrieve_memories(query, entity="alice", as_of=MOVED.isoformat(), relevance=False)) == [
        "Alice lives in Berlin"
    ]
    assert (
        store.retrieve_memories(query, entity="alice", as_of=T0 - timedelta(days=1), relevance=False) == []
    )  # nothing yet
    assert _texts(store.retrieve_memories(query, entity="alice", as_of=MOVED.timestamp() + 60, relevance=False)) == [
        "Alice lives in Berlin"
    ]
    # another entity never sees alice's past either
    assert store.retrieve_memories(query, entity="bob", as_of=MOVED - timedelta(days=1), relevance=False) == []
    with pytest.raises(ValidationError, match="as_of"):
        store.retrieve_memories(query, entity="alice", as_of="last tuesday", relevance=False)


def test_a_chain_keeps_one_current_memory_and_every_text(embedded_store):
    store = embedded_store
    first = _paris(store)
    second = store.supersede(first, "Alice lives in Berlin", at=MOVED).new.id
    # moving back: the same words again are a new memory of the chain, not the first one brought back
    third = store.supersede(second, "Alice lives in Paris", at=MOVED + timedelta(days=30)).new.id
    assert third != first
    chain = store.history(second)
    assert [d.id for d in chain] == [first, second, third]
    assert [d.text for d in chain] == ["Alice lives in Paris", "Alice lives in Berlin", "Alice lives in Paris"]
    assert [d.metadata.get("status") for d in chain] == ["superseded", "superseded", None]
    assert [h.id for h in store.retrieve_memories("Alice lives", entity="alice", relevance=False)] == [third]
    # the middle of the chain answered for its own time
    middle = store.retrieve_memories("Alice lives", entity="alice", as_of=MOVED + timedelta(days=1), relevance=False)
    assert [h.id for h in middle] == [second]
    # a memory that never changed is a history of one
    lone = store.upsert_memory("Alice likes tea", entity="alice")
    assert [d.id for d in store.history(lone)] == [lone]


def test_refused_supersessions_write_nothing(embedded_store):
    store = embedded_store
    old_id = _paris(store)
    shared = store.upsert_memory("The office opens at nine")
    other = store.upsert_memory("Alice lives near the river", entity="alice")
    count = store.count()
    with pytest.raises(NotFound, match="visible to entity 'bob'"):
        store.supersede(old_id, "Alice lives in Rome", entity="bob")
    with pytest.raises(ValidationError, match="never crosses an entity"):
        store.supersede(shared, "The office opens at ten", entity="alice")
    with pytest.raises(ValidationError, match="kind must be one of update, contradict"):
        store.supersede(old_id, "Alice lives in Rome", kind="replace")
    with pytest.raises(ValidationError, match="is the text of memory .* already"):
        store.supersede(old_id, "  alice lives in PARIS ")
    with pytest.raises(ValidationError, match=f"memory {other!r} already says this"):
        store.supersede(old_id, "Alice lives near the river")
    with pytest.raises(ValidationError, match="before memory .* started holding"):
        store.supersede(old_id, "Alice lives in Rome", at=T0 - timedelta(days=1))
    with pytest.raises(ValidationError, match="supersede sets status"):
        store.supersede(old_id, "Alice lives in Rome", metadata={"status": "active"})
    with pytest.raises(NotFound):
        store.supersede("doc-nope", "Alice lives in Rome")
    assert store.count() == count
    assert "status" not in store.get_one(old_id).metadata
    new_id = store.supersede(old_id, "Alice lives in Rome", at=MOVED).new.id
    with pytest.raises(ValidationError, match=f"its successor is {new_id!r}"):
        store.supersede(old_id, "Alice lives in Oslo")
    store.update_memory(other, metadata={"status": "retracted"})
    with pytest.raises(ValidationError, match="is retracted"):
        store.supersede(other, "Alice lives by the sea")


def test_an_edit_never_relinks_a_chain_or_revives_a_superseded_memory(embedded_store):
    store = embedded_store
    old_id = _paris(store)
    new_id = store.supersede(old_id, "Alice lives in Berlin", at=MOVED).new.id
    with pytest.raises(ValidationError, match="superseded by .* which is current"):
        store.update_memory(old_id, metadata={"status": "active"})
    with pytest.raises(ValidationError, match="'superseded_by' links a supersession chain"):
        store.update_memory(new_id, metadata={"superseded_by": old_id})
    # a typo in the old text can still be fixed; the chain stays
    store.update_memory(old_id, "Alice lived in Paris")
    assert [d.text for d in store.history(new_id)] == ["Alice lived in Paris", "Alice lives in Berlin"]
    assert store.get_one(old_id).metadata["status"] == "superseded"


def test_expired_memories_stop_ranking_at_their_expiry(embedded_store, settings):
    store = embedded_store
    now = utc_now()
    exam = store.upsert_memory("Alice's exam is tomorrow", entity="alice", expires_at=now + timedelta(days=1))
    gone = store.upsert_memory(
        "Alice's dentist appointment is today",
        entity="alice",
        expires_at=(now - timedelta(hours=1)).isoformat(),
        valid_from=now - timedelta(days=1),
    )
    assert store.get_one(exam).metadata["expires_at"] == (now + timedelta(days=1)).isoformat()
    query = "what does Alice have coming up"
    assert {h.id for h in store.retrieve_memories(query, entity="alice", relevance=False)} == {exam}
    assert {
        h.id for h in store.retrieve_memories(query, entity="alice", now=now - timedelta(hours=2), relevance=False)
    } == {exam, gone}
    assert store.retrieve_memories(query, entity="alice", now=now + timedelta(days=2), relevance=False) == []
    # what held an hour before the dentist's expiry includes it; nothing held before either began
    assert store.retrieve_memories(query, entity="alice", as_of=now - timedelta(days=2), relevance=False) == []
    assert gone in {
        h.id for h in store.retrieve_memories(query, entity="alice", as_of=now - timedelta(hours=2), relevance=False)
    }
    # the context a chat backend gets skips it too, while the memory itself is kept
    chat = ChatMemory(store, settings, start_worker=False)
    try:
        context = chat.build_context(None, "Is Alice's dentist appointment today?", entity="alice")
        assert gone not in {m.id for m in context.memory}
    finally:
        chat.close()
    assert store.get_one(gone).text == "Alice's dentist appointment is today"
    with pytest.raises(ValidationError, match="expires_at"):
        store.upsert_memory("Alice's bus leaves soon", entity="alice", expires_at="soon")


# ---- the index: exact against brute force with validity windows and expiry ---------------------------

NOW = 1_800_000_000.0


def _index(n: int, d: int, rng) -> tuple[MemoryIndex, np.ndarray, list[dict]]:
    vectors = rng.standard_normal((n, d)).astype(np.float32)
    metas = []
    for i in range(n):
        meta = {
            "importance": int(rng.integers(1, 6)),
            "ts_epoch": NOW - float(rng.random() * 3e7),
            "scope": "global" if i % 3 else "entity:e1",
        }
        start = NOW - float(rng.random() * 4e7)
        if i % 5 == 0:
            meta["valid_from"] = datetime.fromtimestamp(start, UTC).isoformat()
        if i % 7 == 0:
            meta["status"] = "superseded"
            meta["valid_until"] = datetime.fromtimestamp(start + float(rng.random() * 2e7), UTC).isoformat()
        if i % 11 == 0:
            meta["expires_at"] = datetime.fromtimestamp(NOW + float(rng.normal() * 2e7), UTC).isoformat()
        if i % 13 == 0:
            meta["status"] = "retracted"
        metas.append(meta)
    index = MemoryIndex(d)
    index.upsert([f"doc-{i:06d}" for i in range(n)], vectors, ["text"] * n, metas)
    return index, vectors, metas


def _epoch(meta, key, default):
    return datetime.fromisoformat(meta[key]).timestamp() if key in meta else default


def _held(meta, now, at):
    """The oracle's rule, from the metadata alone."""
    status = meta.get("status")
    if at is None:
        return status is None and _epoch(meta, "expires_at", np.inf) > now
    if status not in (None, "superseded"):
        return False
    return _epoch(meta, "valid_from", meta["ts_epoch"]) <= at < _epoch(meta, "valid_until", np.inf) and at < _epoch(
        meta, "expires_at", np.inf
    )


@pytest.mark.parametrize("n", [12000, 900], ids=["int8-path", "exact-path"])
def test_the_index_stays_exact_with_validity_windows_and_expiry(n):
    rng = np.random.default_rng(11)
    d = 48
    index, vectors, metas = _index(n, d, rng)
    weights = ScoreWeights()
    ids = [f"doc-{i:06d}" for i in range(n)]
    for trial in range(12):
        q = vectors[rng.integers(n)] + rng.standard_normal(d).astype(np.float32)
        k = int(rng.integers(1, 20))
        at = None if trial % 2 == 0 else NOW - float(rng.random() * 3e7)
        now = NOW if at is None else at
        keep = [j for j in range(n) if metas[j]["scope"] in ("global", "entity:e1") and _held(metas[j], now, at)]
        unit = vectors[keep] / np.linalg.norm(vectors[keep], axis=1, keepdims=True)
        totals = ranking.total_scores(
            unit @ (q / np.linalg.norm(q)),
            [metas[j]["importance"] for j in keep],
            [metas[j]["ts_epoch"] for j in keep],
            now,
            weights,
        )
        order = ranking.top_k_by_score(totals, [ids[j] for j in keep], k)
        got = index.search(MemoryQuery(q, k, weights, now, scopes={"global", "entity:e1"}, at=at))
        assert [h.id for h in got] == [ids[keep[j]] for j in order]
        assert [h.score for h in got] == pytest.approx([float(totals[j]) for j in order], abs=1e-6)


def test_a_snapshot_of_the_index_keeps_open_ended_windows():
    rng = np.random.default_rng(5)
    index, vectors, _ = _index(300, 16, rng)
    arrays, rows = index.export()
    assert np.isinf(arrays["until"]).any() and np.isinf(arrays["expires"]).any()
    restored = MemoryIndex.restore(16, arrays, rows)
    q = vectors[0]
    for at in (None, NOW - 1e7):
        want = index.search(MemoryQuery(q, 10, ScoreWeights(), NOW, scopes={"global"}, at=at))
        got = restored.search(MemoryQuery(q, 10, ScoreWeights(), NOW, scopes={"global"}, at=at))
        assert [h.id for h in got] == [h.id for h in want]
    arrays["until"][0] = np.nan
    with pytest.raises(ValueError, match="until holds NaN"):
        MemoryIndex.restore(16, arrays, rows)


# ---- the chain rule as a property --------------------------------------------------------------------

_RUN = iter(range(10**6))
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "update", "contradict", "cross", "forget"]),
        st.sampled_from(["alice", "bob", None]),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=14,
)


@hypothesis_settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=_OPS)
def test_any_sequence_keeps_one_current_memory_per_chain_in_one_entity(embedded_store, ops):
    """add / update / contradict / a supersession across entities / forget, in any order: every chain has
    exactly one current memory, all of its memories in one scope, and no text is lost until its entity is
    forgotten."""
    store = embedded_store
    run = next(_RUN)
    names = {"alice": f"alice{run}", "bob": f"bob{run}", None: None}
    chains: dict[str, list[tuple[str, str]]] = {}  # first id -> [(id, text)], oldest first
    owner: dict[str, str | None] = {}  # first id -> entity
    for n, (op, who, pick) in enumerate(ops):
        entity = names[who]
        mine = [c for c in chains if owner[c] == entity]
        if op == "add" or (op in ("update", "contradict") and not mine):
            text = f"fact {run}.{n} of {entity or 'everyone'}"
            doc_id = store.upsert_memory(text, entity=entity)
            chains[doc_id], owner[doc_id] = [(doc_id, text)], entity
        elif op in ("update", "contradict"):
            first = mine[pick % len(mine)]
            text = f"fact {run}.{n} changed ({op})"
            done = store.supersede(chains[first][-1][0], text, kind=op, entity=entity)
            assert done.new.metadata["scope"] == done.old.metadata["scope"]
            chains[first].append((done.new.id, text))
        elif op == "cross":
            others = [c for c in chains if owner[c] != entity and entity is not None]
            if others:
                target = chains[others[pick % len(others)]][-1][0]
                before = store.count()
                with pytest.raises((NotFound, ValidationError)):
                    store.supersede(target, f"fact {run}.{n} from elsewhere", entity=entity)
                assert store.count() == before
        elif op == "forget" and entity is not None and mine:
            forget_entity(store, entity)
            for first in [c for c in chains if owner[c] == entity]:
                del chains[first], owner[first]
    for first, links in chains.items():
        history = store.history(links[-1][0])
        assert [(d.id, d.text) for d in history] == links  # every text kept, in order
        assert sum("status" not in d.metadata for d in history) == 1
        assert "status" not in history[-1].metadata
        scope = "global" if owner[first] is None else f"entity:{owner[first]}"
        assert {d.metadata["scope"] for d in history} == {scope}
    for entity in ("alice", "bob"):
        left = store.get(type="memory", where={"scope": f"entity:{names[entity]}"})
        assert {d.id for d in left} == {i for c, links in chains.items() if owner[c] == names[entity] for i, _ in links}


# ---- killed in the middle ----------------------------------------------------------------------------

# One supersession whose two documents take two Chroma calls (max batch 1); WRITER_PAUSE sleeps after each
# call, so that the kill lands between the two writes or after both (before the mirror commits).
SUPERSEDER = textwrap.dedent("""
    import sys, time
    from brain.config import Settings
    from brain.app.core import open_store

    store = open_store(Settings(data_dir=sys.argv[1]))
    old_id = store.upsert_memory("Alice lives in Paris", entity="alice")
    real = store.col.upsert
    def paused(*args, **kwargs):
        result = real(*args, **kwargs)
        print("chroma call", flush=True)
        time.sleep(30)
        return result
    store.col.upsert = paused
    store.chroma.max_batch_size = 1
    print(old_id, flush=True)
    store.supersede(old_id, "Alice lives in Berlin", entity="alice")
    print("done", flush=True)
""")


@pytest.mark.subprocess
@pytest.mark.parametrize("calls", [1, 2], ids=["between-the-writes", "after-both-writes"])
def test_a_process_killed_mid_supersession_leaves_none_of_it(tmp_path, calls):
    script = tmp_path / "superseder.py"
    script.write_text(SUPERSEDER)
    data_dir = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    old_id = proc.stdout.readline().strip()
    assert old_id.startswith("doc-"), proc.stderr.read()[-2000:]
    for _ in range(calls):
        assert proc.stdout.readline().strip() == "chroma call", proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    assert "done" not in out
    with open_store(Settings(data_dir=data_dir)) as store:  # the open rolls the unfinished write back
        assert WriteIntentLog(data_dir).pending() == []
        memories = store.get(type="memory")
        assert [(d.id, d.text) for d in memories] == [(old_id, "Alice lives in Paris")]
        assert not {"status", "superseded_by", "valid_until"} & set(memories[0].metadata)
        assert [d.id for d in store.history(old_id)] == [old_id]
        assert verify_mirror(store, store.mirror).ok
        # and the supersession can simply be made again
        assert store.supersede(old_id, "Alice lives in Berlin", entity="alice").old.metadata["status"] == "superseded"


# ---- carried by the mirror, PAM and forget -----------------------------------------------------------

CHAIN_FIELDS = ("status", "valid_from", "valid_until", "superseded_by", "supersedes", "change", "expires_at")


def _chain(store):
    old_id = _paris(store)
    done = store.supersede(
        old_id,
        "Alice lives in Berlin",
        kind="contradict",
        at=MOVED,
        entity="alice",
        expires_at=MOVED + timedelta(days=3650),
    )
    return old_id, done.new.id


def test_the_mirror_carries_the_history(embedded_store):
    store = embedded_store
    old_id, new_id = _chain(store)
    rows = {r.id: r for r in store.mirror.get([old_id, new_id])}
    for doc in store.get([old_id, new_id]):
        mirrored = rows[doc.id].metadata
        assert {k: mirrored.get(k) for k in CHAIN_FIELDS} == {k: doc.metadata.get(k) for k in CHAIN_FIELDS}
    assert rows[old_id].metadata["superseded_by"] == new_id and rows[new_id].metadata["supersedes"] == old_id
    assert verify_mirror(store, store.mirror).ok


def test_forget_removes_the_whole_chain_of_the_entity(embedded_store):
    store = embedded_store
    old_id, new_id = _chain(store)
    bobs = store.upsert_memory("Bob lives in Oslo", entity="bob")
    bobs_new = store.supersede(bobs, "Bob lives in Bergen", entity="bob").new.id
    report = forget_entity(store, "alice")
    assert report.deleted["memory"] == 2
    assert store.get([old_id, new_id]) == [] and store.mirror.get([old_id, new_id]) == []
    with pytest.raises(NotFound):
        store.history(old_id)
    assert (
        store.retrieve_memories(
            "where does Alice live", entity="alice", as_of=MOVED - timedelta(days=1), relevance=False
        )
        == []
    )
    assert [d.id for d in store.history(bobs)] == [bobs, bobs_new]


def test_pam_export_and_import_keep_the_history(embedded_store, tmp_path, local_embedder):
    import portable_ai_memory as pam

    from brain.features.pam import export_pam, import_pam

    store = embedded_store
    old_id, new_id = _chain(store)
    report = export_pam(store, tmp_path / "out")
    exported = {m["id"]: m for m in json.loads(report.memory_store.read_text(encoding="utf-8"))["memories"]}
    old, new = exported[old_id], exported[new_id]
    assert old["status"] == "superseded"
    assert old["temporal"]["valid_until"] == MOVED.isoformat().replace("+00:00", "Z")
    assert old["temporal"]["superseded_by"] == new_id
    assert new["status"] == "active" and new["temporal"]["valid_from"] == MOVED.isoformat().replace("+00:00", "Z")
    result = pam.validate(pam.load(report.memory_store))
    assert result.is_valid, str(result)
    with open_store(Settings(data_dir=tmp_path / "copy"), embedder=local_embedder) as copy:
        import_pam(copy, tmp_path / "out")
        for doc in store.get([old_id, new_id]):
            copied = copy.get_one(doc.id)
            assert {k: copied.metadata.get(k) for k in CHAIN_FIELDS} == {k: doc.metadata.get(k) for k in CHAIN_FIELDS}
        assert [d.id for d in copy.history(new_id)] == [old_id, new_id]
        assert [
            h.id
            for h in copy.retrieve_memories(
                "Alice lives", entity="alice", as_of=MOVED - timedelta(days=1), relevance=False
            )
        ] == [old_id]


def test_a_pam_history_with_forward_links_only_is_one_chain(embedded_store, tmp_path):
    """Another tool's export names the successor (temporal.superseded_by) but nothing points back."""
    from brain.features.pam import export_pam, import_pam

    store = embedded_store
    old_id, new_id = _chain(store)
    out = export_pam(store, tmp_path / "out").memory_store
    data = json.loads(out.read_text(encoding="utf-8"))
    for memory in data["memories"]:
        memory["metadata"].pop("brain", None)  # a foreign producer: no brain block, no back-link
    data.pop("integrity", None)
    out.write_text(json.dumps(data), encoding="utf-8")
    with open_store(Settings(data_dir=tmp_path / "copy"), embedder=store.embedder) as copy:
        import_pam(copy, tmp_path / "out")
        assert "supersedes" not in copy.get_one(new_id).metadata
        assert copy.get_one(old_id).metadata["valid_until"] == MOVED.isoformat()
        assert [d.id for d in copy.history(new_id)] == [old_id, new_id]
        assert [d.id for d in copy.history(old_id)] == [old_id, new_id]


def test_remembering_and_consolidating_never_fold_a_history(embedded_store):
    store = embedded_store
    first = _paris(store)
    second = store.supersede(first, "Alice lives in Berlin", at=MOVED).new.id
    third = store.supersede(second, "Alice lives in Paris", at=MOVED + timedelta(days=30)).new.id
    # the same words remembered again restate the current memory, never the superseded one
    assert store.upsert_memory("alice lives in  Paris", entity="alice", importance=5) == third
    assert store.get_one(third).metadata["importance"] == 5
    assert store.get_one(first).metadata["status"] == "superseded"
    near = store.upsert_memory("Alice lives in Paris.", entity="alice", importance=1)
    report = store_consolidate(store)
    # the near duplicate is absorbed by the current memory; the history keeps its three texts
    assert [(m.kept_id, m.merged_ids) for m in report.merges] == [(third, [near])]
    assert [d.id for d in store.history(first)] == [first, second, third]
    assert [d.text for d in store.history(third)] == [
        "Alice lives in Paris",
        "Alice lives in Berlin",
        "Alice lives in Paris",
    ]
