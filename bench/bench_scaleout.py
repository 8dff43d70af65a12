#!/usr/bin/env python
"""Benchmark of several processes on one Chroma server: the change feed and ``brain serve --workers N``.

    .venv/bin/python bench/bench_scaleout.py [--n 20000] [--requests 240] [--out bench/SCALEOUT_RESULTS.md]

One `chroma run` server on loopback serves every part, in this one run:

(a) propagation lag: two `brain serve` processes on one collection (the default feed interval); a memory
    written through one (POST /v1/memories) is searched for on the other (GET /v1/memories/search, served
    from its in-process index) every 10 ms until it shows; the same for its in-place edit (PATCH), for its
    delete with a new memory right after (the collection's size does not move) and for a delete
    (bench/bench_propagation.py measures the same between two library processes, 200 of each);
(b) ``POST /v1/context`` throughput with ``brain serve --workers`` 1, 2 and 4 (and each worker's CPU seconds,
    which show how the client's kept-alive connections were spread over the workers) on the chat-shaped corpus of
    ``bench_context.py`` (``--n`` documents, precomputed 384-d vectors recorded as the local model's), 16
    requests in flight, every message distinct and embedded by the real local model;
(c) cold start from the index snapshot vs a rebuild from Chroma (``--cold-n`` documents, 768-d), on the
    Chroma server and on the embedded store: ``run`` of ``bench/scaleout_cold_start.py``, each start in
    a fresh process;
(d) the feed's cost on writes: ``upsert_docs`` in batches of 1000 into a store with the feed, a store
    without it, and raw ``col.upsert`` (three collections of the same server, batch by batch in turn),
    and the latency of a one-memory ``upsert_docs`` with and without the feed.

Two cores serve everything (Chroma, the workers, the client): more workers than cores only add
contention. Prints one Markdown table and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.chdir(ROOT)

import chromadb  # noqa: E402
from bench_context import BATCH, SEED, conversation_owner, make_docs, percentiles  # noqa: E402
from bench_http import AsLocalModel, free_port, load, message  # noqa: E402
from bench_store import UPSERT_BATCH, PrecomputedEmbedder, make_corpus  # noqa: E402

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.store import Store  # noqa: E402
from tests.conftest import start_chroma_server, stop  # noqa: E402

WORKERS = (1, 2, 4)
IN_FLIGHT = 16
LAG_SAMPLES = 30
ONE_WRITE_SAMPLES = 100
COLD_START = ROOT / "bench" / "scaleout_cold_start.py"


# ---- brain serve as a subprocess --------------------------------------------------------------------------
class Served:
    """`brain serve --workers N` on ``collection`` of the Chroma server at ``url``, ready once every worker
    has finished its start-up (counted in its log)."""

    def __init__(self, tmp: Path, url: str, collection: str, workers: int = 1, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        data = tmp / f"data-{self.port}"
        data.mkdir()
        settings_env = {"BRAIN_CHROMA_URL": url, "BRAIN_COLLECTION": collection, "BRAIN_DATA_DIR": str(data),
                        "BRAIN_SUMMARIZER": "extractive", "RAG_SUMMARY_EVERY_N": "1000",
                        "BRAIN_MIRROR_ENABLED": "false", **env}
        t0 = time.perf_counter()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "brain.shells.cli", "serve", "--workers", str(workers), "--port", str(self.port)],
                env={**os.environ, "PYTHONPATH": str(ROOT), **settings_env}, cwd=data,
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 900
        while self.log.read_text(errors="replace").count("Application startup complete") < workers:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"brain serve did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)
        self.started = time.perf_counter() - t0

    def worker_pids(self, workers: int) -> list[int]:
        """The processes that serve requests: this one, or uvicorn's worker processes under it (Linux)."""
        if workers == 1:
            return [self.proc.pid]
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        pids = [int(p) for p in children.read_text().split()] if children.is_file() else []
        # uvicorn's multiprocessing also starts a resource tracker: the workers are the busy ones
        return sorted(pids, key=cpu_seconds, reverse=True)[:workers]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- (a) propagation lag ----------------------------------------------------------------------------------
