"""A mirror that cannot be written while brain serves: writes are stored in Chroma and say the mirror
is degraded, health says so, nothing crashes (the read-only ``-shm`` file that SIGBUS'd the server),
and the mirror is caught up by itself once it can be written again."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.mirror import EngramMirror
from brain.features.mirror.sync import catch_up, verify_mirror
from brain.store.mirror_link import catch_up_mirror
from tests.conftest import NOBODY, free_port

ROOT = Path(__file__).resolve().parents[2]


def mirror_files(path: Path, *, shm: bool = False) -> list[Path]:
    """The mirror and its log; with ``shm`` its shared-memory file too (only where a failure to cope
    kills a server subprocess, not the test run: SQLite's mapping of it SIGBUSes)."""
    parts = (path, Path(f"{path}-wal")) + ((Path(f"{path}-shm"),) if shm else ())
    return [p for p in parts if p.exists()]


@contextmanager
def read_only(paths: list[Path]):
    """Make ``paths`` read-only for this process: immutable for root (whom permissions do not stop,
    and whose open descriptors then fail too, as on a read-only mount), else mode 0444."""
    root = os.geteuid() == 0
    if root:
        if shutil.which("chattr") is None:
            pytest.skip("chattr is needed to make a file read-only for root")
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"this file system has no immutable files: {done.stderr.strip()}")
    else:
        for p in paths:
            p.chmod(0o444)
    try:
        yield
    finally:
        if root:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
        else:
            for p in paths:
                p.chmod(0o644)


def test_writes_go_on_while_the_mirror_is_read_only_and_it_catches_up(store):
    kept = store.upsert_memory("the spare key is under the blue pot", entity="alice")
    gone = store.upsert_memory("the wifi password is on the fridge", entity="alice")
    path = store.mirror.path
    with read_only(mirror_files(path)):
        added = store.upsert_memory("the boiler is serviced in March", entity="alice")  # no error
        store.delete(gone)
        store.update_memory(kept, importance=5)
        assert {d.id for d in store.get([kept, gone, added])} == {kept, added}
        health = store.mirror_health
        assert health.status == "degraded"
        report = health.to_dict()
        assert report["ok"] is False and report["behind"] == 3
        assert "read-only" in report["error"] and "writable" in report["fix"]
        assert catch_up_mirror(store) == 0  # still read-only: they wait
    assert catch_up_mirror(store) == 3
    assert store.mirror_health.status == "ok" and store.mirror_health.to_dict()["ok"] is True
    assert verify_mirror(store, store.mirror).ok
    assert [d.id for d in store.mirror.get([added, gone])] == [added]


def test_the_next_write_catches_the_mirror_up(embedded_store):
    store = embedded_store
    with read_only(mirror_files(store.mirror.path)):
        missed = store.upsert_memory("written while the mirror was read-only")
    assert store.mirror_health.status == "degraded"
    store.upsert_memory("written once it was writable again")
    assert store.mirror_health.status == "ok"
    assert [d.id for d in store.mirror.get(missed)] == [missed] and verify_mirror(store, store.mirror).ok


def test_a_store_opened_on_a_read_only_mirror_serves_and_the_next_start_catches_up(settings, local_embedder):
    with open_store(settings, embedder=local_embedder) as store:
        store.upsert_memory("written before")
    with read_only(mirror_files(settings.mirror_file)):
        with open_store(settings, embedder=local_embedder) as store:
            assert store.mirror is None and store.mirror_health.status == "degraded"
            assert "restart once it is writable" in store.mirror_health.to_dict()["error"]
            missed = store.upsert_memory("written while the mirror was read-only")
            assert store.mirror_health.behind == 1
    with open_store(settings, embedder=local_embedder) as store:
        assert store.mirror_health.status == "ok"
        assert catch_up(store, store.mirror).added == 1  # what every serving start runs
        assert [d.id for d in store.mirror.get(missed)] == [missed] and verify_mirror(store, store.mirror).ok


