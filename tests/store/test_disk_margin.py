"""Too little free disk: writes are refused before anything is written, reads and health go on, and a
served brain still stops on SIGTERM. The margin is set above the disk's real free space (the disk is
never filled)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import brain
from brain.app.core import open_store
from brain.app.startup import startup
from brain.config import Settings
from brain.model.errors import DiskSpaceLow
from brain.shells.api import create_app
from tests.conftest import NOBODY, LiveServer, free_port

ROOT = Path(__file__).resolve().parents[2]
MB = 2**20


def above_free(path: Path) -> int:
    """A margin (MB) more than ``path``'s disk has free."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free // MB + 10_000


@contextmanager
def brain_serve(tmp_path: Path, data: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """``brain serve`` on ``data`` as a real process with ``env`` added, once its health answers: (its URL, the
    process, its log). Killed at the end if a test left it running."""
    port = free_port()
    full = {**os.environ, "PYTHONPATH": str(ROOT), "BRAIN_DATA_DIR": str(data), "OLLAMA_HOST": NOBODY, **env}
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "brain.shells.cli", "serve", "--port", str(port)],
            cwd=tmp_path,
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        yield url, proc, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_write_below_the_margin_is_refused_and_nothing_is_written(tmp_path, local_embedder):
    data = tmp_path / "data"
    with open_store(Settings(data_dir=data), embedder=local_embedder) as store:
        kept = store.upsert_memory("the lighthouse keeper feeds the gulls at dawn", entity="alice")
    low = Settings(data_dir=data, min_free_disk_mb=above_free(data))
    with open_store(low, embedder=local_embedder) as store:
        before = store.count()
        mirrored = store.mirror.count()
        for write in (
            lambda: store.upsert_memory("a new memory that must not be stored", entity="alice"),
            lambda: store.delete(kept),
            lambda: store.update_memory(kept, importance=5),
        ):
            with pytest.raises(DiskSpaceLow) as refused:
                write()
            message = str(refused.value)
            assert "BRAIN_MIN_FREE_DISK_MB" in message and "nothing was written" in message
            assert str(data) in message
        assert store.count() == before and store.mirror.count() == mirrored
        assert store.get_one(kept).metadata["importance"] == 3
        # reads go on
        assert [h.id for h in store.retrieve_memories("who feeds the gulls?", 3, "alice", relevance=False)] == [kept]
        status = store.disk.status(detail=True)
        assert status["ok"] is False and status["min_free_mb"] == low.min_free_disk_mb
        assert status["free_mb"] < status["min_free_mb"]


def test_health_says_writes_are_refused(tmp_path, local_embedder):
    data = tmp_path / "data"
    # the extractive summariser: a model summariser nobody answers for would make health degraded too
    with brain.open(
        Settings(data_dir=data, ollama_host=NOBODY, summarizer="extractive"), embedder=local_embedder
    ) as opened:
        report = opened.health(detail=True)
        assert report["disk"]["ok"] is True and report["status"] == "ok"
        assert report["disk"]["min_free_mb"] == 256  # the default
    with brain.open(
        Settings(data_dir=data, ollama_host=NOBODY, min_free_disk_mb=above_free(data)), embedder=local_embedder
    ) as opened:
        report = opened.health()
        assert report["status"] == "degraded"
        assert report["disk"]["ok"] is False and "BRAIN_MIN_FREE_DISK_MB" in report["disk"]["error"]
        assert "free_mb" not in report["disk"]  # the operator's business (detail)
        assert opened.health(detail=True)["disk"]["free_mb"] is not None


def test_a_margin_of_zero_never_refuses(tmp_path, local_embedder):
    with open_store(Settings(data_dir=tmp_path / "data", min_free_disk_mb=0), embedder=local_embedder) as store:
        assert store.upsert_memory("stored whatever the disk holds")
        assert store.disk.status()["ok"] is True


def test_the_margin_covers_a_mirror_kept_elsewhere(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", mirror_path=tmp_path / "elsewhere" / "mirror.db")
    with open_store(settings, embedder=local_embedder) as store:
        assert store.disk.paths == [(tmp_path / "data").resolve(), (tmp_path / "elsewhere").resolve()]


def test_the_api_refuses_writes_and_keeps_answering(tmp_path, local_embedder):
    data = tmp_path / "data"
    settings = Settings(data_dir=data, ollama_host=NOBODY, summary_retries=0, min_free_disk_mb=above_free(tmp_path))
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        with httpx.Client(base_url=server.url, timeout=30) as client:
            refused = client.post("/v1/memories", json={"text": "not stored while the disk is low"})
            assert refused.status_code == 503, refused.text
            body = refused.json()
            assert body["error"] == "insufficient_storage" and "nothing was written" in body["message"]
            exchange = client.post("/v1/exchanges", json={"user_text": "hello", "assistant_text": "hi"})
            assert exchange.status_code == 503 and exchange.json()["error"] == "insufficient_storage"
            health = client.get("/v1/health")
            assert health.status_code == 200 and health.json()["disk"]["ok"] is False
            assert health.json()["status"] == "degraded"
            assert client.get("/v1/memories").status_code == 200
        assert store.count() == 0


@pytest.mark.subprocess
def test_brain_serve_below_the_margin_answers_and_stops_on_sigterm(tmp_path):
    with brain_serve(tmp_path, tmp_path / "data", BRAIN_MIN_FREE_DISK_MB=str(above_free(tmp_path))) as (url, proc, _):
        for _ in range(3):
            refused = httpx.post(f"{url}/v1/exchanges", json={"user_text": "hi", "assistant_text": "hello"}, timeout=30)
            assert refused.status_code == 503 and refused.json()["error"] == "insufficient_storage"
        assert httpx.get(f"{url}/v1/health", timeout=10).json()["disk"]["ok"] is False
        assert httpx.get(f"{url}/ui", timeout=10).status_code in (200, 401)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) is not None