LAG_KINDS = ("new memory", "in-place edit", "count-neutral delete", "delete")


def propagation_lag(tmp: Path, url: str) -> tuple[dict[str, list[float]], float]:
    """Seconds from a write answered by one process to its visibility on the other, per kind of write:
    a new memory, an in-place edit (PATCH: same id, new text), a delete with a new memory right after
    (the collection's size does not move) and a plain delete."""
    collection = f"lag-{uuid.uuid4().hex[:8]}"
    writer = Served(tmp, url, collection)
    reader = Served(tmp, url, collection)
    interval = Settings().feed_interval_seconds
    lags: dict[str, list[float]] = {kind: [] for kind in LAG_KINDS}
    try:
        with httpx.Client(base_url=writer.url, timeout=60) as a, httpx.Client(base_url=reader.url, timeout=60) as b:
            b.get("/v1/memories/search", params={"q": "warm up"})  # the reader's index built, its model loaded

            def shows(text: str, memory: str) -> bool:
                hits = b.get("/v1/memories/search", params={"q": text, "k": 3}).json()["results"]
                return any(h["id"] == memory and h["text"] == text for h in hits)

            def until(kind: str, check) -> None:
                start = time.perf_counter()
                while not check():
                    if time.perf_counter() - start > 60:
                        raise RuntimeError(f"{kind} not seen after 60 s")
                    time.sleep(0.01)
                lags[kind].append(time.perf_counter() - start)

            def pause(i: int) -> None:
                time.sleep(0.05 * (i % 7))  # writes land at every phase of the reader's interval

            for i in range(LAG_SAMPLES):
                tag = uuid.uuid4().hex[:6]
                text = f"bench fact {i}: the {tag} parcel went to locker {i * 7}"
                memory = a.post("/v1/memories", json={"text": text}).json()["id"]
                until("new memory", lambda: shows(text, memory))
                pause(i)
                edited = f"bench fact {i}: the {tag} parcel moved to shelf {i * 11}"
                assert a.patch(f"/v1/memories/{memory}", json={"text": edited}).status_code == 200
                until("in-place edit", lambda: shows(edited, memory))
                pause(i + 3)
                other = f"bench fact {i}: the {tag} bicycle is chained to rack {i * 3}"
                assert a.delete(f"/v1/memories/{memory}").status_code == 200
                replaced = a.post("/v1/memories", json={"text": other}).json()["id"]
                until("count-neutral delete", lambda: not shows(edited, memory) and shows(other, replaced))
                pause(i + 5)
                assert a.delete(f"/v1/memories/{replaced}").status_code == 200
                until("delete", lambda: not shows(other, replaced))
    finally:
        writer.stop()
        reader.stop()
    return lags, interval