def wait_for(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.3)


def serve(tmp_path: Path) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BRAIN_DATA_DIR": str(tmp_path / "data"), "OLLAMA_HOST": NOBODY,
           "BRAIN_SUMMARY_RETRIES": "0", "BRAIN_SUMMARIZER": "extractive"}  # health speaks of the mirror alone
    log = tmp_path / "serve.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "brain.shells.cli", "serve", "--port", str(port)], cwd=tmp_path,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}", log


@pytest.mark.subprocess
def test_a_served_brain_answers_truthfully_and_survives_a_read_only_shm(tmp_path, local_embedder):
    data = tmp_path / "data"
    proc, url, log = serve(tmp_path)
    body = {"user_text": "my sister's birthday is on the 9th", "assistant_text": "noted", "entity": "alice"}
    try:
        wait_for(url, proc, log)
        with httpx.Client(base_url=url, timeout=30) as client:
            first = client.post("/v1/exchanges", json=body)
            assert first.status_code == 201 and first.json()["mirror_status"] == "ok"
            conversation = first.json()["conversation_id"]
            with read_only(mirror_files(data / "mirror.db", shm=True)):
                during = {**body, "conversation_id": conversation, "user_text": "and mum's is in May"}
                stored = client.post("/v1/exchanges", json=during, headers={"Idempotency-Key": "mum-1"})
                assert stored.status_code == 201, stored.text
                assert stored.json()["mirror_status"] == "degraded" and not stored.json()["replayed"]
                retried = client.post("/v1/exchanges", json=during, headers={"Idempotency-Key": "mum-1"})
                assert retried.status_code == 201 and retried.json()["replayed"]
                assert retried.json()["user_turn_id"] == stored.json()["user_turn_id"]
                memory = client.post("/v1/memories", json={"text": "mum likes tulips", "entity": "alice"})
                assert memory.status_code == 201 and memory.json()["mirror_status"] == "degraded"
                health = client.get("/v1/health").json()
                assert health["mirror"]["status"] == "degraded" and health["status"] == "degraded"
                assert health["mirror"]["behind"] == 3
                turns = client.get(f"/v1/conversations/{conversation}/turns", params={"entity": "alice"})
                assert len(turns.json()["turns"]) == 4
            assert proc.poll() is None, log.read_text()[-3000:]  # no SIGBUS
            health = client.get("/v1/health").json()  # writable again: health catches it up
            assert health["mirror"]["status"] == "ok" and health["status"] == "ok", health
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open_store(Settings(data_dir=data), embedder=local_embedder) as store:
        assert store.count() == 5
        with EngramMirror(data / "mirror.db", store.embedder.name) as mirror:
            assert verify_mirror(store, mirror).ok


@pytest.mark.subprocess
def test_a_served_brain_stops_cleanly_while_the_mirror_is_read_only_and_the_next_start_catches_up(
        tmp_path, local_embedder):
    data = tmp_path / "data"
    proc, url, log = serve(tmp_path)
    try:
        wait_for(url, proc, log)
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.post("/v1/memories", json={"text": "first"}).json()["mirror_status"] == "ok"
            with read_only(mirror_files(data / "mirror.db", shm=True)):
                assert client.post("/v1/memories", json={"text": "second"}).json()["mirror_status"] == "degraded"
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=60) in (0, -signal.SIGTERM), log.read_text()[-3000:]  # not SIGBUS
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    proc, url, log = serve(tmp_path)  # the start-up catch-up brings the mirror in line
    try:
        wait_for(url, proc, log)
        assert httpx.get(f"{url}/v1/health", timeout=30).json()["mirror"]["status"] == "ok"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open_store(Settings(data_dir=data), embedder=local_embedder) as store:
        with EngramMirror(data / "mirror.db", store.embedder.name) as mirror:
            assert store.count() == 2 and verify_mirror(store, mirror).ok
