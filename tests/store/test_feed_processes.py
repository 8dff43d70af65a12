"""Several real processes on one real `chroma run` server: what one writes, the others serve, within
their feed interval (each worker runs tests/store/feed_worker.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.store.test_feed import client_of

pytestmark = [pytest.mark.server, pytest.mark.stress, pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = 0.5
#: how long a test waits for a write to show in another process: far above the interval, so that a
#: loaded machine does not fail it; the follower's mechanism is what is tested, not its speed
PATIENCE = 60.0


class Worker:
    def __init__(self, url: str, collection: str, data_dir: Path, *, grace: float | None = None):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        extra = [] if grace is None else [str(grace)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store.feed_worker", url, collection, str(data_dir), str(INTERVAL), *extra],
            cwd=data_dir.parent,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def ready(self) -> None:
        assert json.loads(self.proc.stdout.readline()) == {"ok": "ready"}

    def __call__(self, call: str, **args):
        self.proc.stdin.write(json.dumps({"call": call, "args": args}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert "ok" in answer, answer
        return answer["ok"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def workers(chroma_server, tmp_path):
    collection = f"p-{uuid.uuid4().hex[:12]}"
    started = [Worker(chroma_server, collection, tmp_path / f"w{n}") for n in range(3)]
    try:
        for w in started:
            w.ready()
        yield started
    finally:
        for w in started:
            w.close()


def eventually(check, what: str):
    deadline = time.monotonic() + PATIENCE
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {PATIENCE:g} s: {what}")
        time.sleep(INTERVAL / 5)


def found(worker, query: str, **args) -> dict[str, dict]:
    return {h["id"]: h for h in worker("retrieve", query=query, k=10, **args)}


def test_writes_of_one_process_reach_the_others(workers):
    writer, *readers = workers
    office = writer("upsert_memory", text="The office is in Lyon", importance=2)
    code = writer("upsert_memory", text="The door code is 4412")
    for r in readers:  # each builds its index and caches now, then follows the feed
        eventually(lambda r=r: set(found(r, "office door code")) == {office, code}, "the first two memories")

    writer("delete", ids=[code])
    writer("update_memory", doc_id=office, text="The office is in Grenoble", importance=5)
    lunch = writer("upsert_memory", text="Lunch is at noon in the canteen")
    for r in readers:

        def current(r=r):
            hits = found(r, "office door code lunch")
            return (
                set(hits) == {office, lunch}
                and hits[office]["text"] == "The office is in Grenoble"
                and hits[office]["importance"] == 5
            )

        eventually(current, "the delete, the edit, the importance change and the new memory")

    # deleted stays deleted: the readers ask again and again, a write in between
    readers[0]("upsert_memory", text="An unrelated fact about parking")
    for _ in range(10):
        for r in readers:
            assert code not in found(r, "door code 4412")
        time.sleep(INTERVAL / 2)


def test_entity_scoping_holds_across_processes(workers):
    writer, *readers = workers
    for r in readers:
        assert found(r, "sister", entity="bob") == {}
    ann = writer("upsert_memory", text="Bob's sister is called Ann", entity="bob")
    for r in readers:
        eventually(lambda r=r: set(found(r, "sister", entity="bob")) == {ann}, "bob's memory for bob")
        assert found(r, "sister", entity="carol") == {} and found(r, "sister") == {}


def test_a_read_asks_for_the_sequence_a_write_returned(workers):
    writer, reader, _ = workers
    reader("retrieve", query="anything", k=1)
    doc = writer("upsert_memory", text="The new password rule is 12 characters")
    seq = writer("last_sequence")
    assert doc in found(reader, "password rule", min_sequence=seq)


def test_a_writer_killed_in_the_middle_of_a_batch(chroma_server, tmp_path):
    """kill -9 after the first of four chunks reached Chroma: the other process serves exactly what
    Chroma holds (once the dead writer's record is past its grace), keeps serving, and follows the
    roll-back when the dead writer's data directory is opened again."""
    collection = f"k-{uuid.uuid4().hex[:12]}"
    writer = Worker(chroma_server, collection, tmp_path / "w0", grace=0.5)
    reader = Worker(chroma_server, collection, tmp_path / "w1", grace=0.5)
    try:
        writer.ready()
        reader.ready()
        kept = writer("upsert_memory", text="A fact written before the crash")
        assert set(found(reader, "fact")) == {kept}
        texts = [f"Batch fact number {n}" for n in range(20)]
        writer.proc.stdin.write(
            json.dumps({"call": "write_batch_and_hang", "args": {"texts": texts, "chunk": 5}}) + "\n"
        )
        writer.proc.stdin.flush()
        assert json.loads(writer.proc.stdout.readline()) == {"ok": "half"}
        writer.proc.kill()  # SIGKILL: no clean-up of any kind
        writer.proc.wait(timeout=30)

        col = client_of(chroma_server).get_collection(collection)
        in_chroma = set(col.get(where={"type": "memory"})["ids"])
        assert len(in_chroma) == 6  # the memory before, and the first chunk of five
        feed = client_of(chroma_server).get_collection(collection + "__feed")
        assert sorted(m["state"] for m in feed.get(include=["metadatas"])["metadatas"]) == ["done", "pending"]

        def served(worker):
            return {h["id"] for h in worker("retrieve", query="batch fact crash", k=50)}
        eventually(lambda: served(reader) == in_chroma, "the first chunk, as Chroma holds it")
        time.sleep(1.0)  # past the grace: the record is taken as settled, and the reader keeps serving
        assert served(reader) == in_chroma

        again = Worker(chroma_server, collection, tmp_path / "w0", grace=0.5)  # the dead writer's data dir
        try:
            again.ready()  # its open rolled the half-written batch back
            assert set(col.get(where={"type": "memory"})["ids"]) == {kept}
            eventually(lambda: served(reader) == {kept}, "the roll-back")
            assert served(again) == {kept}
        finally:
            again.close()
    finally:
        writer.close()
        reader.close()


def test_four_processes_append_to_one_conversation(chroma_server, tmp_path):
    """4 processes x 50 exchanges at once on one conversation: turn indexes 1..400, each once, each
    exchange's two turns consecutive, Chroma holds exactly those, and every window of 10 turns has
    its summary (summary_index 1..40)."""
    collection = f"t-{uuid.uuid4().hex[:12]}"
    workers = [Worker(chroma_server, collection, tmp_path / f"w{n}") for n in range(4)]
    try:
        for w in workers:
            w.ready()
        for n, w in enumerate(workers):  # every request sent first: the four write at the same time
            for e in range(50):
                w.proc.stdin.write(
                    json.dumps(
                        {
                            "call": "record_exchange",
                            "args": {
                                "conversation_id": "conv-shared",
                                "user_text": f"user {n}.{e}",
                                "assistant_text": f"reply {n}.{e}",
                            },
                        }
                    )
                    + "\n"
                )
            w.proc.stdin.flush()
        pairs = []
        for w in workers:
            for _ in range(50):
                answer = json.loads(w.proc.stdout.readline())
                assert "ok" in answer, answer
                pairs.append((answer["ok"]["user_turn_index"], answer["ok"]["assistant_turn_index"]))
        for w in workers:
            assert w("wait_for_summaries") is True
    finally:
        for w in workers:
            w.close()
    assert all(second == first + 1 for first, second in pairs)
    assert sorted(i for pair in pairs for i in pair) == list(range(1, 401))
    col = client_of(chroma_server).get_collection(collection)
    turns = col.get(where={"$and": [{"conversation_id": "conv-shared"}, {"type": "turn"}]}, include=["metadatas"])
    assert sorted(m["turn_index"] for m in turns["metadatas"]) == list(range(1, 401))
    summaries = col.get(
        where={"$and": [{"conversation_id": "conv-shared"}, {"type": "summary"}]}, include=["metadatas"]
    )["metadatas"]
    assert sorted((m["summary_index"], m["turn_range"]) for m in summaries) == [
        (k, f"{10 * k - 9}-{10 * k}") for k in range(1, 41)
    ]