@pytest.mark.subprocess
def test_brain_serve_starts_below_the_margin_and_serves_reads(tmp_path, local_embedder):
    """A persona file to bring in line (a start-up write) does not stop the server: it starts, reads
    answer, health says why writes are refused, and a write is refused naming the setting."""
    data = tmp_path / "data"
    persona = tmp_path / "persona.md"
    persona.write_text("You are Brain, a careful household assistant.\n\n## Tone\nWarm and brief.\n")
    with brain.open(
        Settings(data_dir=data, ollama_host=NOBODY, persona_path=persona), embedder=local_embedder
    ) as opened:
        startup(brain=opened, warm=False)  # the persona stored
        opened.chat.remember("Alice is allergic to peanuts", importance=5, entity="alice")
    persona.write_text(persona.read_text() + "\n## Boundaries\nNever share one person's memories.\n")  # changed
    with brain_serve(
        tmp_path,
        data,
        BRAIN_PERSONA_PATH=str(persona),
        BRAIN_SUMMARIZER="extractive",
        BRAIN_MIN_FREE_DISK_MB=str(above_free(tmp_path)),
    ) as (url, proc, log):
        health = httpx.get(f"{url}/v1/health", timeout=10).json()
        assert health["status"] == "degraded" and health["disk"]["ok"] is False
        assert "MB free" in health["disk"]["error"] and "BRAIN_MIN_FREE_DISK_MB" in health["disk"]["error"]
        listed = httpx.get(f"{url}/v1/memories", params={"entity": "alice"}, timeout=30)
        assert listed.status_code == 200 and "peanuts" in listed.text
        context = httpx.post(
            f"{url}/v1/context", json={"user_message": "Can I eat peanut butter?", "entity": "alice"}, timeout=60
        )
        assert context.status_code == 200 and "peanuts" in context.json()["prompt"]
        assert "careful household assistant" in context.json()["prompt"]  # the persona stored before
        refused = httpx.post(f"{url}/v1/memories", json={"text": "Bob likes tea", "entity": "bob"}, timeout=30)
        assert refused.status_code == 503 and refused.json()["error"] == "insufficient_storage"
        assert "BRAIN_MIN_FREE_DISK_MB" in refused.json()["message"]
        assert "persona file" in log.read_text() and "not loaded" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) is not None


@pytest.mark.subprocess
def test_sigterm_closes_the_store_as_ctrl_c_does(tmp_path, local_embedder):
    """systemd and `docker stop` send SIGTERM: the server shuts down gracefully and closes its store, so the
    index snapshot is saved (and queued summaries written) before the process ends."""
    data = tmp_path / "data"
    with brain.open(Settings(data_dir=data, ollama_host=NOBODY), embedder=local_embedder) as opened:
        opened.chat.remember("Alice is allergic to peanuts", importance=5, entity="alice")
    snapshots = data / "index_snapshots"
    for path in snapshots.glob("*"):
        path.unlink()
    with brain_serve(tmp_path, data, BRAIN_SUMMARIZER="extractive") as (url, proc, log):
        found = httpx.get(f"{url}/v1/memories/search", params={"q": "peanut allergy", "entity": "alice"}, timeout=60)
        assert found.status_code == 200 and found.json()["results"]  # the in-process indexes are built
        assert not any(snapshots.glob("*.npz"))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        assert any(snapshots.glob("*.npz")), log.read_text()[-3000:]


def test_below_the_margin_the_specialists_collection_is_not_written(tmp_path, local_embedder):
    """Registering the specialists writes their own collection, on the same disk: below the margin nothing is
    written; the specialists stored before are still served, and with none stored the error names the disk."""
    from brain.app.core import Brain

    specialists = ROOT / "config" / "specialists.yaml"
    plenty = Settings(data_dir=tmp_path / "a", specialists_path=specialists)
    tight = plenty.model_copy(update={"min_free_disk_mb": above_free(tmp_path)})
    with open_store(tight.model_copy(update={"data_dir": tmp_path / "b"}), embedder=local_embedder) as store:
        with Brain(store, start_worker=False) as b:
            with pytest.raises(DiskSpaceLow):
                b.register_specialists()
            assert store.client.get_or_create_collection("specialists").count() == 0
    with open_store(plenty, embedder=local_embedder) as store, Brain(store, start_worker=False) as b:
        stored = len(b.register_specialists())  # registered while there is room
        assert stored > 0
    import yaml

    fewer = tmp_path / "fewer.yaml"  # the file changed: one specialist left, the others to delete
    listed = yaml.safe_load(specialists.read_text())
    fewer.write_text(yaml.safe_dump({**listed, "specialists": listed["specialists"][:1]}))
    with (
        open_store(tight.model_copy(update={"specialists_path": fewer}), embedder=local_embedder) as store,
        Brain(store, start_worker=False) as b,
    ):
        before = store.client.get_collection("specialists").count()
        registry = b.register_specialists()  # refused to write, so it serves what is stored
        assert len(registry) == stored and registry.find_specialists("read the text in this scanned receipt")
        assert store.client.get_collection("specialists").count() == before