# ---- (b) throughput of POST /v1/context --------------------------------------------------------------------
def context_throughput(tmp: Path, url: str, n: int, requests: int) -> tuple[dict[int, tuple], dict]:
    """{workers: (req/s, p50 ms, p95 ms, seconds to ready, [CPU seconds of each worker in the timed part])}."""
    collection = f"ctx-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(SEED)
    docs, conversations = make_docs(n, 384, rng)
    settings = Settings(data_dir=tmp / "ingest", chroma_url=url, collection=collection)
    t0 = time.perf_counter()
    with open_store(settings, embedder=AsLocalModel(np.zeros((1, 384), dtype=np.float32)), mirror=False) as store:
        for s in range(0, len(docs), BATCH):
            store.upsert_docs(docs[s : s + BATCH])
        counts = store.stats()["by_type"]
    ingest = time.perf_counter() - t0
    del docs
    picked = [conversations[int(j)] for j in rng.choice(len(conversations), size=min(50, len(conversations)),
                                                         replace=False)]
    bodies = [{"conversation_id": picked[i % len(picked)], "user_message": message(i),
               "entity": conversation_owner(picked[i % len(picked)])} for i in range(requests * len(WORKERS))]
    rows: dict[int, tuple] = {}
    for k, workers in enumerate(WORKERS):
        served = Served(tmp, url, collection, workers)
        try:
            warm = [{"conversation_id": c, "user_message": f"warm up {i}", "entity": conversation_owner(c)}
                    for i, c in enumerate(picked * 2 * workers)]
            asyncio.run(warm_every_worker(served.url, warm))
            pids = served.worker_pids(workers)
            before = [cpu_seconds(p) for p in pids]
            latencies, wall = asyncio.run(load(served.url, bodies[k * requests : (k + 1) * requests], IN_FLIGHT))
            spent = [cpu_seconds(p) - b for p, b in zip(pids, before)]
            p50, p95 = percentiles(latencies)
            rows[workers] = (requests / wall, p50, p95, served.started, spent)
        finally:
            served.stop()
    return rows, {"n": n, "counts": counts, "ingest": ingest}


async def warm_every_worker(url: str, bodies: list[dict]) -> None:
    """Send ``bodies`` on a new connection each, so that they spread over the workers (a kept-alive
    connection stays with one): every worker loads its model and builds its indexes before the timing."""
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=300, limits=limits, headers={"Connection": "close"}) as client:
        pending = list(bodies)

        async def send() -> None:
            while pending:
                response = await client.post(f"{url}/v1/context", json=pending.pop())
                response.raise_for_status()

        await asyncio.gather(*(send() for _ in range(IN_FLIGHT)))


# ---- (d) the feed's cost on writes --------------------------------------------------------------------------
def feed_cost(tmp: Path, url: str, n: int) -> dict[str, Any]:
    corpus = make_corpus(n, 1, 384)
    embedder = PrecomputedEmbedder(corpus.query_vectors)

    def settings(name: str) -> Settings:
        return Settings(data_dir=tmp / name, chroma_url=url, collection=f"{name}-{uuid.uuid4().hex[:8]}")

    fed = open_store(settings("fed"), embedder=embedder, mirror=False)  # the change feed attached
    bare = Store(settings("bare"), embedder=embedder)  # the same store, opened without the feed
    client = chromadb.HttpClient(host="127.0.0.1", port=int(url.rsplit(":", 1)[1]),
                                 settings=chromadb.Settings(anonymized_telemetry=False))
    raw = client.get_or_create_collection(f"raw-{uuid.uuid4().hex[:8]}", configuration={"hnsw": {"space": "cosine"}},
                                          embedding_function=None)
    spent = dict.fromkeys(("fed", "bare", "raw"), 0.0)
    try:
        for b, s in enumerate(range(0, len(corpus), UPSERT_BATCH)):
            e = s + UPSERT_BATCH
            writes = {"fed": lambda: fed.upsert_docs(corpus.store_docs[s:e]),
                      "bare": lambda: bare.upsert_docs(corpus.store_docs[s:e]),
                      "raw": lambda: raw.upsert(ids=corpus.ids[s:e], embeddings=corpus.vectors[s:e],
                                                documents=corpus.texts[s:e], metadatas=corpus.chroma_metas[s:e])}
            names = list(writes)
            for j in range(len(names)):  # a rotating order: a burst of load slows all three alike
                name = names[(b + j) % len(names)]
                t0 = time.perf_counter()
                writes[name]()
                spent[name] += time.perf_counter() - t0
        one: dict[str, list[float]] = {"fed": [], "bare": []}
        memories = [d for d in corpus.store_docs if d["type"] == "memory"]
        for i in range(ONE_WRITE_SAMPLES):
            doc = {**memories[i % len(memories)], "id": f"one-{i}", "text": f"one memory {i}"}
            for name, store in (("fed", fed), ("bare", bare))[:: 1 if i % 2 else -1]:
                t0 = time.perf_counter()
                store.upsert_docs([doc])
                one[name].append(time.perf_counter() - t0)
    finally:
        fed.close()
        bare.close()
    return {"n": len(corpus), **{f"{k}_rate": len(corpus) / v for k, v in spent.items()},
            **{f"one_{k}": percentiles(v) for k, v in one.items()}}


