"""The indexes split by scope: a search reads only its scopes' parts and ranks them exactly as one index of
their rows would (brute force), never shows another entity's row, and stays exact while parts are read,
evicted and read again under writes, another process's writes (the change feed) and a kill -9 mid-load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from brain.app.core import open_store
from brain.config import Settings
from brain.rules import ranking
from brain.store.indexes import memory_index
from brain.store.memory_query import MemoryQuery
from brain.text import BM25Index, tokenize

DIM = 384
WORDS = ["tea", "coffee", "peanut", "allergy", "marathon", "berlin", "volvo", "service", "garden", "piano",
         "passport", "lisbon", "dentist", "invoice", "bicycle", "sister", "recipe", "holiday"]
NOW = 1_800_000_000.0


def unit(rng, n):
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill(store, rng, entities, per_entity, global_rows):
    """Memories with their own vectors: ``per_entity`` for each entity and ``global_rows`` global ones.
    Returns {id: (scope, text, vector, importance, ts_epoch)}."""
    docs, facts = [], []
    for scope, n in [("global", global_rows)] + [(f"entity:{e}", per_entity) for e in entities]:
        vectors = unit(rng, n)
        for j in range(n):
            text = " ".join(rng.choice(WORDS, size=4)) + f" {scope.split(':')[-1]} {j}"
            importance, ts = int(rng.integers(1, 6)), NOW - float(rng.integers(0, 400 * 86400))
            docs.append({"text": text, "type": "memory", "scope": scope, "importance": importance,
                         "timestamp": ts, "embedding": vectors[j]})
            facts.append((scope, text, vectors[j], importance, ts))
    ids = store.upsert_docs(docs)
    return dict(zip(ids, facts))


def brute_force(facts, scopes, q, text, k, weights):
    """Every row of ``scopes`` scored from scratch (BM25 over those rows only), the gate, ties by id."""
    keep = sorted(i for i, f in facts.items() if f[0] in scopes)
    if not keep:
        return []
    vectors = np.stack([facts[i][2] for i in keep]).astype(np.float64)
    sims = vectors @ (q / np.linalg.norm(q)).astype(np.float64)
    bm25 = BM25Index([tokenize(facts[i][1]) for i in keep])
    tokens = tokenize(text)
    top = bm25.max_score(tokens)
    lexical = bm25.scores(tokens) / top if top > 0 else np.zeros(len(keep))
    static = (ranking.importance_part(np.array([facts[i][3] for i in keep], dtype=float), weights)
              + ranking.recency_part(np.array([facts[i][4] for i in keep]), NOW, weights))
    order, _ = ranking.gated_top_k_reference(sims, weights.lexical * lexical, static, keep, k, weights,
                                             np.array([facts[i][3] for i in keep], dtype=float), None)
    return [keep[j] for j in order]


@pytest.fixture
def split_store(tmp_path, local_embedder):
    """An embedded store of 12 entities x 40 memories and 30 global ones, under a budget that holds only a
    few entity parts (so searches evict and read parts again)."""
    settings = Settings(data_dir=tmp_path / "data", index_snapshot=False, index_memory_mb=1.0)
    with open_store(settings, embedder=local_embedder) as store:
        rng = np.random.default_rng(39)
        entities = [f"user{i}" for i in range(12)]
        facts = fill(store, rng, entities, 40, 30)
        yield store, facts, entities, rng


def test_a_search_reads_only_its_parts_and_equals_brute_force_while_parts_come_and_go(split_store):
    store, facts, entities, rng = split_store
    weights = ranking.ScoreWeights(1.0, 0.1, 0.05, lexical=0.5, floor=0.0, margin=0.3)
    queries = 0
    for trial in range(60):
        entity = entities[int(rng.integers(len(entities)))]
        scopes = {"global", f"entity:{entity}"}
        anchor = next(f for f in facts.values() if f[0] == f"entity:{entity}")
        q = anchor[2] + 0.8 * unit(rng, 1)[0]
        text = " ".join(rng.choice(WORDS, size=3))
        got = memory_index(store).search(MemoryQuery(q, 5, weights, NOW, scopes=scopes, query_text=text))
        assert [h.id for h in got] == brute_force(facts, scopes, q, text, 5, weights), trial
        assert all(h.metadata["scope"] in scopes for h in got)
        queries += 1
    stats = store.stats()["index"]
    assert stats["evictions"] > 0 and stats["reloads"] > 0  # the budget made parts come and go
    assert stats["resident_entities"] < len(entities)
    assert stats["resident_mb"] <= stats["budget_mb"] + 0.2  # one part may exceed it only while served


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_result_ever_crosses_a_scope(split_store, data):
    """Whatever the entity, query, k, weights and the parts resident, every hit is the entity's or global."""
    store, facts, entities, _ = split_store
    entity = data.draw(st.sampled_from(entities + [None]))
    k = data.draw(st.integers(1, 60))
    seed = data.draw(st.integers(0, 2**32 - 1))
    q = unit(np.random.default_rng(seed), 1)[0]
    relevance = data.draw(st.booleans())
    hits = store.retrieve_memories(" ".join(WORDS[seed % 7:seed % 7 + 3]), k=k, entity=entity, query_vector=q,
                                   relevance=relevance, now=NOW)
    allowed = {"global"} if entity is None else {"global", f"entity:{entity}"}
    assert all(facts[h.id][0] in allowed for h in hits)
    if not relevance:  # without the gate every visible row is a candidate: exactly min(k, visible) come back
        assert len(hits) == min(k, sum(f[0] in allowed for f in facts.values()))


