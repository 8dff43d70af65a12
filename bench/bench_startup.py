#!/usr/bin/env python
"""Start-up benchmark: how long each way of starting brain takes, against Chroma itself, in one run.

    .venv/bin/python bench/bench_startup.py [--runs 7] [--out bench/STARTUP_RESULTS.md]

Every figure is a whole new process, timed from spawn to the moment named, the median of ``--runs``
trials taken in turn (baseline and brain alternate, so a busy machine slows both alike):

- ``brain --help`` against ``python -c "import chromadb"`` (target <= 0.3x);
- a read command, ``brain memory list``, on a store of 500 memories, against a script that opens the same
  embedded Chroma store and lists its memories with Chroma's own client (target <= 1.3x);
- ``brain serve`` until ``GET /v1/health`` answers, and ``brain mcp`` (stdio) until it answers the MCP
  ``initialize`` request, each against ``import chromadb`` (target <= 3x).

Prints one Markdown table and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
BRAIN = [PY, "-m", "brain.shells.cli"]
NOBODY = "http://127.0.0.1:9"  # nothing answers there: no summariser or Ollama embedder is reached

LIST_WITH_CHROMA = """
import sys, chromadb
client = chromadb.PersistentClient(path=sys.argv[1], settings=chromadb.Settings(anonymized_telemetry=False))
col = client.get_collection("conversations")
page = col.get(where={"type": "memory"}, include=["documents", "metadatas"], limit=100)
for text in page["documents"]:
    print(text)
"""


def env(project: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OLLAMA_HOST": NOBODY, "BRAIN_SUMMARY_RETRIES": "0",
            "XDG_CONFIG_HOME": str(project / "xdg-config"), "XDG_DATA_HOME": str(project / "xdg-data")}


def timed_run(cmd: list[str], project: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=project, env=env(project), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_ready(project: Path) -> float:
    port = free_port()
    start = time.perf_counter()
    proc = subprocess.Popen([*BRAIN, "--data-dir", str(project / "data"), "serve", "--port", str(port)],
                            cwd=project, env=env(project), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code == 200:
                    return time.perf_counter() - start
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"brain serve exited: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.01)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def mcp_initialized(project: Path) -> float:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench", "version": "0"}}}
    start = time.perf_counter()
    proc = subprocess.Popen([*BRAIN, "--data-dir", str(project / "data"), "mcp"], cwd=project, env=env(project),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        line = proc.stdout.readline()
        elapsed = time.perf_counter() - start
        if b'"result"' not in line:
            raise RuntimeError(f"brain mcp did not initialize: {line[:500]!r}")
        return elapsed
    finally:
        proc.kill()
        proc.wait(timeout=30)


def build_store(project: Path, memories: int) -> None:
    sys.path.insert(0, str(ROOT))
    from brain.app.rag_store import RagStore
    from brain.config import Settings

    (project / "config").mkdir(parents=True, exist_ok=True)
    (project / "config" / "defaults.env").touch()
    settings = Settings(data_dir=project / "data", _project_dir=project)
    with RagStore(settings) as store:
        store.upsert_docs([{"text": f"memory number {i}: the user likes item {i}", "type": "memory",
                            "importance": 1 + i % 5}
                           for i in range(memories)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--memories", type=int, default=500)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "STARTUP_RESULTS.md")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        build_store(project, args.memories)
        chroma_path = str((project / "data" / "chroma").resolve())
        trials = {
            "import chromadb": lambda: timed_run([PY, "-c", "import chromadb"], project),
            "brain --help": lambda: timed_run([*BRAIN, "--help"], project),
            "Chroma: open the store, list memories": lambda: timed_run([PY, "-c", LIST_WITH_CHROMA, chroma_path],
                                                                        project),
            "brain memory list": lambda: timed_run([*BRAIN, "--data-dir", str(project / "data"), "memory", "list",
                                                    "--limit", "100"], project),
            "brain serve: health answers": lambda: serve_ready(project),
            "brain mcp: initialize answered": lambda: mcp_initialized(project),
        }
        times: dict[str, list[float]] = {name: [] for name in trials}
        for name, trial in trials.items():  # one warm-up each: the OS file cache, not brain, is measured first
            trial()
        for _ in range(args.runs):
            for name, trial in trials.items():
                times[name].append(trial())

    median = {name: statistics.median(values) for name, values in times.items()}
    rows = [
        ("brain --help", "import chromadb", 0.3),
        ("brain memory list", "Chroma: open the store, list memories", 1.3),
        ("brain serve: health answers", "import chromadb", 3.0),
        ("brain mcp: initialize answered", "import chromadb", 3.0),
    ]
    lines = [f"# Start-up ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, {os.cpu_count()} cores, "
             f"median of {args.runs} runs, {args.memories} memories)", "",
             "| command | median s (min-max) | baseline | baseline median s | ratio | target |",
             "|---|---|---|---|---|---|"]
    for name, base, target in rows:
        ratio = median[name] / median[base]
        lines.append(f"| `{name}` | {median[name]:.3f} ({min(times[name]):.3f}-{max(times[name]):.3f}) | {base} | "
                     f"{median[base]:.3f} | {ratio:.2f}x | <= {target}x {'ok' if ratio <= target else 'MISSED'} |")
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()
