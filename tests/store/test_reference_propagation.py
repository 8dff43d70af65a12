"""A store opened the reference's way (``RagStore()``, configured by the environment) on a real `chroma run`:
what one end writes reaches the other's reads, every way of opening a store is wired the same (change feed
and mirror), and a writer killed mid-batch leaves a mirror that agrees with Chroma once it is opened again.

How fast a write travels is measured by bench/bench_propagation.py; here the deadline is generous."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import brain
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.features.mirror import EngramMirror, verify_mirror
from brain.shells.cli.reports import verify_text
from brain.store.feed import FeedWriter
from brain.store.follower import FeedFollower, last_sequence
from tests.store.test_feed import client_of

pytestmark = pytest.mark.server  # every test here opens stores on a real `chroma run`

ROOT = Path(__file__).resolve().parents[2]
#: how long a write may take to show on the other end: far above the feed interval (correctness, not timing)
DEADLINE = 10.0


def eventually(check, what: str):
    deadline = time.monotonic() + DEADLINE
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {DEADLINE:g} s: {what}")
        time.sleep(0.05)


def point_at(monkeypatch, data_dir: Path, url: str | None, collection: str | None) -> None:
    """The environment a chat backend sets before ``RagStore()``."""
    monkeypatch.setenv("BRAIN_DATA_DIR", str(data_dir))
    for name, value in (("BRAIN_CHROMA_URL", url), ("BRAIN_COLLECTION", collection)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


@pytest.fixture
def collection() -> str:
    return f"refprop-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def two_ends(chroma_server, collection, tmp_path, monkeypatch):
    """A writer and a reader, each ``RagStore()`` with a data directory of its own, on one collection."""
    point_at(monkeypatch, tmp_path / "writer", chroma_server, collection)
    writer = RagStore()
    point_at(monkeypatch, tmp_path / "reader", chroma_server, collection)
    reader = RagStore()
    try:
        yield writer, reader
    finally:
        writer.close()
        reader.close()


def served(store: RagStore, text: str) -> dict[str, str]:
    """What ``retrieve_memories`` finds for ``text`` (id -> text)."""
    return {h.id: h.text for h in store.retrieve_memories(text, k=5, relevance=False)}


def stored(store: RagStore, doc_id: str) -> str | None:
    docs = store.get([doc_id])
    return docs[0].text if docs else None


def test_every_kind_of_write_reaches_the_other_ends_reads(two_ends):
    writer, reader = two_ends
    assert served(reader, "anything") == {}  # the reader's index is built now, and must follow from here

    office = writer.upsert_memory("The office is on the third floor of the Lyon building")
    eventually(
        lambda: (
            served(reader, "office floor Lyon").get(office) == "The office is on the third floor of the Lyon building"
            and stored(reader, office) is not None
        ),
        "the new memory",
    )

    # an in-place edit: same id, same count, new text and vector
    writer.update_memory(office, text="The office moved to the ground floor in Grenoble")
    eventually(
        lambda: (
            served(reader, "office ground floor Grenoble").get(office)
            == "The office moved to the ground floor in Grenoble"
            and stored(reader, office) == "The office moved to the ground floor in Grenoble"
        ),
        "the in-place edit",
    )

    # a delete and a new memory back to back: the collection's size does not move
    size = writer.count()
    writer.delete(office)
    door = writer.upsert_memory("The door code of the Grenoble office is 4412")
    assert writer.count() == size
    eventually(
        lambda: (
            office not in served(reader, "office ground floor Grenoble")
            and stored(reader, office) is None
            and door in served(reader, "door code")
            and stored(reader, door) is not None
        ),
        "the count-neutral delete",
    )

    writer.delete(door)
    eventually(lambda: door not in served(reader, "door code") and stored(reader, door) is None, "the delete")
    # and the reader keeps serving what Chroma holds
    time.sleep(1.5)
    assert office not in served(reader, "office Grenoble") and door not in served(reader, "door code")


def _open(way: str, settings: Settings):
    """The store opened ``way``, and what closes it."""
    if way == "RagStore()":
        store = RagStore()
        return store, store.close
    if way == "RagStore(settings)":
        store = RagStore(settings)
        return store, store.close
    if way == "brain.open_store()":
        store = brain.open_store()
        return store, store.close
    opened = brain.open(start_worker=False)
    return opened.store, opened.close


@pytest.mark.parametrize("way", ["RagStore()", "RagStore(settings)", "brain.open_store()", "brain.open().store"])
def test_every_way_of_opening_a_store_follows_the_feed_and_writes_the_mirror(
    way, chroma_server, collection, tmp_path, monkeypatch
):
    point_at(monkeypatch, tmp_path / "other", chroma_server, collection)
    other = RagStore()
    try:
        data = tmp_path / "opened"
        settings = Settings(data_dir=data, chroma_url=chroma_server, collection=collection)
        if way == "RagStore(settings)":  # nothing in the environment: the settings alone
            point_at(monkeypatch, tmp_path / "unused", None, None)
        else:
            point_at(monkeypatch, data, chroma_server, collection)
        store, close = _open(way, settings)
        try:
            assert isinstance(store, RagStore)
            assert isinstance(store.feed_writer, FeedWriter) and isinstance(store.follower, FeedFollower)

            # its writes are numbered in the change feed, and land in its mirror file
            mine = store.upsert_memory("The staff canteen serves lunch from noon")
            assert last_sequence(store) and last_sequence(store) > 0
            feed = client_of(chroma_server).get_collection(collection + "__feed")
            records = feed.get(include=["documents", "metadatas"])
            assert any(
                mine in doc and meta["state"] == "done" for doc, meta in zip(records["documents"], records["metadatas"])
            )
            assert settings.mirror_file.is_file()
            with EngramMirror(settings.mirror_file, store.embedder.name) as mirror:
                assert [d.text for d in mirror.get([mine])] == ["The staff canteen serves lunch from noon"]

            # it follows the other end's writes, an in-place edit too (the collection's size never moves)
            assert other.update_memory(mine, text="The staff canteen serves lunch from one o'clock").id == mine
            eventually(
                lambda: (
                    {h.id: h.text for h in store.retrieve_memories("canteen lunch", k=3, relevance=False)}.get(mine)
                    == "The staff canteen serves lunch from one o'clock"
                ),
                f"the other end's edit in {way}",
            )
        finally:
            close()
    finally:
        other.close()


# ---- a writer killed mid-batch ------------------------------------------------------------------------------


def _crashing_writer() -> None:
    """Run as a subprocess: ``RagStore()`` from the environment; argv[1] ``hang`` writes a batch in chunks
    and hangs after the first chunk reached Chroma; ``loop`` writes, edits and deletes batches until killed."""
    store = RagStore()
    kept = store.upsert_memory("A fact written before the crash")
    store.chroma.max_batch_size = 5
    if sys.argv[1] == "hang":
        real = store.chroma.collection.upsert
        calls = []

        def upsert(**kwargs):
            if calls:
                print("half", flush=True)
                time.sleep(3600)
            real(**kwargs)
            calls.append(kwargs["ids"])

        store.chroma.collection = _Replaced(store.chroma.collection, upsert=upsert)
        store.upsert_docs([{"type": "memory", "text": f"Batch fact number {n}"} for n in range(20)])
        return
    print("writing", flush=True)
    for n in range(10_000):
        ids = store.upsert_docs(
            [{"type": "memory", "text": f"Round {n} fact {m}", "importance": 1 + m % 5} for m in range(20)]
        )
        store.update_memory(kept, text=f"A fact written before the crash, edited in round {n}")
        store.delete(ids[::3])


class _Replaced:
    def __init__(self, target, **methods):
        self._target, self._methods = target, methods

    def __getattr__(self, name):
        return self._methods.get(name) or getattr(self._target, name)


def _start_writer(mode: str, data: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; from tests.store.test_reference_propagation import _crashing_writer; _crashing_writer()"
    return subprocess.Popen(
        [sys.executable, "-c", code, mode], cwd=data.parent, env=env, text=True, stdout=subprocess.PIPE
    )


def _verify_in_a_new_process(data: Path) -> dict:
    """``brain mirror verify --json`` on the environment's store: a new process opens it (rolling back
    what the dead writer left unfinished) and compares the mirror with Chroma."""
    done = subprocess.run(
        [sys.executable, "-m", "brain.shells.cli", "mirror", "verify", "--json"],
        cwd=data.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (done.returncode == 0) == report["ok"], done.stderr[-3000:]
    return report


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["server", "embedded"])
def test_a_writer_killed_mid_batch_leaves_a_mirror_that_agrees_once_reopened(
    backend, chroma_server, collection, tmp_path, monkeypatch
):
    rng = random.Random(25)
    data = tmp_path / "writer"
    point_at(
        monkeypatch, data, chroma_server if backend == "server" else None, collection if backend == "server" else None
    )
    for attempt, mode in enumerate(["hang", "loop", "loop", "loop"]):
        proc = _start_writer(mode, data)
        try:
            assert proc.stdout.readline().strip() == ("half" if mode == "hang" else "writing")
            if mode == "loop":
                time.sleep(rng.uniform(0.2, 2.0))  # somewhere in a write, an edit or a delete
        finally:
            proc.send_signal(signal.SIGKILL)  # no clean-up of any kind
            proc.wait(timeout=30)

        # opened again here (the library call), then by `brain mirror verify` in a new process
        with RagStore() as store:
            mine = verify_mirror(store, store.mirror)
            assert mine.ok, f"kill {attempt} ({mode}): {verify_text(mine)}"
        report = _verify_in_a_new_process(data)
        assert report["ok"], f"kill {attempt} ({mode}): {report}"
        assert report["checked"] == mine.checked
        if mode == "hang":  # the unfinished batch was rolled back: only the fact before it is left
            assert report["checked"] == 1
