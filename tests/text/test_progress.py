"""Progress of long jobs: a bar on a terminal, periodic plain lines otherwise; moved by every batch."""

from __future__ import annotations

import io
import math
import re

from click.testing import CliRunner

import brain.store.facade
from brain.features.ingest import ingest_paths
from brain.features.mirror import EngramMirror
from brain.shells.cli import cli
from brain.text.progress import Progress, ProgressOptions, open_progress
from tests.ingest.test_ingest import write_kb

MODEL = "local/minilm-l6-v2"
TS = "2026-01-05T10:00:00+00:00"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines_instead_of_a_bar_when_the_stream_is_not_a_terminal():
    out = io.StringIO()
    with Progress(10, "embedding", "doc", ProgressOptions(stream=out, interval=0)) as progress:
        for _ in range(5):
            progress.update(2)
    lines = out.getvalue().splitlines()
    assert [re.match(r"embedding: (\d+)/10 docs \(\d+%\), [\d.]+ docs/s", line).group(1) for line in lines[:5]] == [
        "2",
        "4",
        "6",
        "8",
        "10",
    ]
    assert "left" in lines[0] and "left" not in lines[4]  # the time left, while there is some
    assert lines[5].startswith("embedding: 10/10 docs done in ") and len(lines) == 6
    assert "\r" not in out.getvalue()


def test_a_short_job_off_a_terminal_is_silent_and_disabled_progress_writes_nothing():
    out = io.StringIO()
    with Progress(10, "reading", "file", ProgressOptions(stream=out)) as progress:  # default interval: 10 s
        progress.update(10)
    assert out.getvalue() == ""
    with open_progress(False, total=10, desc="x", unit="doc") as progress:
        progress.update(10)
    assert progress.done == 10


def test_a_bar_on_a_terminal():
    out = Terminal()
    with Progress(4, "embedding", "doc", ProgressOptions(stream=out)) as progress:
        progress.update(1)
        progress.update(3)
    text = out.getvalue()
    assert "embedding" in text and "4/4" in text and "\r" in text and "|" in text


def test_ingest_progress_moves_with_every_embedded_batch(embedded_store, tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_store.embedder, "batch_size", 4)
    kb = write_kb(tmp_path)
    out = io.StringIO()
    report = ingest_paths(embedded_store, [kb], progress=ProgressOptions(stream=out, interval=0))
    assert report.ok and report.embedded > 8
    counts = [
        int(m.group(1)) for m in re.finditer(r"^embedding and writing: (\d+)/(\d+) docs \(", out.getvalue(), re.M)
    ]
    assert len(counts) == math.ceil(report.embedded / 4)  # one update per batch of 4 texts
    assert counts == sorted(set(counts)) and counts[-1] == report.added
    assert all(b - a <= 4 for a, b in zip([0] + counts, counts))  # no document appears in two batches' counts
    assert re.search(r"^reading: 4/4 files done in ", out.getvalue(), re.M)


def test_backfill_reports_per_batch_and_draws_no_bar_off_a_terminal(tmp_path, local_embedder, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    with EngramMirror(data / "mirror.db", MODEL, batch_size=100) as mirror:
        mirror.upsert(
            [
                {
                    "id": f"m{i:03d}",
                    "text": f"memory {i} about {['tea', 'trains', 'rain'][i % 3]}",
                    "metadata": {
                        "type": "memory",
                        "timestamp": TS,
                        "source": "chat",
                        "scope": "global",
                        "importance": 3,
                        "tags": [],
                    },
                }
                for i in range(150)
            ]
        )
        out = io.StringIO()
        assert mirror.backfill(local_embedder.embed_documents, progress=ProgressOptions(stream=out, interval=0)) == 150
        lines = out.getvalue().splitlines()
        assert [line.split(" (")[0] for line in lines[:2]] == [
            f"backfill {MODEL}: 100/150 memories",
            f"backfill {MODEL}: 150/150 memories",
        ]
        mirror.upsert(
            [
                {
                    "id": "late",
                    "text": "a late memory about tea",
                    "metadata": {
                        "type": "memory",
                        "timestamp": TS,
                        "source": "chat",
                        "scope": "global",
                        "importance": 3,
                        "tags": [],
                    },
                }
            ]
        )

    monkeypatch.setenv("BRAIN_DATA_DIR", str(data))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    result = CliRunner().invoke(cli, ["mirror", "backfill"])  # stderr is not a terminal here
    assert result.exit_code == 0, result.stderr
    assert "embedded 1 document;" in result.stdout
    assert result.stderr == ""  # no tqdm bar (and the job was shorter than a log interval)
