"""`brain serve --workers N`: refused on the embedded store; on a real `chroma run` server, N uvicorn
worker processes on one port, each with its own in-process state, kept in line by the change feed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.shells.api.serving import WORKER_SETTINGS
from tests.conftest import NOBODY, free_port

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "workers-admin-token-0123456789"
#: how long a test waits for what a worker should show soon: far above the feed interval, so that a
#: loaded machine does not fail it (the mechanism is tested, not its speed)
PATIENCE = 60.0


def brain_command(*args: str, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "brain.shells.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        timeout=timeout,
    )


# ---- refused on the embedded store ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["option", "setting"])
def test_several_workers_on_the_embedded_store_are_refused_before_anything_opens(tmp_path, how):
    data = tmp_path / "data"
    args = ["--workers", "2"] if how == "option" else []
    env = {"BRAIN_API_WORKERS": "2"} if how == "setting" else {}
    result = brain_command("--data-dir", str(data), "serve", "--port", str(free_port()), *args, cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr
    message = result.stderr
    assert message.startswith("error: 2 workers need a Chroma server"), message
    assert "opened by one process only" in message  # why
    assert "chroma run" in message and "BRAIN_CHROMA_URL" in message and "--workers 1" in message  # what to do
    assert "Traceback" not in message
    assert not data.exists()  # nothing was opened or created


def test_a_worker_count_out_of_range_is_a_usage_error(tmp_path):
    result = brain_command("--data-dir", str(tmp_path / "data"), "serve", "--workers", "0", cwd=tmp_path, env={})
    assert result.returncode == 2 and "--workers" in result.stderr


# ---- several workers on a Chroma server ---------------------------------------------------------------


class WorkersServer:
    """`brain serve --workers N` as a subprocess, for the project ``project`` (its .env names the Chroma
    server, the collection and the token), run from another directory with ``--project``."""

    def __init__(self, project: Path, workers: int, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = project / "serve.log"
        elsewhere = project.parent / "elsewhere"
        elsewhere.mkdir(exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "brain.shells.cli",
                    "--project",
                    str(project),
                    "serve",
                    "--workers",
                    str(workers),
                    "--port",
                    str(self.port),
                    *extra,
                ],
                cwd=elsewhere,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self, workers: int) -> None:
        deadline = time.monotonic() + 180
        while len(self.worker_pids()) < workers or not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"brain serve did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.3)

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/v1/health", headers=auth(), timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def worker_pids(self) -> list[int]:
        """The worker processes: children of the server spawned by multiprocessing (read from /proc)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == self.proc.pid and b"multiprocessing.spawn" in cmdline:
                pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # as Ctrl-C: uvicorn stops its workers, then itself
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                for pid in self.worker_pids():
                    os.kill(pid, signal.SIGKILL)
                self.proc.kill()
                self.proc.wait()


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def fresh(url: str) -> httpx.Client:
    """A client that opens a new connection per request, so that requests spread over the workers."""
    return httpx.Client(
        base_url=url,
        headers={**auth(), "Connection": "close"},
        timeout=60,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def make_project(tmp_path: Path, chroma_url: str, interval: float) -> tuple[Path, str]:
    project = tmp_path / "project"
    (project / "config").mkdir(parents=True)
    (project / "config" / "defaults.env").write_text("")
    collection = f"w-{uuid.uuid4().hex[:12]}"
    (project / ".env").write_text(
        "\n".join(
            [
                f"BRAIN_CHROMA_URL={chroma_url}",
                f"BRAIN_COLLECTION={collection}",
                f"BRAIN_API_TOKEN={TOKEN}",
                f"BRAIN_FEED_INTERVAL_SECONDS={interval}",
                "BRAIN_INDEX_REFRESH_SECONDS=3600",
                f"BRAIN_OLLAMA_HOST={NOBODY}",
                "BRAIN_SUMMARY_RETRIES=0",
                "",
            ]
        )
    )
    return project, collection


def found(client: httpx.Client, query: str, **headers: str) -> list[str]:
    answer = client.get("/v1/memories/search", params={"q": query}, headers=headers)
    assert answer.status_code == 200, answer.text
    return [h["id"] for h in answer.json()["results"]]


@pytest.fixture
def unfollowed(chroma_server, tmp_path):
    """Two workers that look at the feed only when a request asks for a sequence (interval: an hour)."""
    project, _ = make_project(tmp_path, chroma_server, 3600)
    server = WorkersServer(project, 2)
    try:
        server.wait_ready(2)
        yield server
    finally:
        server.stop()


@pytest.mark.server
def test_two_processes_answer_on_one_port_and_a_sequence_reads_the_write_on_either(unfollowed):
    assert len(unfollowed.worker_pids()) == 2
    with fresh(unfollowed.url) as client:
        for _ in range(40):  # each worker builds its index on its first read: before the write
            assert found(client, "tea") == []
        created = client.post("/v1/memories", json={"text": "Alice drinks green tea"})
        assert created.status_code == 201, created.text
        memory, sequence = created.json()["id"], created.json()["sequence"]
        assert sequence == int(created.headers["X-Brain-Sequence"])
        # without the sequence, each worker serves its own state: the writer has the memory, the other
        # (which will not look at the feed for an hour) has not; seeing both proves two processes answer
        seen: set[bool] = set()
        deadline = time.monotonic() + PATIENCE
        while seen != {True, False}:
            assert time.monotonic() < deadline, f"one port, but only one state seen: {seen}"
            seen.add(memory in found(client, "tea"))
        # with it, every request sees the write, whichever worker answers
        for _ in range(20):
            assert found(client, "tea", **{"X-Brain-Min-Sequence": str(sequence)}) == [memory]
        deleted = client.delete(f"/v1/memories/{memory}")
        assert deleted.status_code == 200 and deleted.json()["sequence"] > sequence
        for _ in range(20):
            assert found(client, "tea", **{"X-Brain-Min-Sequence": str(deleted.json()["sequence"])}) == []


@pytest.fixture
def followed(chroma_server, tmp_path):
    """Two workers tailing the feed every 0.5 s, with MCP, given their project with --project."""
    project, collection = make_project(tmp_path, chroma_server, 0.5)
    server = WorkersServer(project, 2, "--mcp")
    try:
        server.wait_ready(2)
        yield server, collection
    finally:
        server.stop()


@pytest.mark.server
def test_workers_get_the_parents_settings_and_show_each_others_writes_within_the_interval(
    followed, chroma_server, tmp_path, local_embedder
):
    server, collection = followed
    with fresh(server.url) as client:
        # the project's settings reached every worker: its token, --mcp, its collection
        for _ in range(10):
            assert httpx.get(f"{server.url}/v1/memories", headers={"Connection": "close"}).status_code == 401
            assert client.post("/mcp", json={}).status_code != 404
        created = client.post("/v1/memories", json={"text": "Bob is allergic to peanuts", "importance": 5})
        assert created.status_code == 201, created.text
        memory = created.json()["id"]
        reader_settings = Settings(chroma_url=chroma_server, collection=collection, data_dir=tmp_path / "reader")
        with open_store(reader_settings, embedder=local_embedder, mirror=False) as reader:
            assert [d.id for d in reader.get(memory)] == [memory]

        # within the interval, without asking for a sequence: every request sees the write
        until_all(lambda: memory in found(client, "peanuts"), "the new memory on every worker")
        edited = client.patch(f"/v1/memories/{memory}", json={"text": "Bob is allergic to hazelnuts"})
        assert edited.status_code == 200 and edited.json()["sequence"] > created.json()["sequence"]
        until_all(lambda: text_of(client, memory, "hazelnuts") == "Bob is allergic to hazelnuts", "the edit")

        # a deleted memory never comes back, on any worker, once the interval has passed
        assert client.delete(f"/v1/memories/{memory}").status_code == 200
        until_all(lambda: memory not in found(client, "hazelnuts"), "the delete on every worker")
        for _ in range(60):
            assert memory not in found(client, "allergic hazelnuts peanuts")
            assert client.get(f"/v1/memories/{memory}").status_code == 404


def text_of(client: httpx.Client, memory: str, query: str) -> str | None:
    hits = client.get("/v1/memories/search", params={"q": query}).json()["results"]
    return next((h["text"] for h in hits if h["id"] == memory), None)


def until_all(check, what: str, *, in_a_row: int = 20) -> None:
    """Wait until ``check`` holds for ``in_a_row`` requests in a row (spread over the workers)."""
    deadline = time.monotonic() + PATIENCE
    streak = 0
    while streak < in_a_row:
        if check():
            streak += 1
            continue
        streak = 0
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {PATIENCE:g} s: {what}")
        time.sleep(0.1)


def test_the_workers_app_is_not_for_uvicorn_alone(monkeypatch):
    from brain.model.errors import ConfigError
    from brain.shells.api.serving import worker_app

    monkeypatch.delenv(WORKER_SETTINGS, raising=False)
    with pytest.raises(ConfigError, match="brain serve --workers N"):
        worker_app()
