"""An interrupted ``brain restore --from-mirror`` is completed by running it again, and until then nothing
syncs the mirror from the half-restored store; one unreadable vector does not stop a restore.

The kill -9 tests kill a real restore process at chosen points (inside a Chroma write, between writes,
after the last write): in-process hooks make the points exact, the kill itself is SIGKILL.
"""

from __future__ import annotations

import sqlite3
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from brain.app.core import open_store
from brain.app.restore import recover_store
from brain.app.startup import startup
from brain.config import Settings
from brain.features.mirror import BLOB_LENGTH_INVALID, NON_FINITE_VALUE, verify_mirror
from brain.model.errors import RestoreUnfinished
from brain.shells.cli.reports import restore_text
from tests.conftest import cli_env
from tests.mirror.test_recovery_lost_store import fill, lose_store, mirror_rows

# runs in the killed process: the restore a user runs, with SIGKILL at one point of it
KILLED_RESTORE = r"""
import os, signal, sys
import brain.features.mirror.sync as sync
from brain.config import Settings
from brain.app.core import open_store
from brain.app.restore import recover_store
from brain.store.chroma import ChromaAccess

where, n = sys.argv[1], int(sys.argv[2])
calls = [0]
real_upsert = ChromaAccess.upsert

def upsert(self, *args, **kwargs):
    if where == "before-write" and calls[0] == n:
        os.kill(os.getpid(), signal.SIGKILL)
    real_upsert(self, *args, **kwargs)
    calls[0] += 1
    if where == "inside-write" and calls[0] == n:  # Chroma took the write; its intent is still on disk
        os.kill(os.getpid(), signal.SIGKILL)

ChromaAccess.upsert = upsert
if where == "before-finish":
    sync.restore_finished = lambda mirror, store: os.kill(os.getpid(), signal.SIGKILL)
with open_store(Settings()) as store:
    recover_store(store, batch=10)
print("finished")
"""


def store_documents(settings: Settings, embedder) -> dict[str, tuple]:
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    with open_store(settings, embedder=embedder) as store:
        got = store.chroma.get_all(None, ["documents", "metadatas"])
    return {i: (d, m.get("type")) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}


@pytest.fixture
def world(backend_settings, local_embedder, tmp_path):
    settings = backend_settings.model_copy(update={"persona_path": tmp_path / "absent-persona.md"})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        path = store.mirror.path
    return settings, path, mirror_rows(path), store_documents(settings, local_embedder)


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("where, n", [("before-write", 0), ("inside-write", 1), ("before-write", 3),
                                      ("inside-write", 6), ("before-finish", 0)])