# ---- (c) cold start, from its own module --------------------------------------------------------------------
def cold_start(n: int, url: str) -> list[tuple[str, ...]] | None:
    """Rows of the table for a cold start on the Chroma server at ``url`` and on the embedded store."""
    if not COLD_START.is_file():
        return None
    spec = importlib.util.spec_from_file_location("scaleout_cold_start", COLD_START)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = []
    for where, chroma_url in (("Chroma server", url), ("embedded", None)):
        rebuild, snapshot, save = module.run(n, chroma_url=chroma_url)
        rows += [
            (f"(c) cold start, {where}: rebuild from Chroma", f"{rebuild['seconds']:.2f} s", rebuild["note"], "1.00",
             "", ""),
            (f"(c) cold start, {where}: index snapshot", f"{snapshot['seconds']:.2f} s",
             f"rebuild {rebuild['seconds']:.2f} s", f"{snapshot['ratio']:.3f}", "<= 0.2x rebuild",
             "yes" if snapshot["ratio"] <= 0.2 and "identically" in snapshot["note"] else "**NO**"),
            (f"(c) index snapshot save, {where}", f"{save['seconds']:.2f} s", save["note"], f"{save['ratio']:.3f}",
             "", ""),
        ]
    return rows


def scaling_note(throughput: dict[int, tuple]) -> str:
    """Where the throughput stops growing: the fewest workers within 10% of the best measured."""
    one, best = throughput[1][0], max(rate for rate, *_ in throughput.values())
    # uvicorn's workers share one listening socket, and an asyncio loop accepts every pending connection
    # when it wakes: the client's kept-alive connections may all land in one worker
    lopsided = [w for w, row in throughput.items() if w > 1 and max(row[4]) > 0.8 * sum(row[4])]
    stops = min(w for w, (rate, *_) in throughput.items() if rate >= 0.9 * best)
    more = [f"{w} workers {throughput[w][0]:.0f} req/s" for w in throughput if w > stops]
    return (f"(b) throughput stops growing at --workers {stops} ({throughput[stops][0]:.0f} req/s, "
            f"{throughput[stops][0] / one:.2f}x one worker) on these {os.cpu_count()} cores, which the Chroma "
            f"server and the client share"
            + (f"; beyond it: {', '.join(more)}" if more else "")
            + (f". With --workers {', '.join(map(str, lopsided))} one worker did over 80% of the work: the "
               f"{IN_FLIGHT} kept-alive connections of the client were accepted by one worker" if lopsided else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000, help="documents in the store of (b)")
    parser.add_argument("--upserts", type=int, default=10_000, help="documents upserted in (d)")
    parser.add_argument("--cold-n", type=int, default=100_000, help="documents in the store of (c)")
    parser.add_argument("--requests", type=int, default=240, help="POST /v1/context requests per worker count")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "SCALEOUT_RESULTS.md")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    (tmp / "chroma").mkdir()
    chroma, url = start_chroma_server(tmp / "chroma")
    try:
        lags, interval = propagation_lag(tmp, url)
        throughput, corpus = context_throughput(tmp, url, args.n, args.requests)
        cost = feed_cost(tmp, url, args.upserts)
        cold = cold_start(args.cold_n, url)
    finally:
        stop(chroma)
    shutil.rmtree(tmp, ignore_errors=True)

    def ok(good: bool) -> str:
        return "yes" if good else "**NO**"

    limit = 2000 * interval
    one_rate = throughput[1][0]
    rows = []
    for kind, samples in lags.items():
        p50, p95 = percentiles(samples)
        rows.append((f"(a) lag, {kind}: written through one `brain serve` -> as written on another",
                     f"p50 {p50:.0f} ms, p95 {p95:.0f} ms", f"feed interval {interval:g} s",
                     f"p95 {p95 / (1000 * interval):.2f}x interval", f"p95 <= {limit:.0f} ms", ok(p95 <= limit)))
    for workers, (rate, p50, p95, started, spent) in throughput.items():
        split = " / ".join(f"{c:.1f}" for c in spent)
        rows.append((f"(b) POST /v1/context, --workers {workers}, {IN_FLIGHT} in flight",
                     f"{rate:.0f} req/s (p50 {p50:.0f} ms, p95 {p95:.0f} ms; every worker ready {started:.0f} s "
                     f"after launch; CPU s per worker in the timed part: {split})", f"1 worker {one_rate:.0f} req/s",
                     f"{rate / one_rate:.2f}x", "", ""))
    if cold is None:
        rows.append(("(c) cold start: snapshot vs rebuild from Chroma", "skipped: bench/scaleout_cold_start.py is "
                     "not there", "", "", "snapshot <= 0.2x rebuild", ""))
    else:
        rows += cold
    rows += [
        (f"(d) upsert_docs with the feed, batches of {UPSERT_BATCH} (docs/s)", f"{cost['fed_rate']:,.0f}",
         f"raw col.upsert {cost['raw_rate']:,.0f}", f"{cost['fed_rate'] / cost['raw_rate']:.3f}", ">= 0.8",
         ok(cost["fed_rate"] >= 0.8 * cost["raw_rate"])),
        (f"(d) upsert_docs without the feed, batches of {UPSERT_BATCH} (docs/s)", f"{cost['bare_rate']:,.0f}",
         f"raw col.upsert {cost['raw_rate']:,.0f}", f"{cost['bare_rate'] / cost['raw_rate']:.3f}", "", ""),
        ("(d) one-memory upsert_docs, with the feed", f"p50 {cost['one_fed'][0]:.1f} ms, p95 {cost['one_fed'][1]:.1f} ms",
         f"without: p50 {cost['one_bare'][0]:.1f} ms, p95 {cost['one_bare'][1]:.1f} ms",
         f"p50 +{cost['one_fed'][0] - cost['one_bare'][0]:.1f} ms", "", ""),
    ]
    load_avg = os.getloadavg()
    lines = [
        "# Several processes on one Chroma server (bench/bench_scaleout.py)",
        "",
        f"- machine: {os.cpu_count()} cores shared by the Chroma server, every worker and the client; load "
        f"average {load_avg[0]:.1f}/{load_avg[1]:.1f}/{load_avg[2]:.1f} at "
        f"the end; Python {platform.python_version()}; chromadb {chromadb.__version__} (`chroma run` on loopback)",
        f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. (a) {LAG_SAMPLES} cycles through one `brain serve`: "
        f"a new memory, its in-place edit (PATCH), its delete with a new memory right after (the size does not move), "
        f"that one's delete; each searched for on another `brain serve` every 10 ms until it shows as written "
        f"(bench/bench_propagation.py does the same between two library processes). (b) "
        f"{corpus['n']:,} documents ({', '.join(f'{k} {v:,}' for k, v in corpus['counts'].items())}), ingested in "
        f"{corpus['ingest']:.0f} s; {args.requests} distinct messages per worker count, each embedded by the real "
        f"local model. (d) {cost['n']:,} documents of bench_store's corpus (384-d), the three writers in turn batch "
        f"by batch; {ONE_WRITE_SAMPLES} one-memory writes each, alternating",
        "",
        "| part | measured | reference (same run) | ratio | target | ok |",
        "|---|---|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        scaling_note(throughput),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
