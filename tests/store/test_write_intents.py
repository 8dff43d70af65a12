"""Writes are all or nothing, even when the writer is killed: the intent log (brain/store/write_intents.py)
alone, then a real store whose writer process is SIGKILLed at random points of 6,000-document
batches (two Chroma calls each), opened afterwards through the library, brain.open and the CLI."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import brain
from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.features.mirror.sync import verify_mirror
from brain.shells.cli import cli
from brain.shells.cli.reports import verify_text
from brain.store.write_intents import PriorVersion, WriteIntentLog

ROOT = Path(__file__).resolve().parents[2]


# ---- the log alone ---------------------------------------------------------------------------------

def _prior(text: str) -> PriorVersion:
    return PriorVersion(text, {"type": "memory", "importance": 3, "tags": "a,b"}, np.arange(4, dtype=np.float32))


def test_a_finished_write_leaves_no_record(tmp_path):
    log = WriteIntentLog(tmp_path)
    intent = log.begin(upserted=["a", "b"], prior={"a": _prior("old a")})
    assert log.pending() == [intent.id]
    intent.done()
    assert log.pending() == []
    assert log.resolve(lambda i: pytest.fail("nothing to resolve")) == 0


def test_a_running_write_is_never_resolved(tmp_path):
    log = WriteIntentLog(tmp_path)
    running = log.begin(upserted=["a"])
    # another opener (its own log object, as another store or process would have) leaves it alone
    assert WriteIntentLog(tmp_path).resolve(lambda i: pytest.fail("the writer is alive")) == 0
    running.done()


def test_a_record_left_behind_is_read_back_whole_and_resolved_once(tmp_path):
    log = WriteIntentLog(tmp_path)
    left = log.begin(upserted=["a", "b", "a"], deleted=["c"], prior={"a": _prior("old a"), "c": _prior("old c")},
                     mirrored=False)
    left.keep()  # the writer gave up (or died): its lock is gone, its record stays
    assert log.has_kept
    seen = []
    assert WriteIntentLog(tmp_path).resolve(seen.append) == 1
    (found,) = seen
    assert found.id == left.id and found.mirrored is False
    assert found.ids == ["a", "b", "c"] and found.inserted == ["b"]
    assert found.prior["c"].document == "old c" and found.prior["c"].metadata == _prior("x").metadata
    assert np.array_equal(found.prior["a"].embedding, np.arange(4, dtype=np.float32))
    # resolving again finds nothing: idempotent
    assert log.resolve(seen.append) == 0 and len(seen) == 1
    assert log.pending() == [] and not log.has_kept


def test_a_failed_resolution_keeps_the_record_for_the_next_open(tmp_path):
    log = WriteIntentLog(tmp_path)
    log.begin(upserted=["a"]).keep()

    def unreachable(intent):
        raise ConnectionError("Chroma is down")

    with pytest.raises(ConnectionError):
        WriteIntentLog(tmp_path).resolve(unreachable)
    assert len(log.pending()) == 1
    done = []
    assert WriteIntentLog(tmp_path).resolve(done.append) == 1 and len(done) == 1
    assert log.pending() == []


def test_an_unfinished_record_file_is_dropped_unread(tmp_path):
    log = WriteIntentLog(tmp_path)
    log.directory.mkdir(parents=True)
    (log.directory / "0123.tmp").write_bytes(b'{"format": 1, "upse')  # killed while writing the record
    assert log.resolve(lambda i: pytest.fail("never renamed: nothing was written")) == 0
    assert list(log.directory.iterdir()) == []


def test_an_unreadable_record_is_a_clear_error(tmp_path):
    log = WriteIntentLog(tmp_path)
    log.directory.mkdir(parents=True)
    (log.directory / "0123.intent").write_bytes(b"not json")
    with pytest.raises(brain.model.errors.StoreUnavailable, match="0123.intent cannot be read.*mirror verify"):
        log.resolve(lambda i: None)


# ---- the store, killed ------------------------------------------------------------------------------

N = 6000  # more than Chroma's max batch size (5,461 embedded): each write takes two Chroma calls

# The writer: one write of N documents (insert, replace or delete), with precomputed unit vectors so that
# no model runs. WRITER_PAUSE (read here only) sleeps after each Chroma call, so that kills land between
# calls as well as inside them.
WRITER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from brain.config import Settings
    from brain.app.core import open_store
    from brain.app.rag_store import RagStore

    data_dir, action, version = sys.argv[1], sys.argv[2], sys.argv[3]
    count = int(sys.argv[4])
    pause = float(os.environ.get("WRITER_PAUSE", "0"))
    store = open_store(Settings(data_dir=data_dir))
    for name in ("upsert", "delete"):
        real = getattr(store.col, name)
        def paused(*args, _real=real, **kwargs):
            result = _real(*args, **kwargs)
            print("chroma call", flush=True)
            time.sleep(pause)
            return result
        setattr(store.col, name, paused)
    vectors = np.random.default_rng(7).normal(size=(count, store.dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"fact-{i:05d}" for i in range(count)]
    print("writing", flush=True)
    if action == "delete":
        store.delete(ids)
    else:
        store.upsert_docs([{"id": i, "text": f"fact {n} ({version})", "type": "memory", "importance": 2,
                            "tags": [version], "embedding": v} for n, (i, v) in enumerate(zip(ids, vectors))])
    print("done", flush=True)
    store.close()
""")


