"""A lost, wrong or much smaller store never empties the mirror: start-up refuses and says to restore.

The mirror is the copy that survives a lost Chroma store. Starting brain on such a store (a lost disk,
a wrong BRAIN_DATA_DIR, an empty new server behind BRAIN_CHROMA_URL) must not run the catch-up with the
empty store as the truth: that would delete every mirror row before ``brain restore --from-mirror`` could
read them.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from brain.app import reindex
from brain.app.core import open_store
from brain.app.restore import recover_store
from brain.app.startup import startup
from brain.config import Settings
from brain.features.mirror import catch_up, verify_mirror
from brain.model.errors import StoreLooksLost
from brain.store.mirror_link import mirror_paused
from tests.app.test_reindex import NOMIC, ollama  # noqa: F401 (a fixture)
from tests.conftest import cli_env, free_port

MEMORIES = 40
CONVERSATIONS = 5


def fill(store) -> None:
    """40 memories and 5 conversations of 2 exchanges: 60 mirrored documents."""
    store.upsert_docs(
        [
            {
                "text": f"Fact number {n}: the {n}th colour is shade {n * 7}",
                "type": "memory",
                "scope": "entity:alice" if n % 2 else "global",
                "importance": 1 + n % 5,
            }
            for n in range(MEMORIES)
        ]
    )
    for c in range(CONVERSATIONS):
        store.upsert_turn(f"conv-{c}", f"Question {c} about the weather", f"Answer {c}: it will rain")
        store.upsert_turn(f"conv-{c}", f"Follow-up {c}", f"Reply {c}: bring an umbrella")


def mirror_rows(path: Path) -> dict[str, tuple]:
    """Every row of the mirror file with its vectors, read with plain sqlite3 (no brain code)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = {i: (c, m) for i, c, m in conn.execute("SELECT id, content, metadata FROM memories")}
        vectors = {
            (i, model): bytes(b)
            for i, model, b in conn.execute("SELECT memory_id, model, embedding FROM memory_embeddings")
        }
    return {i: (*row, tuple(sorted((m, v) for (j, m), v in vectors.items() if j == i))) for i, row in rows.items()}


def lose_store(settings: Settings) -> None:
    """The store is gone: the embedded directory deleted, or every collection of the store dropped from the
    server (what an empty new `chroma run` looks like to brain). The data directory, with the mirror, stays."""
    from chromadb.api.client import SharedSystemClient

    if settings.chroma_url:
        import chromadb

        host, port = settings.chroma_url.removeprefix("http://").split(":")
        client = chromadb.HttpClient(host=host, port=int(port))
        for col in client.list_collections():
            if col.name.startswith(settings.collection):
                client.delete_collection(col.name)
    else:
        shutil.rmtree(settings.data_dir / "chroma")
    SharedSystemClient.clear_system_cache()  # as a new process would open it


@pytest.fixture
def world(backend_settings, local_embedder, tmp_path):
    settings = backend_settings.model_copy(update={"persona_path": tmp_path / "absent-persona.md"})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        assert store.mirror.count() == MEMORIES + 4 * CONVERSATIONS
        path = store.mirror.path
    return settings, path, mirror_rows(path)


def test_a_lost_store_is_refused_at_start_and_the_mirror_keeps_every_row(world, local_embedder):
    settings, path, before = world
    lose_store(settings)
    with pytest.raises(StoreLooksLost) as refused:
        startup(settings, warm=False)
    message = str(refused.value)
    assert "brain restore --from-mirror" in message and "60" in message and "--force" in message
    assert mirror_rows(path) == before
    # opening the store (write intents resolved, mirror attached) deletes nothing either
    with open_store(settings, embedder=local_embedder) as store:
        with pytest.raises(StoreLooksLost):
            catch_up(store, store.mirror)
        assert mirror_rows(path) == before
        report = recover_store(store)
        assert report.mirror.restored == len(before) and report.mirror.skipped == []
        assert store.count("memory") == MEMORIES and store.count("turn") == 4 * CONVERSATIONS
    started = startup(settings, warm=False)
    try:
        assert started.mirror_sync.deleted == 0 and started.mirror_sync.added == 0
        assert verify_mirror(started.store, started.store.mirror).ok
    finally:
        started.brain.close()
    assert set(mirror_rows(path)) == set(before)


