#!/usr/bin/env python
"""Benchmark of ``POST /v1/context`` over HTTP with 1, 8 and 32 concurrent clients.

    .venv/bin/python bench/bench_http.py [--n 100000] [--requests 240] [--out bench/HTTP_RESULTS.md]

Builds the chat-shaped corpus of ``bench_context.py`` (precomputed 384-d vectors recorded as the local
model's, so that a real ``brain serve`` opens the store), then, in this one run:

1. in process: ``ChatMemory.build_context`` with the real local model embedding each (distinct) message,
   and one unfiltered raw ``col.query`` on the same collection, as references;
2. over HTTP: ``brain serve`` in its own process (uvicorn, one process as the embedded store requires),
   and an asyncio httpx client here sending distinct messages with 1, 8 and 32 requests in flight.

The server embeds every message with the real model, so each request pays for one ``embed_query``.
Two cores serve everything (client included): concurrency buys overlap of I/O and the GIL-free parts
(ONNX, SIMD, Chroma's Rust core), not parallel Python. Prints Markdown and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.chdir(ROOT)

from bench_context import BATCH, SEED, conversation_owner, make_docs, percentiles  # noqa: E402
from bench_store import PrecomputedEmbedder  # noqa: E402

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.chat import ChatMemory  # noqa: E402
from brain.providers.summarizers import ExtractiveSummarizer  # noqa: E402
from brain.store.indexes import refresh_index
from brain.wiring import get_embedder  # noqa: E402

CONCURRENCY = (1, 8, 32)


class AsLocalModel(PrecomputedEmbedder):
    """Writes the corpus under the local model's name, so the served store opens with the real model."""

    name = "local/minilm-l6-v2"


