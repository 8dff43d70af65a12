"""One process per embedded data directory: a second process gets a clear error, never a shared store."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.model.errors import StoreLocked, StoreUnavailable

OPEN_IN_CHILD = textwrap.dedent(
    """
    import sys
    from brain.config import Settings
    from brain.model.errors import StoreLocked
    from brain.store.locking import DataDirLock
    try:
        DataDirLock(Settings(data_dir=sys.argv[1]).data_dir).acquire()
    except StoreLocked as exc:
        print("LOCKED:", exc)
        sys.exit(3)
    print("OPENED")
    """
)


def open_in_child(data_dir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", OPEN_IN_CHILD, str(data_dir)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.subprocess
def test_second_process_gets_a_clear_error_while_the_store_is_open(settings, local_embedder):
    store = open_store(settings, embedder=local_embedder)
    store.upsert_memory("Alice likes tea")
    try:
        child = open_in_child(settings.data_dir)
        assert child.returncode == 3, child.stderr
        message = child.stdout
        assert "in use by process" in message and str(__import__("os").getpid()) in message
        assert "BRAIN_CHROMA_URL" in message and "single-process" in message
    finally:
        store.close()
    # released: the other process may open it now, and the data is intact
    assert open_in_child(settings.data_dir).stdout.strip() == "OPENED"
    reopened = open_store(settings, embedder=local_embedder)
    assert [d.text for d in reopened.get(type="memory")] == ["Alice likes tea"]
    reopened.close()


@pytest.mark.subprocess
def test_the_same_process_may_open_a_data_dir_twice(settings, local_embedder):
    first = open_store(settings, embedder=local_embedder)
    second = open_store(settings, embedder=local_embedder)
    first.close()
    # still held by `second`
    assert open_in_child(settings.data_dir).returncode == 3
    second.close()
    second.close()  # closing twice is harmless and does not release someone else's claim
    assert open_in_child(settings.data_dir).returncode == 0


def test_locked_is_a_store_unavailable(tmp_path):
    assert issubclass(StoreLocked, StoreUnavailable)


@pytest.mark.server
@pytest.mark.subprocess
def test_server_backed_store_takes_no_lock(chroma_server, tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", chroma_url=chroma_server, collection="locktest")
    store = open_store(settings, embedder=local_embedder)
    try:
        assert not (tmp_path / "data" / "brain.lock").exists()
        assert open_in_child(tmp_path / "data").returncode == 0
    finally:
        store.close()


@pytest.mark.subprocess
def test_failed_open_releases_the_claim(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data")
    with pytest.raises(StoreUnavailable, match="cannot open Chroma collection"):
        # an unusable collection name makes Chroma refuse after the lock was taken
        open_store(Settings(data_dir=tmp_path / "data", collection="bad name!"), embedder=local_embedder)
    assert open_in_child(settings.data_dir).returncode == 0
