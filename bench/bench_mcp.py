#!/usr/bin/env python
"""Benchmark of the MCP ``recall`` tool: round-trip p50/p95 over stdio and streamable HTTP vs the library call.

    .venv/bin/python bench/bench_mcp.py [--n 10000] [--queries 200] [--out bench/MCP_RESULTS.md]

Builds the chat-shaped corpus of ``bench_context.py`` (precomputed 384-d vectors recorded as the local
model's, so that a real ``brain mcp`` opens the store), then, in this one run and on the same distinct
queries (entity cycling None / alice):

1. in process: ``RagStore.retrieve_memories`` on a freshly opened Brain (the real local model embeds
   each query), the call every ``recall`` makes;
2. ``brain mcp`` as a subprocess over stdio, driven by the MCP SDK's client (``call_tool("recall")``);
3. ``brain mcp --http`` as a subprocess, driven by the SDK's streamable HTTP client.

Each mode starts cold (its own process or Brain) and first answers a few warm-up queries that are not
timed. The overhead is what MCP adds to the library call: JSON-RPC framing, the SDK's argument validation
and result serialisation, the transport, and (stdio/HTTP) a thread hop per call. Two cores serve the
client and the server alike. Prints Markdown and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.chdir(ROOT)

from bench_context import BATCH, SEED, make_docs, percentiles  # noqa: E402
from bench_http import AsLocalModel, free_port, wait_until_serving  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

import brain  # noqa: E402
from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402

WARMUP = 5
TOPICS = ("my trip to Lisbon", "the dentist appointment", "Bob's birthday", "the budget for June",
          "what I like to cook", "the running plan", "my sister's wedding", "the new job")


def queries(n: int, start: int = 0) -> list[tuple[str, str | None]]:
    return [(f"What do you remember about {TOPICS[i % len(TOPICS)]}? (query {i})", (None, "alice")[i % 2])
            for i in range(start, start + n)]


def server_env(data_dir: Path) -> dict[str, str]:
    return {**os.environ, "BRAIN_DATA_DIR": str(data_dir), "BRAIN_SUMMARIZER": "extractive",
            "PYTHONPATH": str(ROOT)}


def library(settings: Settings, timed: list[tuple[str, str | None]]) -> list[float]:
    with brain.open(settings, start_worker=False) as b:
        for text, entity in queries(WARMUP, start=10_000):
            b.store.retrieve_memories(text, entity=entity)
        latencies = []
        for text, entity in timed:
            t = time.perf_counter()
            b.store.retrieve_memories(text, entity=entity)
            latencies.append(time.perf_counter() - t)
    return latencies


async def drive(session: ClientSession, timed: list[tuple[str, str | None]]) -> list[float]:
    await session.initialize()

    async def recall(text: str, entity: str | None) -> None:
        result = await session.call_tool("recall", {"query": text, **({"entity": entity} if entity else {})})
        if result.is_error:
            raise RuntimeError(f"recall failed: {result.content}")

    for text, entity in queries(WARMUP, start=10_000):
        await recall(text, entity)
    latencies = []
    for text, entity in timed:
        t = time.perf_counter()
        await recall(text, entity)
        latencies.append(time.perf_counter() - t)
    return latencies


async def over_stdio(data_dir: Path, timed: list[tuple[str, str | None]]) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "brain.shells.cli", "mcp"], env=server_env(data_dir),
                                   cwd=data_dir.parent)
    with open(data_dir.parent / "stdio.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                return await drive(session, timed)


async def over_http(url: str, timed: list[tuple[str, str | None]]) -> list[float]:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            return await drive(session, timed)


def start_http(data_dir: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "brain.shells.cli", "mcp", "--http", "--port", str(port)],
                            env=server_env(data_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=data_dir.parent)
    return wait_until_serving(proc, f"http://127.0.0.1:{port}/mcp", "brain mcp --http")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="documents in the store")
    parser.add_argument("--queries", type=int, default=200, help="timed recall calls per mode")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "MCP_RESULTS.md")
    args = parser.parse_args()
    dim = 384

    rng = np.random.default_rng(SEED)
    docs, _ = make_docs(args.n, dim, rng)
    counts: dict[str, int] = {}
    for d in docs:
        counts[d["type"]] = counts.get(d["type"], 0) + 1
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    data_dir = tmp / "data"
    timed = queries(args.queries)
    try:
        settings = Settings(data_dir=data_dir, summarizer="extractive")
        store = open_store(settings, embedder=AsLocalModel(np.zeros((1, dim), dtype=np.float32)))
        for s in range(0, len(docs), BATCH):
            store.upsert_docs(docs[s : s + BATCH])
        store.close()
        del docs

        results: dict[str, list[float]] = {"library": library(settings, timed)}
        results["stdio"] = asyncio.run(over_stdio(data_dir, timed))
        port = free_port()
        proc = start_http(data_dir, port)
        try:
            results["http"] = asyncio.run(over_http(f"http://127.0.0.1:{port}/mcp", timed))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    base50, _ = percentiles(results["library"])  # milliseconds
    mix = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
    lines = [
        "# MCP `recall` round trip vs the library call",
        "",
        f"- machine: {os.cpu_count()} cores (client and server share them), load average "
        f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} at the end; Python {platform.python_version()}",
        f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {args.n:,} documents ({mix}), 384-d; "
        f"{args.queries} distinct queries per mode after {WARMUP} warm-up ones; entity cycles None/alice",
        "- every query is embedded by the real local model in the serving process (one embed_query per call)",
        "- command: `.venv/bin/python bench/bench_mcp.py"
        + (f" --n {args.n}" if args.n != 10_000 else "") + (f" --queries {args.queries}" if args.queries != 200 else "")
        + "`",
        "",
        "| | p50 | p95 | p50 overhead vs library | p50 ratio |",
        "|---|---|---|---|---|",
    ]
    names = {"library": "library, `retrieve_memories` in process", "stdio": "`brain mcp` over stdio (SDK client)",
             "http": "`brain mcp --http`, streamable HTTP (SDK client)"}
    for mode, samples in results.items():
        p50, p95 = percentiles(samples)
        overhead = "—" if mode == "library" else f"{p50 - base50:+.2f} ms"
        lines.append(f"| {names[mode]} | {p50:.2f} ms | {p95:.2f} ms | {overhead} | {p50 / base50:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