@pytest.mark.stress
def test_eviction_and_reload_under_concurrent_writes_stay_exact(split_store):
    """Writers add and delete memories of every entity while readers search them under a budget that keeps
    evicting; afterwards every entity's search (every row a candidate) returns exactly what Chroma holds."""
    store, facts, entities, _ = split_store
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        rng = np.random.default_rng(100 + n)
        try:
            for i in range(25):
                entity = entities[(n * 5 + i) % len(entities)]
                ids = store.upsert_docs([{"text": f"written {n}-{i} for {entity}", "type": "memory",
                                          "entity": entity, "embedding": unit(rng, 1)[0]}])
                if i % 3 == 0:
                    store.delete(ids)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    def reader(n: int) -> None:
        rng = np.random.default_rng(200 + n)
        try:
            while not stop.is_set():
                entity = entities[int(rng.integers(len(entities)))]
                for h in store.retrieve_memories("tea", k=50, entity=entity, query_vector=unit(rng, 1)[0],
                                                 relevance=False):
                    assert h.metadata["scope"] in ("global", f"entity:{entity}")
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    readers = [threading.Thread(target=reader, args=(n,)) for n in range(2)]
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors
    rng = np.random.default_rng(5)
    for entity in entities:
        truth = set(store.col.get(where={"$and": [{"type": "memory"},
                                                  {"scope": {"$in": ["global", f"entity:{entity}"]}}]})["ids"])
        got = {h.id for h in store.retrieve_memories("tea", k=1000, entity=entity,
                                                     query_vector=unit(rng, 1)[0], relevance=False)}
        assert got == truth, entity
    assert store.stats()["index"]["evictions"] > 0


def test_stats_and_health_show_what_is_resident(split_store):
    store, _, entities, rng = split_store
    assert store.stats()["index"] is None or store.stats()["index"]["resident_entities"] == 0
    for entity in entities[:3]:
        store.retrieve_memories("tea", k=3, entity=entity, query_vector=unit(rng, 1)[0])
    index = store.stats()["index"]
    assert index["global_rows"] == 30 and index["loads"] == 3 and index["resident_entities"] == 3
    assert index["resident_entity_rows"] == 120 and index["budget_mb"] == 1.0


