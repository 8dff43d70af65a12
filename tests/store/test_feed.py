"""The change feed and its follower: several stores on one real `chroma run` server.

Each store below is what one process would hold (its own writer token, indexes and follower); the
tests with real processes are in test_feed_processes.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import chromadb
import httpx
import pytest

from brain.app.core import open_store
from brain.app.forget import forget_entity
from brain.config import Settings
from brain.model.errors import StoreUnavailable, ValidationError
from brain.store.feed import ChangeFeed, FeedRecord, feed_name, record_id
from brain.store.follower import catch_up, last_sequence
from brain.store.indexes import memory_index
from brain.store.retrieval import record_memory_use
from tests.conftest import chroma_executable, start_chroma_server, stop

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server_settings(chroma_server, tmp_path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        chroma_url=chroma_server,
        collection=f"f-{uuid.uuid4().hex[:12]}",
        feed_interval_seconds=0.0,
    )


@pytest.fixture
def two(server_settings, local_embedder, tmp_path):
    """Two stores on one collection, as two processes would open them (each its own data dir)."""
    a = open_store(server_settings, embedder=local_embedder)
    b = open_store(server_settings.model_copy(update={"data_dir": tmp_path / "data-b"}), embedder=local_embedder)
    yield a, b
    a.close()
    b.close()


def restart_chroma_server(path: Path, port: int) -> subprocess.Popen:
    """`chroma run` again on the data and the port of a stopped one; waits until it answers."""
    with open(path / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [chroma_executable(), "run", "--path", str(path / "db"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, (path / "server.log").read_text()[-2000:]
        time.sleep(0.2)


def records(store) -> list[FeedRecord]:
    return store.follower.feed.after(0)


def client_of(url: str):
    host, port = url.rsplit("//", 1)[1].split(":")
    return chromadb.HttpClient(host=host, port=int(port), settings=chromadb.Settings(anonymized_telemetry=False))


# ---- what the sequence rests on ------------------------------------------------------------------


@pytest.mark.server
@pytest.mark.parametrize("backend", ["embedded", pytest.param("server", marks=pytest.mark.server)])
def test_chroma_add_of_an_existing_id_keeps_the_first_record(backend, chroma_server, tmp_path):
    """The compare-and-set of the feed: an add under an id that exists is ignored, without an error,
    alone or in a batch, and a read right after sees the first record."""
    if backend == "embedded":
        client = chromadb.PersistentClient(
            path=str(tmp_path / "c"), settings=chromadb.Settings(anonymized_telemetry=False)
        )
    else:
        client = client_of(chroma_server)
    col = client.get_or_create_collection(f"cas-{uuid.uuid4().hex[:8]}", embedding_function=None)
    col.add(ids=["7"], documents=["first"], metadatas=[{"writer": "a"}], embeddings=[[1.0]])
    col.add(ids=["7"], documents=["second"], metadatas=[{"writer": "b"}], embeddings=[[1.0]])
    col.add(
        ids=["7", "8"],
        documents=["third", "other"],
        metadatas=[{"writer": "c"}, {"writer": "c"}],
        embeddings=[[1.0], [1.0]],
    )
    got = col.get(ids=["7", "8"], include=["documents", "metadatas"])
    assert dict(zip(got["ids"], got["documents"])) == {"7": "first", "8": "other"}
    assert dict(zip(got["ids"], (m["writer"] for m in got["metadatas"]))) == {"7": "a", "8": "c"}


# ---- writing the feed ----------------------------------------------------------------------------


@pytest.mark.server
def test_every_write_gets_one_settled_record_with_its_ids(two):
    a, b = two
    result = a.write_docs(
        [{"text": "Alice likes tea", "type": "memory"}, {"text": "Bob likes coffee", "type": "memory"}]
    )
    assert result.sequence == 1 and last_sequence(a) == 1
    a.delete(result.ids[0])
    b.upsert_memory("Carol likes juice")
    record_memory_use(a, {result.ids[1]: 2_000_000_000.0})
    got = records(a)
    assert [(r.seq, r.op, r.state) for r in got] == [
        (1, "upsert", "done"),
        (2, "delete", "done"),
        (3, "upsert", "done"),
        (4, "metadata", "done"),
    ]
    assert got[0].ids == result.ids and got[1].ids == (result.ids[0],) and got[3].ids == (result.ids[1],)
    assert got[0].writer == got[1].writer != got[2].writer
    assert (last_sequence(a), last_sequence(b)) == (4, 3)


@pytest.mark.server
def test_a_write_that_chroma_refuses_leaves_an_aborted_record(two, monkeypatch):
    a, _ = two

    def refuse(*args, **kwargs):
        raise StoreUnavailable("server went away")

    monkeypatch.setattr(a.chroma, "upsert", refuse)
    with pytest.raises(StoreUnavailable):
        a.upsert_memory("never stored")
    assert [(r.seq, r.state) for r in records(a)] == [(1, "aborted")]
    assert last_sequence(a) == 0 and a.count() == 0


@pytest.mark.server
@pytest.mark.stress
@pytest.mark.subprocess
def test_racing_writers_never_share_a_sequence(server_settings):
    """Four processes claim 40 numbers each at once: 160 distinct, contiguous numbers, increasing in
    each process, and every claim's record carries its own writer and ids."""
    script = (
        "import json, sys, uuid\n"
        "from brain.store.feed import ChangeFeed\n"
        "from tests.store.test_feed import client_of\n"
        "feed = ChangeFeed(client_of(sys.argv[1]), sys.argv[2], 'test', keep=100000)\n"
        "w = uuid.uuid4().hex\n"
        "print(json.dumps([w, [feed.claim('upsert', [f'{w}-{i}'], w) for i in range(40)]]))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, server_settings.chroma_url, server_settings.collection],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    claimed = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        writer, seqs = json.loads(out)
        assert seqs == sorted(seqs) and len(set(seqs)) == 40
        claimed.update({s: writer for s in seqs})
    assert sorted(claimed) == list(range(1, 161))
    feed = ChangeFeed(client_of(server_settings.chroma_url), server_settings.collection, "test", keep=100000)
    stored = feed.after(0)
    assert [r.seq for r in stored] == list(range(1, 161))
    for r in stored:
        assert r.writer == claimed[r.seq] and r.ids[0].startswith(r.writer)


@pytest.mark.server
def test_the_first_number_is_kept_when_a_racing_writer_is_already_above_it(server_settings):
    """Record 0 never exists: a writer that wins 1 while the loser has already added 2 keeps 1 (the
    feed was never compacted), rather than taking it for a number compaction freed."""
    client = client_of(server_settings.chroma_url)
    feed = ChangeFeed(client, server_settings.collection, "test", keep=3)
    feed.col.add(
        ids=[record_id(2)],
        documents=['["b-1"]'],
        embeddings=[[1.0]],
        metadatas=[{"seq": 2, "op": "upsert", "state": "pending", "writer": "w2", "at": 0.0}],
    )
    assert feed.claim("upsert", ["a-1"], "w1") == 1
    assert {r.seq: (r.state, r.writer) for r in feed.after(0)} == {1: ("pending", "w1"), 2: ("pending", "w2")}


@pytest.mark.server
def test_a_number_freed_by_compaction_is_voided_not_reused(server_settings):
    client = client_of(server_settings.chroma_url)
    feed = ChangeFeed(client, server_settings.collection, "test", keep=3)
    for n in range(1, 11):
        assert feed.claim("upsert", [f"id-{n}"], "w1") == n
    assert feed.compact(10) == 7
    assert [r.seq for r in feed.after(0)] == [8, 9, 10]
    stale = ChangeFeed(client, server_settings.collection, "test", keep=3)  # has seen nothing: tries 1
    assert stale.claim("delete", ["id-x"], "w2") == 11
    assert {r.seq: r.state for r in stale.after(0)}[1] == "void"
    assert stale.after(0)[-1].ids == ("id-x",)


# ---- following it --------------------------------------------------------------------------------


def hit_ids(store, query, **kwargs):
    return [h.id for h in store.retrieve_memories(query, k=10, **kwargs, relevance=False)]


@pytest.mark.server
def test_a_follower_applies_new_memories_deletes_edits_and_importance(two):
    a, b = two
    keep = a.upsert_memory("The office is in Lyon", importance=2)
    gone = a.upsert_memory("The door code is 4412", importance=3)
    assert set(hit_ids(b, "office door")) == {keep, gone}  # b built its index after these writes
    a.delete(gone)
    a.update_memory(keep, "The office is in Grenoble")
    new = a.upsert_memory("Lunch is at noon")
    catch_up(b)
    hits = {h.id: h for h in b.retrieve_memories("office door lunch", k=10, relevance=False)}
    assert set(hits) == {keep, new}
    assert hits[keep].text == "The office is in Grenoble"
    a.update_memory(keep, importance=5)
    catch_up(b)
    assert {h.id: h.metadata["importance"] for h in b.retrieve_memories("office", k=10, relevance=False)}[keep] == 5
    assert b.follower.applied == last_sequence(a)


@pytest.mark.server
def test_a_write_whose_fetch_failed_is_applied_by_the_next_poll(two, monkeypatch):
    a, b = two
    memory_index(b)
    gone = a.upsert_memory("The door code is 4412")
    catch_up(b)
    a.delete(gone)
    new = a.upsert_memory("The door code is now 9051")
    reads = b.follower.chroma.get_ids

    def unreachable(*args, **kwargs):
        raise StoreUnavailable("the Chroma server is gone for a moment")

    monkeypatch.setattr(b.follower.chroma, "get_ids", unreachable)
    with pytest.raises(StoreUnavailable):
        b.follower.poll(force=True)
    monkeypatch.setattr(b.follower.chroma, "get_ids", reads)
    b.follower.poll(force=True)
    assert hit_ids(b, "door code") == [new]
    assert b.follower.applied == last_sequence(a)


@pytest.mark.server
def test_entity_scoping_holds_for_followed_writes(two):
    a, b = two
    memory_index(b)
    mine = a.upsert_memory("Bob's sister is called Ann", entity="bob")
    catch_up(b)
    assert hit_ids(b, "sister", entity="bob") == [mine]
    assert hit_ids(b, "sister", entity="carol") == [] and hit_ids(b, "sister") == []


@pytest.mark.server
def test_a_followed_turn_reaches_a_cached_conversation(two):
    a, b = two
    a.upsert_turn("conv-f", "hello", "hi there")
    assert [t.text for t in b.recent_turns("conv-f")] == ["hello", "hi there"]  # cached in b now
    first = a.upsert_turn("conv-f", "how are you?", "fine")[0]
    a.delete(first)
    catch_up(b)
    assert [(t.text, t.metadata["turn_index"]) for t in b.recent_turns("conv-f")] == [
        ("hello", 1),
        ("hi there", 2),
        ("fine", 4),
    ]


@pytest.mark.server
def test_min_sequence_reads_what_another_process_wrote(two):
    a, b = two
    b.settings = b.settings.model_copy(update={"feed_interval_seconds": 3600.0})
    b.follower.interval = 3600.0  # b would not look again for an hour
    memory_index(b)
    doc = a.upsert_memory("The new password rule is 12 characters")
    assert hit_ids(b, "password rule") == []
    assert hit_ids(b, "password rule", min_sequence=last_sequence(a)) == [doc]
    with pytest.raises(StoreUnavailable, match="sequence 99 was never written"):
        catch_up(b, 99, timeout=0.2)
    with pytest.raises(ValidationError, match="min_sequence"):
        b.retrieve_memories("x", min_sequence=-1, relevance=False)


@pytest.mark.server
def test_a_pending_record_of_a_dead_writer_is_applied_and_then_passed(two, local_embedder):
    """What a writer killed between its Chroma write and its confirmation leaves: a pending record
    and the write in Chroma. The follower applies the ids at once, waits for the record to settle,
    and after its grace period takes it as done."""
    a, b = two
    memory_index(b)
    seq = a.follower.feed.claim("upsert", ["doc-dead"], "a-dead-writer")
    vec = local_embedder.embed_documents(["A fact from a dead writer"])[0]
    a.col.upsert(
        ids=["doc-dead"],
        embeddings=[vec],
        documents=["A fact from a dead writer"],
        metadatas=[
            {
                "type": "memory",
                "importance": 3,
                "scope": "global",
                "ts_epoch": 1.0,
                "timestamp": "1970-01-01T00:00:01+00:00",
                "source": "system",
            }
        ],
    )
    later = a.upsert_memory("A later fact")
    catch_up(b)
    assert set(hit_ids(b, "fact")) == {"doc-dead", later}
    assert b.follower.applied == seq - 1  # the open record holds the position
    b.follower.grace = 0.0
    catch_up(b)
    assert b.follower.applied == last_sequence(a)


@pytest.mark.server
def test_a_follower_behind_the_compaction_rebuilds(two):
    a, b = two
    memory_index(b)
    doc = a.upsert_memory("written while b looked away")
    a.upsert_memory("and another one")
    a.follower.feed.keep = 0
    a.follower.feed.compact(last_sequence(a))  # every record gone: b's next record is not there
    a.upsert_memory("a third")
    catch_up(b)
    assert doc in hit_ids(b, "written while b looked away") and len(memory_index(b)) == 3
    assert b.follower.applied == last_sequence(a)


def test_the_embedded_store_has_no_feed(embedded_store):
    assert last_sequence(embedded_store) is None and embedded_store.follower is None
    result = embedded_store.write_docs([{"text": "x y z", "type": "memory"}])
    assert result.sequence == 1
    catch_up(embedded_store, 10**6)  # one process owns it: nothing to wait for
    assert feed_name(embedded_store.settings.collection) not in {
        c.name for c in embedded_store.client.list_collections()
    }


def test_record_ids_sort_as_their_numbers():
    assert sorted(record_id(n) for n in (10, 9, 100)) == [record_id(9), record_id(10), record_id(100)]


@pytest.mark.server
def test_positions_are_claimed_across_stores_and_released_when_forgotten(two):
    a, b = two
    a.write_turns("conv-p", "u1", "a1")
    assert [t.metadata["turn_index"] for t in b.recent_turns("conv-p")] == [1, 2]
    b.follower.interval = 3600.0  # b looked just now: it will not look again before its write
    a.write_turns("conv-p", "u2", "a2")  # b's turn cache holds two turns; a adds two more
    result = b.write_turns("conv-p", "u3", "a3")
    assert sorted(result.positions.values()) == [5, 6]  # claimed after a's block, not from b's stale cache
    assert b.count("turn") == 6
    a.write_turns("conv-bob", "hi", "hello", scope="entity:bob")
    forget_entity(a, "bob")
    assert sorted(a.write_turns("conv-bob", "again", "hello again", scope="entity:bob").positions.values()) == [1, 2]


@pytest.mark.server
def test_the_background_thread_applies_writes_without_a_read(two):
    a, b = two
    memory_index(b)
    b.follower.interval = 0.05
    catch_up(b)  # the first poll starts the thread
    doc = a.upsert_memory("Applied in the background")
    deadline = time.monotonic() + 60
    while b.follower.applied < last_sequence(a):
        assert time.monotonic() < deadline, "the background thread did not apply the write"
        time.sleep(0.05)
    assert doc in memory_index(b)


@pytest.mark.server
@pytest.mark.subprocess
def test_a_chroma_restart_is_reported_then_caught_up(tmp_path, local_embedder):
    """The server goes down: reads that need the feed raise StoreUnavailable (503 in the API), the
    background thread backs off; once it is up again on the same address, the follower catches up."""
    (tmp_path / "srv").mkdir()
    proc, url = start_chroma_server(tmp_path / "srv")
    port = int(url.rsplit(":", 1)[1])
    settings = Settings(data_dir=tmp_path / "a", chroma_url=url, collection="restart", feed_interval_seconds=0.0)
    a = open_store(settings, embedder=local_embedder)
    b = open_store(settings.model_copy(update={"data_dir": tmp_path / "b"}), embedder=local_embedder)
    try:
        kept = a.upsert_memory("Written before the restart")
        assert hit_ids(b, "restart") == [kept]
        stop(proc)
        with pytest.raises(StoreUnavailable):
            b.retrieve_memories("restart", relevance=False)
        with pytest.raises(StoreUnavailable):
            a.upsert_memory("Not written while the server is down")
        proc = restart_chroma_server(tmp_path / "srv", port)
        later = a.upsert_memory("Written after the restart")
        assert set(hit_ids(b, "restart")) == {kept, later}
        assert b.follower.applied == last_sequence(a) and [r.state for r in records(a)] == [
            "done",
            "done",
        ]  # the failed write claimed nothing
    finally:
        a.close()
        b.close()
        stop(proc)


@pytest.mark.server
@pytest.mark.stress
def test_racing_stores_end_with_what_chroma_holds(server_settings, local_embedder, tmp_path):
    """Three stores write, edit and delete the same few memories at once from three threads; once each
    has caught up with every write, each one's index holds exactly what Chroma holds (the oracle)."""
    import random
    import threading

    from brain.model.errors import NotFound, StoreError

    stores = [
        open_store(server_settings.model_copy(update={"data_dir": tmp_path / f"s{n}"}), embedder=local_embedder)
        for n in range(3)
    ]
    texts = [f"Shared fact number {n}" for n in range(6)]
    vectors = dict(zip(texts, local_embedder.embed_documents(texts)))
    for s in stores:
        memory_index(s)
    failures: list[BaseException] = []
    failed: list[BaseException] = []  # writes Chroma failed; they must leave nothing behind either

    def work(store, seed):
        rnd = random.Random(seed)
        try:
            for _ in range(25):
                text = rnd.choice(texts)
                op = rnd.random()
                if op < 0.5:
                    store.upsert_memory(text, importance=rnd.randint(1, 5), embedding=vectors[text])
                else:
                    target = [h.id for h in store.retrieve_memories(text, k=1, all_scopes=True, relevance=False)]
                    try:
                        if target and op < 0.8:
                            store.update_memory(target[0], importance=rnd.randint(1, 5))
                        elif target:
                            store.delete(target[0])
                    except NotFound:  # another store deleted it meanwhile
                        pass
                    except StoreError as exc:  # Chroma fails a read of ids being deleted: the write failed whole
                        assert "Error finding id" in str(exc)
                        failed.append(exc)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    last = max(last_sequence(s) for s in stores)
    truth = {d.id: (d.text, d.metadata["importance"]) for d in stores[0].get(type="memory")}
    for s in stores:
        catch_up(s, last)
        served = {
            h.id: (h.text, h.metadata["importance"])
            for h in s.retrieve_memories("shared fact", k=50, all_scopes=True, relevance=False)
        }
        assert served == truth
    for s in stores:
        s.close()