def _start_writer(script: Path, data_dir: Path, action: str, version: str, count: int, pause: float,
                  server: dict[str, str] | None = None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WRITER_PAUSE": str(pause), **(server or {})}
    return subprocess.Popen([sys.executable, str(script), str(data_dir), action, version, str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for(proc: subprocess.Popen, line: str) -> None:
    for got in proc.stdout:
        if got.strip() == line:
            return
    raise AssertionError(f"the writer exited before {line!r}: {proc.wait()} {proc.stderr.read()[-2000:]}")


def _kill(proc: subprocess.Popen) -> bool:
    """SIGKILL by pid; True when the writer was still writing (had not printed "done")."""
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    return "done" not in out


def _batch_state(store: RagStore, count: int) -> str | None:
    """"absent", or the one version every document of the batch has; anything in between fails."""
    docs = store.get([f"fact-{i:05d}" for i in range(count)])
    mirrored = store.mirror.get([f"fact-{i:05d}" for i in range(count)])
    assert len(docs) in (0, count), f"Chroma holds {len(docs)} of the {count} documents"
    assert len(mirrored) == len(docs), f"the mirror holds {len(mirrored)}, Chroma {len(docs)}"
    if not docs:
        return "absent"
    versions = {d.metadata["tags"][0] for d in docs}
    assert len(versions) == 1, f"the batch is part old, part new: {versions}"
    assert {d.text for d in docs} == {r.text for r in mirrored}
    return versions.pop()


def _open_and_check(data_dir: Path, entry: str, count: int, server: dict[str, str] | None = None) -> str:
    """Open the store through ``entry`` (every opener resolves unfinished writes) and check it."""
    server = server or {}
    settings = Settings(data_dir=data_dir, chroma_url=server.get("BRAIN_CHROMA_URL"),
                        collection=server.get("BRAIN_COLLECTION", "conversations"))
    if entry == "cli":
        result = CliRunner().invoke(cli, ["--json", "--data-dir", str(data_dir), "mirror", "verify"], env=server)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["ok"]
    with (brain.open(settings, start_worker=False) if entry == "brain.open" else open_store(settings)) as opened:
        store = opened.store if entry == "brain.open" else opened
        assert WriteIntentLog(data_dir).pending() == []
        if entry != "cli":  # the CLI's verify ran above
            report = verify_mirror(store, store.mirror)
            assert report.ok, verify_text(report)
        return _batch_state(store, count)


def _kill_at(proc: subprocess.Popen, point: str, rng: random.Random) -> bool:
    """Kill the writer at ``point`` of its write; True when it was killed while writing."""
    _wait_for(proc, "writing")
    if point == "none":
        proc.wait(timeout=120)
        return _kill(proc)
    if point == "before Chroma":  # validating, reading the previous versions, recording the intent
        time.sleep(rng.uniform(0, 0.6))
    elif point == "between the calls":
        _wait_for(proc, "chroma call")
        time.sleep(rng.uniform(0, PAUSE))
    elif point == "after the last call":  # Chroma holds the whole batch; the mirror has not committed
        _wait_for(proc, "chroma call")
        _wait_for(proc, "chroma call")
        time.sleep(rng.uniform(0, PAUSE))
    else:  # anywhere: a plain delay
        time.sleep(rng.uniform(0, 6.0))
    return _kill(proc)


PAUSE = 0.3
POINTS = ["before Chroma", "between the calls", "after the last call", "anywhere"]


@pytest.mark.server
@pytest.mark.stress
@pytest.mark.subprocess
def test_a_writer_killed_anywhere_leaves_the_whole_batch_or_none(tmp_path, chroma_server):
    """On a `chroma run` server, so that only brain's writer dies: killing an embedded Chroma inside its
    own write can damage its vector index (chromadb 1.5.9), which no protocol above Chroma repairs."""
    rng = random.Random(13)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    data_dir = tmp_path / "data"
    server = {"BRAIN_CHROMA_URL": chroma_server, "BRAIN_COLLECTION": f"kill-{uuid.uuid4().hex[:8]}"}
    state, runs = "absent", 0
    killed = {"insert": 0, "delete": 0}
    entries = ["library", "brain.open", "cli"]
    while sum(killed.values()) < 10 or min(killed.values()) < 3:
        runs += 1
        assert runs <= 24, f"only {killed} writers were killed while writing, in {runs} runs"
        action = "insert" if state == "absent" else "delete"
        # an insert is let finish now and then, so that there is a batch to delete
        point = "none" if action == "insert" and killed["insert"] >= 2 and rng.random() < 0.4 else rng.choice(POINTS)
        proc = _start_writer(script, data_dir, action, "v1", N, pause=PAUSE, server=server)
        killed[action] += _kill_at(proc, point, rng)
        state = _open_and_check(data_dir, entries[runs % 3], N, server)
        assert state in ("absent", "v1")


@pytest.mark.subprocess
def test_a_writer_killed_after_chroma_took_an_update_leaves_the_old_version(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    data_dir = tmp_path / "data"
    first = _start_writer(script, data_dir, "insert", "v1", 3, pause=0)
    assert first.wait(timeout=60) == 0, first.stderr.read()
    proc = _start_writer(script, data_dir, "replace", "v2", 3, pause=30)
    _wait_for(proc, "chroma call")  # Chroma holds v2; the mirror's transaction has not committed
    assert _kill(proc)
    assert _open_and_check(data_dir, "library", 3) == "v1"