def message(i: int) -> str:
    topics = ("my trip to Lisbon", "the dentist appointment", "Bob's birthday", "the budget for June",
              "what I like to cook", "the running plan", "my sister's wedding", "the new job")
    return f"Can you remind me what we said about {topics[i % len(topics)]}? (message {i})"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(data_dir: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "BRAIN_DATA_DIR": str(data_dir), "BRAIN_SUMMARIZER": "extractive",
           "RAG_SUMMARY_EVERY_N": "1000"}
    proc = subprocess.Popen([sys.executable, "-m", "brain.shells.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=data_dir.parent)
    return wait_until_serving(proc, f"http://127.0.0.1:{port}/v1/health", "brain serve",
                              ready=lambda response: response.status_code == 200)


def wait_until_serving(proc: subprocess.Popen, url: str, name: str,
                       ready=lambda response: True) -> subprocess.Popen:
    """``proc`` once ``url`` answers (and ``ready`` accepts the answer); its stderr when it exits first."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if ready(httpx.get(url, timeout=5)):
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{name} did not start")


async def load(url: str, bodies: list[dict], concurrency: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)

    async def worker(client: httpx.AsyncClient) -> None:
        while True:
            try:
                body = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            t = time.perf_counter()
            response = await client.post(f"{url}/v1/context", json=body)
            latencies.append(time.perf_counter() - t)
            if response.status_code != 200:
                raise RuntimeError(f"{response.status_code}: {response.text[:300]}")

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return latencies, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="documents in the store")
    parser.add_argument("--requests", type=int, default=240, help="requests per concurrency level")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "HTTP_RESULTS.md")
    args = parser.parse_args()
    dim = 384

    rng = np.random.default_rng(SEED)
    docs, conversations = make_docs(args.n, dim, rng)
    tmp = Path(tempfile.mkdtemp(prefix="bench-http-"))
    data_dir = tmp / "data"
    lines: list[str] = []
    try:
        settings = Settings(data_dir=data_dir, summary_every_n=1000, summarizer="extractive")
        store = open_store(settings, embedder=AsLocalModel(np.zeros((1, dim), dtype=np.float32)))
        t0 = time.perf_counter()
        for s in range(0, len(docs), BATCH):
            store.upsert_docs(docs[s : s + BATCH])
        ingest = time.perf_counter() - t0
        store.close()
        del docs

        picked = [conversations[int(j)] for j in rng.choice(len(conversations), size=min(50, len(conversations)),
                                                             replace=False)]
        n_in_process = min(args.requests, 200)
        bodies = [{"conversation_id": picked[i % len(picked)], "user_message": message(i),
                   "entity": conversation_owner(picked[i % len(picked)])} for i in range(n_in_process + args.requests * len(CONCURRENCY))]

        # 1. in process, the same store with the real model
        store = open_store(settings, embedder=get_embedder(settings))
        chat = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
        refresh_index(store)
        for i, conv in enumerate(picked):  # conversations cached and their turn-search index built, as in a service
            chat.build_context(conv, f"warm up {i}")
        vectors = store.embedder.embed_documents([b["user_message"] for b in bodies[:n_in_process]])
        for body in bodies[:10]:
            chat.build_context(body["conversation_id"], "warm-up " + body["user_message"], body["entity"])
        ours, raw = [], []
        for body, vec in zip(bodies[:n_in_process], vectors):
            t = time.perf_counter()
            chat.build_context(body["conversation_id"], body["user_message"], body["entity"])
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.col.query(query_embeddings=[vec], n_results=5, include=["documents", "metadatas", "distances"])
            raw.append(time.perf_counter() - t)
        p50, p95 = percentiles(ours)
        r50, r95 = percentiles(raw)
        counts = store.stats()["by_type"]
        chat.close()
        store.close()

        # 2. over HTTP
        port = free_port()
        t0 = time.perf_counter()
        server = start_server(data_dir, port)
        server_start = time.perf_counter() - t0
        url = f"http://127.0.0.1:{port}"
        rows = []
        try:
            warm = [{"conversation_id": c, "user_message": f"warm up {i}"} for i, c in enumerate(picked)]
            asyncio.run(load(url, warm, 4))  # indexes built, conversations cached, model loaded
            offset = n_in_process
            for concurrency in CONCURRENCY:
                part = bodies[offset : offset + args.requests]
                offset += args.requests
                latencies, wall = asyncio.run(load(url, part, concurrency))
                h50, h95 = percentiles(latencies)
                rows.append((concurrency, h50, h95, len(part) / wall))
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()

        load_avg = os.getloadavg()
        lines += [
            "# build_context over HTTP (POST /v1/context)",
            "",
            f"- machine: {os.cpu_count()} cores (server, its model and the client share them), load average "
            f"{load_avg[0]:.1f}/{load_avg[1]:.1f}/{load_avg[2]:.1f} at the end; Python {platform.python_version()}",
            f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {args.n:,} documents "
            f"({', '.join(f'{k} {v:,}' for k, v in counts.items())}), 384-d; ingested in {ingest:.0f} s; "
            f"`brain serve` healthy {server_start:.1f} s after launch",
            "- every message is distinct and embedded by the real local model (one embed_query per request, in "
            "process and over HTTP alike); default RAG_* settings; each conversation asked for by the entity that owns it (None/None/alice..eve)",
            "",
            "| | p50 | p95 | throughput | reference (same run) | p50 ratio |",
            "|---|---|---|---|---|---|",
            f"| in process, build_context incl. embedding | {p50:.2f} ms | {p95:.2f} ms | {1000 / p50:.0f}/s (1 thread) "
            f"| raw col.query unfiltered p50 {r50:.2f} ms (vector given) | {p50 / r50:.2f} |",
        ]
        for concurrency, h50, h95, rps in rows:
            lines.append(f"| HTTP, {concurrency} concurrent client{'s' if concurrency > 1 else ''} | {h50:.2f} ms "
                         f"| {h95:.2f} ms | {rps:.0f} req/s | in process p50 {p50:.2f} ms | {h50 / p50:.2f} |")
        lines.append("")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