def test_a_restore_killed_at_any_point_then_any_start_keeps_every_mirror_row(world, local_embedder, tmp_path,
                                                                            where, n):
    settings, path, before, documents = world
    lose_store(settings)
    killed = subprocess.run([sys.executable, "-c", KILLED_RESTORE, where, str(n)], cwd=tmp_path, env=cli_env(settings),
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert mirror_rows(path) == before
    # every way of starting refuses, and deletes nothing: the library, `brain init`, `brain mirror sync`
    with pytest.raises(RestoreUnfinished) as refused:
        startup(settings, warm=False)
    assert "did not finish" in str(refused.value) and "brain restore --from-mirror" in str(refused.value)
    for command in (["init"], ["mirror", "sync"], ["mirror", "rebuild"]):
        ran = subprocess.run([sys.executable, "-m", "brain.shells.cli", *command], cwd=tmp_path, env=cli_env(settings),
                             capture_output=True, text=True, timeout=300)
        assert ran.returncode == 1 and "did not finish" in ran.stderr, (command, ran.stdout, ran.stderr)
    assert mirror_rows(path) == before and path.with_name("mirror.db").exists()
    # running the restore again completes it
    again = subprocess.run([sys.executable, "-m", "brain.shells.cli", "restore", "--from-mirror"], cwd=tmp_path,
                           env=cli_env(settings), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert store_documents(settings, local_embedder) == documents
    started = startup(settings, warm=False)
    try:
        assert started.mirror_sync.deleted == 0
    finally:
        started.brain.close()
    assert set(mirror_rows(path)) == set(before)


def test_a_finished_restore_leaves_no_marker_and_the_store_starts(world, local_embedder):
    settings, path, before, documents = world
    lose_store(settings)
    with open_store(settings, embedder=local_embedder) as store:
        report = recover_store(store, batch=7)
        assert report.mirror.restored == len(before)
        assert store.mirror.meta("brain_restore_unfinished") is None
    started = startup(settings, warm=False)
    try:
        assert started.mirror_sync.deleted == 0 and started.mirror_sync.added == 0
    finally:
        started.brain.close()
    assert store_documents(settings, local_embedder) == documents


def test_unreadable_vectors_are_embedded_again_from_their_text_and_listed(world, local_embedder):
    settings, path, before, documents = world
    with sqlite3.connect(path) as raw:
        ids = [i for (i,) in raw.execute("SELECT memory_id FROM memory_embeddings ORDER BY memory_id LIMIT 2")]
        nan = struct.pack("<384f", *([0.05] * 383 + [float("nan")]))
        raw.execute("UPDATE memory_embeddings SET embedding = ? WHERE memory_id = ?", (nan, ids[0]))
        raw.execute("UPDATE memory_embeddings SET embedding = ? WHERE memory_id = ?", (nan[:99], ids[1]))
    lose_store(settings)
    with open_store(settings, embedder=local_embedder) as store:
        report = recover_store(store).mirror
        assert report.restored == len(before) and report.skipped == []
        assert dict(report.bad_vectors).keys() == set(ids)
        assert NON_FINITE_VALUE in dict(report.bad_vectors)[ids[0]]
        assert BLOB_LENGTH_INVALID in dict(report.bad_vectors)[ids[1]]
        assert report.embedded == 2 and report.reused_vectors == len(before) - 2
        assert "2 stored vectors could not be read" in restore_text(report) and ids[0] in restore_text(report)
        for doc in store.get(ids, include_embeddings=True):
            np.testing.assert_allclose(doc.embedding, local_embedder.embed_documents([doc.text])[0], atol=1e-6)
    assert store_documents(settings, local_embedder) == documents
    started = startup(settings, warm=False)  # the catch-up writes the good vectors into the mirror
    try:
        assert started.mirror_sync.updated == 2 and started.mirror_sync.deleted == 0
        assert set(started.store.mirror.vectors_of(ids, local_embedder.name)) == set(ids)
    finally:
        started.brain.close()


def make_text_vector(path, memory_id: str) -> None:
    """The stored vector of ``memory_id`` as SQLite TEXT that is not UTF-8 (``||`` of BLOBs makes TEXT):
    plain sqlite3 cannot even fetch it."""
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE memory_embeddings SET embedding = x'0000c07f' || substr(embedding, 5) WHERE memory_id = ?",
                    (memory_id,))
        with pytest.raises(sqlite3.OperationalError, match="decode"):
            raw.execute("SELECT embedding FROM memory_embeddings WHERE memory_id = ?", (memory_id,)).fetchall()


def test_a_vector_stored_as_text_is_embedded_again_and_the_restore_finishes(world, local_embedder):
    settings, path, before, documents = world
    with sqlite3.connect(path) as raw:
        (bad,) = raw.execute("SELECT memory_id FROM memory_embeddings ORDER BY memory_id LIMIT 1").fetchone()
    make_text_vector(path, bad)
    lose_store(settings)
    with open_store(settings, embedder=local_embedder) as store:
        report = recover_store(store, batch=7).mirror
        assert report.restored == len(before) and report.skipped == []
        assert list(dict(report.bad_vectors)) == [bad] and "stored as SQLite text" in dict(report.bad_vectors)[bad]
        assert report.embedded == 1 and report.reused_vectors == len(before) - 1
        assert store.mirror.meta("brain_restore_unfinished") is None
        [doc] = store.get([bad], include_embeddings=True)
        np.testing.assert_allclose(doc.embedding, local_embedder.embed_documents([doc.text])[0], atol=1e-6)
    assert store_documents(settings, local_embedder) == documents
    started = startup(settings, warm=False)  # the catch-up writes the row's vector again, as a BLOB
    try:
        assert started.mirror_sync.updated == 1 and started.mirror_sync.deleted == 0
        assert set(started.store.mirror.vectors_of([bad], local_embedder.name)) == {bad}
    finally:
        started.brain.close()
    after = mirror_rows(path)  # plain sqlite3 reads every row again
    assert set(after) == set(before) and {i: r[:2] for i, r in after.items()} == {i: r[:2] for i, r in before.items()}


@pytest.mark.slow
def test_a_vector_stored_as_text_in_a_sound_store_is_reported_and_repaired(world, local_embedder):
    settings, path, before, documents = world
    with sqlite3.connect(path) as raw:
        (bad,) = raw.execute("SELECT memory_id FROM memory_embeddings ORDER BY memory_id LIMIT 1").fetchone()
    make_text_vector(path, bad)
    with open_store(settings, embedder=local_embedder) as store:
        verified = verify_mirror(store, store.mirror)
        assert verified.vectors == [bad] and verified.missing == [] and verified.text == []
        query = local_embedder.embed_query("the colour shade")
        hits = store.mirror.recall(query, 100)
        assert len(hits) == len(before) - 1 and bad not in {h.id for h in hits}
    ran = subprocess.run([sys.executable, "-m", "brain.shells.cli", "init"], cwd=path.parent.parent,
                         env=cli_env(settings), capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    after = mirror_rows(path)  # start-up's catch-up wrote the vector again from the store: a BLOB
    assert {i: r[:2] for i, r in after.items()} == {i: r[:2] for i, r in before.items()}
    with open_store(settings, embedder=local_embedder) as store:
        assert verify_mirror(store, store.mirror).ok


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_restore_command_killed_mid_way_then_init_keeps_every_row(tmp_path, local_embedder):
    """`brain restore --from-mirror` itself, SIGKILLed from outside once it has started writing."""
    settings = Settings(data_dir=tmp_path / "data", persona_path=tmp_path / "absent-persona.md")
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(3000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with open_store(settings, embedder=local_embedder) as store:
        store.upsert_docs([{"text": f"Remembered fact {n} about topic {n % 97}", "type": "memory", "embedding": v}
                           for n, v in enumerate(vectors)])
        path = store.mirror.path
    before = mirror_rows(path)
    documents = store_documents(settings, local_embedder)
    lose_store(settings)
    proc = subprocess.Popen([sys.executable, "-m", "brain.shells.cli", "restore", "--from-mirror"], cwd=tmp_path,
                            env=cli_env(settings), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        intents = settings.data_dir / "write_intents"
        writes: set[str] = set()  # one intent record per restore write: the third is under way
        while len(writes) < 3:
            writes |= {p.name for p in intents.glob("*.intent")} if intents.is_dir() else set()
            assert proc.poll() is None, "the restore finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.002)
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
    assert proc.returncode == -9
    assert 0 < len(store_documents(settings, local_embedder)) < len(documents)
    init = subprocess.run([sys.executable, "-m", "brain.shells.cli", "init"], cwd=tmp_path, env=cli_env(settings),
                          capture_output=True, text=True, timeout=300)
    assert init.returncode == 1 and "did not finish" in init.stderr
    assert mirror_rows(path) == before
    again = subprocess.run([sys.executable, "-m", "brain.shells.cli", "restore", "--from-mirror"], cwd=tmp_path,
                           env=cli_env(settings), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert store_documents(settings, local_embedder) == documents
    init = subprocess.run([sys.executable, "-m", "brain.shells.cli", "init"], cwd=tmp_path, env=cli_env(settings),
                          capture_output=True, text=True, timeout=300)
    assert init.returncode == 0, init.stderr
    assert "0 deleted" in init.stdout and set(mirror_rows(path)) == set(before)