def test_health_and_brain_stats_name_the_parts(embedded_store):
    from brain.app.core import Brain
    from brain.shells.cli.reports import index_line

    embedded_store.upsert_memory("Alice is allergic to peanuts", entity="alice", importance=5)
    with Brain(embedded_store, start_worker=False) as b:
        assert b.health(detail=True)["index"] == {"built": False} and "index" not in b.health()
        embedded_store.retrieve_memories("peanut", k=3, entity="alice")
        index = b.health(detail=True)["index"]
    assert index["resident_entities"] == 1 and index["loads"] == 1 and index["evictions"] == 0
    assert index_line(index).endswith("1 entity resident (1 row); 1 load (0 after an eviction), 0 evictions")
    assert index_line(None).startswith("not built")


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from brain.app.core import open_store
    from brain.config import Settings
    from brain.store import partitions

    slow_fill = partitions._fill
    def fill(part, page, scope):  # a load that takes long enough to be killed in the middle
        print("loading", flush=True)
        time.sleep(0.2)
        slow_fill(part, page, scope)
    partitions._fill = fill
    settings = Settings(data_dir=sys.argv[1], index_memory_mb=1.0)
    with open_store(settings) as store:
        rng = np.random.default_rng(1)
        while True:
            for n in range(12):
                store.retrieve_memories("tea", k=5, entity=f"user{n}", query_vector=rng.standard_normal(384))
""")


@pytest.mark.subprocess
def test_a_kill_during_a_load_loses_nothing(tmp_path, local_embedder):
    """kill -9 while a part is being read: the next open serves every entity exactly (a load only reads)."""
    settings = Settings(data_dir=tmp_path / "data")
    entities = [f"user{i}" for i in range(12)]
    with open_store(settings, embedder=local_embedder) as store:
        facts = fill(store, np.random.default_rng(3), entities, 40, 30)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(settings.data_dir)], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        seen = 0
        deadline = time.monotonic() + 120
        while seen < 4 and time.monotonic() < deadline:  # killed during its fourth load
            line = proc.stdout.readline()
            assert line, "the loader ended before it was killed"
            seen += line.startswith("loading")
        time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert seen == 4
    with open_store(settings, embedder=local_embedder) as store:
        rng = np.random.default_rng(9)
        for entity in entities:
            want = {i for i, f in facts.items() if f[0] in ("global", f"entity:{entity}")}
            got = {h.id for h in store.retrieve_memories("tea", k=1000, entity=entity,
                                                         query_vector=unit(rng, 1)[0], relevance=False)}
            assert got == want, entity


@pytest.mark.server
def test_the_feed_keeps_loaded_parts_exact_while_parts_come_and_go(chroma_server, tmp_path, local_embedder):
    """Two workers on one ``chroma run``: what one writes reaches the other's resident parts through the
    change feed, and a part evicted meanwhile is read again with it."""
    import uuid
    base = Settings(data_dir=tmp_path / "a", chroma_url=chroma_server, collection=f"parts-{uuid.uuid4().hex[:10]}",
                    feed_interval_seconds=0.0, index_memory_mb=1.0)
    other = base.model_copy(update={"data_dir": tmp_path / "b"})
    entities = [f"user{i}" for i in range(12)]
    with open_store(base, embedder=local_embedder) as a, open_store(other, embedder=local_embedder) as b:
        rng = np.random.default_rng(11)
        facts = fill(a, rng, entities, 40, 30)
        for round_ in range(3):
            for entity in entities:  # A reads every entity: parts loaded and evicted
                a.retrieve_memories("tea", k=3, entity=entity, query_vector=unit(rng, 1)[0])
            for n, entity in enumerate(entities):  # B writes to resident and evicted parts alike
                ids = b.upsert_docs([{"text": f"round {round_} note {n}", "type": "memory", "entity": entity,
                                      "embedding": unit(rng, 1)[0]}])
                facts[ids[0]] = (f"entity:{entity}", "", None, 3, NOW)
                if n % 4 == 0:
                    gone = next(i for i, f in facts.items() if f[0] == f"entity:{entity}")
                    b.delete([gone])
                    del facts[gone]
            for entity in entities:
                want = {i for i, f in facts.items() if f[0] in ("global", f"entity:{entity}")}
                got = {h.id for h in a.retrieve_memories("tea", k=1000, entity=entity,
                                                         query_vector=unit(rng, 1)[0], relevance=False)}
                assert got == want, (round_, entity)
        assert a.stats()["index"]["evictions"] > 0