def test_a_store_much_smaller_than_its_mirror_is_refused_until_confirmed(world, local_embedder):
    settings, path, before = world
    with open_store(settings, embedder=local_embedder) as store:
        gone = store.chroma.ids()[:25]
        store.col.delete(ids=gone)  # around brain: the mirror never hears of it
        with pytest.raises(StoreLooksLost) as refused:
            catch_up(store, store.mirror)
        assert "25 of the 60" in str(refused.value)
        assert mirror_rows(path) == before
        report = catch_up(store, store.mirror, force=True)
        assert report.deleted == 25 and set(mirror_rows(path)) == set(before) - set(gone)


def test_a_few_deletes_the_mirror_missed_are_still_repaired(world, local_embedder):
    settings, path, before = world
    with open_store(settings, embedder=local_embedder) as store:
        gone = store.chroma.ids()[:3]
        store.col.delete(ids=gone)
        assert catch_up(store, store.mirror).deleted == 3
    assert set(mirror_rows(path)) == set(before) - set(gone)


def test_a_recreated_store_is_not_the_truth_even_when_it_holds_most_documents(world, local_embedder):
    """A new collection filled around the mirror (e.g. an import into a new server) holding 58 of the
    60 documents: few deletions, but the collection is not the one the mirror followed."""
    settings, path, before = world
    lose_store(settings)
    with open_store(settings, embedder=local_embedder) as store:
        docs = [d for d in store.mirror.iter_documents()][:-2]
        with mirror_paused(store):
            store.upsert_docs(
                [
                    {
                        **{k: v for k, v in d.metadata.items() if k != "ts_epoch"},
                        "id": d.id,
                        "text": d.text,
                        "embedding": d.embedding,
                    }
                    for d in docs
                ]
            )
        assert store.count() == len(before) - 2
        with pytest.raises(StoreLooksLost) as refused:
            catch_up(store, store.mirror)
        assert "not the collection" in str(refused.value)
        assert mirror_rows(path) == before
        # a restore brings the rest back, and the mirror follows the new collection from then on
        recover_store(store)
        assert store.count() == len(before)
        assert catch_up(store, store.mirror).changed == 0
        store.col.delete(ids=[docs[0].id])
        assert catch_up(store, store.mirror).deleted == 1


@pytest.mark.subprocess
def test_brain_init_and_serve_refuse_a_lost_store(world, tmp_path):
    settings, path, before = world
    lose_store(settings)
    env = cli_env(settings)
    init = subprocess.run(
        [sys.executable, "-m", "brain.shells.cli", "init"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert init.returncode == 1, init.stdout
    assert "brain restore --from-mirror" in init.stderr and "0 added" not in init.stdout
    assert mirror_rows(path) == before
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "brain.shells.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = serve.communicate(timeout=300)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.communicate()
    assert serve.returncode == 1 and "brain restore --from-mirror" in err
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2)
    assert mirror_rows(path) == before
    # the confirmation is explicit: `brain mirror sync --force` makes the mirror follow the store
    forced = subprocess.run(
        [sys.executable, "-m", "brain.shells.cli", "mirror", "sync", "--force"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert forced.returncode == 0, forced.stderr
    assert f"{len(before)} deleted" in forced.stdout
    assert mirror_rows(path) == {}


def test_a_reindexed_store_is_not_taken_for_a_store_created_again(settings, local_embedder, ollama):
    """A re-index serves a new collection (a new Chroma id) and may drop the old one: the mirror follows it."""
    settings = settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        reindex.run(store, reindex.embedder_named(settings, NOMIC), progress=False)
        reindex.drop_old(store, keep=0)
        gone = store.chroma.ids()[:3]
        store.col.delete(ids=gone)
        assert catch_up(store, store.mirror).deleted == 3


def test_another_store_writes_nothing_into_the_mirror_before_it_is_refused(world, local_embedder, monkeypatch):
    """With more differences than one repair transaction holds, rows would be written before the pass
    ends: the store's ids are checked first."""
    import brain.features.mirror.sync

    settings, path, before = world
    lose_store(settings)
    monkeypatch.setattr(brain.features.mirror.sync, "REPAIR_BATCH", 5)
    with open_store(settings, embedder=local_embedder) as store:
        with mirror_paused(store):
            store.upsert_docs([{"text": f"Someone else's fact {n}", "type": "memory"} for n in range(30)])
        with pytest.raises(StoreLooksLost):
            catch_up(store, store.mirror)
    assert mirror_rows(path) == before
