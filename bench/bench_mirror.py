#!/usr/bin/env python
"""Benchmark of the Engram-compatible SQLite mirror, every ratio against a baseline measured in the same run.

    .venv/bin/python bench/bench_mirror.py [--n 100000] [--dim 768] [--queries 200] [--k 10]
                                           [--store-n N] [--engram-queries 40] [--out bench/MIRROR_RESULTS.md]

1. Mirror writes: ``EngramMirror.upsert`` of N memories (batches of 1000, 768-d vectors) against a raw
   ``sqlite3`` ``executemany`` of the same rows into the same schema (FTS triggers, access log, v2 BLOBs),
   without validation or mapping.
2. Sync: ``sync_mirror`` from a real RagStore (embedded Chroma) of ``--store-n`` memories into an empty
   mirror, then again with nothing to do; against reading the same pages from Chroma alone.
3. Recall: ``EngramMirror.recall`` p50 against numpy brute force on the same cached matrix
   (``M @ q`` + ``argpartition``), methods taking turns query by query; exactness of the top-k.
4. engramai's own recall (``engram.Memory.recall``: FTS5 candidates + ACT-R scoring; its vector search
   cannot read protocol-v2 BLOBs) on the same file, next to ours (vector and keyword).

Prints Markdown tables and writes the same text to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.mirror import (  # noqa: E402
    EngramMirror,
    schema,  # noqa: E402
    sync_mirror,
)
from brain.providers.embeddings.base import Embedder, Kind  # noqa: E402

SEED = 4242
TOPICS = 200
BATCH = 1000
WARMUP = 5
DAY = 86400.0
NOW = 1_760_000_000.0
SCOPES = ("global",) * 7 + ("entity:alice", "entity:bob", "entity:carol")
WORDS_PER_TEXT = 9
VOCABULARY = 3000


# ---- data -----------------------------------------------------------------------------------------
def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def make_vectors(rng: np.random.Generator, n: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Clustered unit vectors: one of TOPICS centroids plus noise; returns (vectors, centroids)."""
    centroids = _unit(rng.standard_normal((TOPICS, dim)))
    topic = rng.integers(0, TOPICS, size=n)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 20000):
        end = min(n, start + 20000)
        noise = rng.standard_normal((end - start, dim)).astype(np.float32) * (0.9 / np.sqrt(dim))
        out[start:end] = _unit(centroids[topic[start:end]] + noise)
    return out, centroids


def make_words(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=rng.integers(4, 9))) for _ in range(VOCABULARY)]


def make_texts(rng: np.random.Generator, n: int, words: list[str]) -> list[str]:
    p = 1.0 / np.arange(1, VOCABULARY + 1)  # Zipf: a few common words, a long tail
    p /= p.sum()
    picks = rng.choice(VOCABULARY, size=(n, WORDS_PER_TEXT), p=p)
    return [f"memory {i}: " + " ".join(words[j] for j in row) for i, row in enumerate(picks)]


def make_metadata(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    epochs = NOW - rng.uniform(0, 730 * DAY, size=n)
    out = []
    for i in range(n):
        ts = datetime.fromtimestamp(float(int(epochs[i])), tz=UTC)
        scope = SCOPES[i % len(SCOPES)]
        meta = {"type": "memory", "timestamp": ts.isoformat(), "ts_epoch": ts.timestamp(), "source": "chat",
                "scope": scope, "importance": int(1 + i % 5), "tags": ["work", "food", "travel"][: i % 4]}
        if scope != "global":
            meta["entity"] = scope[7:]
        out.append(meta)
    return out


# ---- measurement helpers --------------------------------------------------------------------------------
@dataclass
class Row:
    metric: str
    measured: str
    reference: str = ""
    ratio: str = ""
    target: str = ""
    ok: str = ""


def table(rows: Sequence[Row]) -> str:
    lines = ["| metric | measured | reference | ratio | target | ok? |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.metric} | {r.measured} | {r.reference} | {r.ratio} | {r.target} | {r.ok} |" for r in rows]
    return "\n".join(lines)


def _check(ok: bool) -> str:
    return "yes" if ok else "**NO**"


def interleaved(methods: dict[str, Callable[[int], Any]], n: int) -> dict[str, np.ndarray]:
    """Milliseconds per call; methods take turns query by query (rotating who goes first)."""
    names = list(methods)
    for name in names:
        for i in range(min(WARMUP, n)):
            methods[name](i)
    out = {name: np.empty(n) for name in names}
    for i in range(n):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            t0 = time.perf_counter()
            methods[name](i)
            out[name][i] = time.perf_counter() - t0
    return {name: v * 1e3 for name, v in out.items()}


def p50(x: np.ndarray) -> float:
    return float(np.percentile(x, 50))


def machine_info() -> str:
    cpu = platform.processor()
    if Path("/proc/cpuinfo").exists():
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), cpu)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    from importlib.metadata import version

    import engram  # noqa: F401

    return (f"{cores} cores ({cpu}), load average {load} at start; Python {platform.python_version()}, "
            f"numpy {np.__version__}, SQLite {sqlite3.sqlite_version}, engramai {version('engramai')}, "
            f"chromadb {version('chromadb')}")


# ---- 1. writes ----------------------------------------------------------------------------------------------
def raw_insert(path: Path, ids, texts, metas, vectors, model: str) -> float:
    """The floor: the same rows into the same schema with plain executemany, no validation or mapping."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    for statement in schema.TABLES + schema.EMBEDDINGS_V2 + schema.INDEXES + schema.FTS:
        conn.execute(statement)
    t0 = time.perf_counter()
    for start in range(0, len(ids), BATCH):
        end = start + BATCH
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO memories (id, content, memory_type, layer, created_at, importance, source, namespace, metadata) "
            "VALUES (?, ?, 'factual', 'working', ?, ?, 'chat', ?, ?)",
            [(ids[i], texts[i], metas[i]["ts_epoch"], metas[i]["importance"] / 5,
              "default" if metas[i]["scope"] == "global" else metas[i]["scope"], json.dumps({"brain": metas[i]}))
             for i in range(start, min(end, len(ids)))],
        )
        conn.executemany("INSERT INTO access_log VALUES (?, ?)",
                         [(ids[i], metas[i]["ts_epoch"]) for i in range(start, min(end, len(ids)))])
        conn.executemany("INSERT INTO memory_embeddings VALUES (?, ?, ?, ?, ?)",
                         [(ids[i], model, vectors[i].astype("<f4").tobytes(), vectors.shape[1], "2026-01-01T00:00:00+00:00")
                          for i in range(start, min(end, len(ids)))])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def bench_writes(work: Path, ids, texts, metas, vectors, model: str) -> tuple[list[Row], Path]:
    n = len(ids)
    raw_s = raw_insert(work / "raw.db", ids, texts, metas, vectors, model)
    path = work / "mirror.db"
    mirror = EngramMirror(path, model, batch_size=1000)
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        end = min(n, start + BATCH)
        mirror.upsert([{"id": ids[i], "text": texts[i], "metadata": metas[i], "embedding": vectors[i]}
                       for i in range(start, end)])
    mirror_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        end = min(n, start + BATCH)
        mirror.upsert([{"id": ids[i], "text": texts[i], "metadata": metas[i], "embedding": vectors[i]}
                       for i in range(start, end)])
    again_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    check = mirror.integrity_check()
    check_s = time.perf_counter() - t0
    mirror.close()
    size = path.stat().st_size + sum(p.stat().st_size for p in path.parent.glob(path.name + "-*"))
    rows = [
        Row(f"EngramMirror.upsert, batches of {BATCH} (rows/s)", f"{n / mirror_s:,.0f}",
            f"{n / raw_s:,.0f} raw sqlite3 executemany, same schema", f"{raw_s / mirror_s:.2f}"),
        Row("upsert again, nothing changed (rows/s)", f"{n / again_s:,.0f}", "", ""),
        Row("integrity_check (SQLite + foreign keys + FTS)", f"{check} in {check_s:.1f} s", "", ""),
        Row("file size", f"{size / 2**20:,.0f} MiB", f"{size / n:,.0f} B per memory", ""),
    ]
    return rows, path


# ---- 2. sync from a real store ----------------------------------------------------------------------------
class PrecomputedEmbedder(Embedder):
    """Documents arrive with their vectors; nothing is embedded in this benchmark."""

    def __init__(self, dim: int):
        super().__init__(batch_size=64, cache_size=0)
        self.name = f"bench/precomputed-{dim}"
        self._dim = dim

    @property
    def dimension(self) -> int:
        return self._dim

    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        raise RuntimeError("bench documents are written with explicit embeddings")


def bench_sync(work: Path, ids, texts, metas, vectors) -> list[Row]:
    n = len(ids)
    embedder = PrecomputedEmbedder(vectors.shape[1])
    store = open_store(Settings(data_dir=work / "store", mirror_enabled=False), embedder=embedder)
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        end = min(n, start + BATCH)
        store.upsert_docs([{**{k: v for k, v in metas[i].items() if k != "ts_epoch"}, "id": ids[i], "text": texts[i],
                            "embedding": vectors[i]} for i in range(start, end)])
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    read = 0
    offset = 0
    while True:
        page = store.get(type="memory", limit=1000, offset=offset, include_embeddings=True)
        read += len(page)
        offset += len(page)
        if len(page) < 1000:
            break
    read_s = time.perf_counter() - t0
    mirror = EngramMirror(work / "synced.db", embedder.name, batch_size=1000)
    t0 = time.perf_counter()
    first = sync_mirror(store, mirror)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    second = sync_mirror(store, mirror)
    second_s = time.perf_counter() - t0
    assert first.added == n and second.changed == 0, (first, second)
    mirror.close()
    return [
        Row(f"(set-up) RagStore.upsert_docs of {n:,} memories with vectors", f"{n / build_s:,.0f} docs/s", "", ""),
        Row("sync_mirror into an empty mirror (rows/s)", f"{n / first_s:,.0f}",
            f"{read / read_s:,.0f} reading the same pages from Chroma alone", f"{read_s / first_s:.2f}"),
        Row("sync_mirror again, nothing to do (rows/s)", f"{n / second_s:,.0f}",
            f"{read / read_s:,.0f} reading the same pages from Chroma alone", f"{read_s / second_s:.2f}"),
    ]


# ---- 3. recall ---------------------------------------------------------------------------------------------
def bench_recall(path: Path, model: str, queries: np.ndarray, k: int, ids: list[str], metas) -> list[Row]:
    mirror = EngramMirror(path, model, batch_size=1000)
    t0 = time.perf_counter()
    mirror.recall(queries[0], k)
    build_s = time.perf_counter() - t0
    matrix = mirror._matrix().matrix  # the very matrix recall uses
    n = matrix.shape[0]

    def brute(i: int):
        scores = matrix @ queries[i]
        top = np.argpartition(scores, n - k)[n - k:]
        return top[np.argsort(-scores[top])]

    methods = {
        "mirror": lambda i: mirror.recall(queries[i], k),
        "numpy": brute,
        "filtered": lambda i: mirror.recall(queries[i], k, types=["memory"], scopes=["global", "entity:alice"]),
    }
    lat = interleaved(methods, len(queries))
    mismatches = 0
    for i in range(len(queries)):
        if [h.id for h in mirror.recall(queries[i], k)] != [mirror._matrix().ids[j] for j in brute(i)]:
            mismatches += 1
    mirror.close()
    ratio = p50(lat["mirror"]) / p50(lat["numpy"])
    return [
        Row("first recall after open (reads, validates and caches every vector)", f"{build_s:.2f} s", "", ""),
        Row(f"EngramMirror.recall p50, k={k}", f"{p50(lat['mirror']):.2f} ms",
            f"{p50(lat['numpy']):.2f} ms numpy M@q + argpartition, same matrix", f"{ratio:.2f}", "<= 1.3",
            _check(ratio <= 1.3)),
        Row(f"EngramMirror.recall p95, k={k}", f"{np.percentile(lat['mirror'], 95):.2f} ms",
            f"{np.percentile(lat['numpy'], 95):.2f} ms numpy", f"{np.percentile(lat['mirror'], 95) / np.percentile(lat['numpy'], 95):.2f}"),
        Row("recall p50 with types + scopes filter", f"{p50(lat['filtered']):.2f} ms", "", ""),
        Row("exactness: top-k equal to numpy", f"{len(queries) - mismatches} / {len(queries)} queries", "", "",
            "all", _check(mismatches == 0)),
    ]


# ---- 4. engramai on the same file ---------------------------------------------------------------------------
def bench_engram(path: Path, model: str, texts: list[str], queries: np.ndarray, k: int, n_queries: int,
                 rng: np.random.Generator) -> list[Row]:
    from engram import Memory

    for key in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"):
        os.environ.pop(key, None)
    # keyword queries: two words of a random memory (so engram's FTS finds candidates, as it needs)
    picks = rng.choice(len(texts), size=n_queries, replace=False)
    words = [" ".join(texts[i].split(": ", 1)[1].split()[-2:]) for i in picks]
    copy = path.with_name("engram-copy.db")  # engram writes access logs and links on recall: keep ours clean
    for suffix in ("", "-wal", "-shm"):
        if Path(str(path) + suffix).exists():
            shutil.copy(str(path) + suffix, str(copy) + suffix)
    mem = Memory(str(copy))
    mem.set_extractor(None)
    mirror = EngramMirror(copy, model, batch_size=1000)
    mirror.recall(queries[0], k)
    methods = {
        "engram": lambda i: mem.recall(words[i], limit=k),
        "vector": lambda i: mirror.recall(queries[i % len(queries)], k),
        "keyword": lambda i: mirror.keyword_recall(words[i], k),
    }
    lat = interleaved(methods, n_queries)
    found = sum(1 for i in range(n_queries) if mem.recall(words[i], limit=k))
    mem.close()
    mirror.close()
    e = p50(lat["engram"])
    return [
        Row(f"engram.Memory.recall p50 (FTS5 + ACT-R, limit={k})", f"{e:.2f} ms", f"{found}/{n_queries} queries with hits", ""),
        Row("EngramMirror.recall (vector) p50", f"{p50(lat['vector']):.2f} ms", f"{e:.2f} ms engram recall",
            f"{p50(lat['vector']) / e:.3f}"),
        Row("EngramMirror.keyword_recall (FTS5, BM25) p50", f"{p50(lat['keyword']):.2f} ms", f"{e:.2f} ms engram recall",
            f"{p50(lat['keyword']) / e:.3f}"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the mirror")
    parser.add_argument("--store-n", type=int, default=None, help="memories in the RagStore for the sync (default --n)")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--engram-queries", type=int, default=40)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("bench/MIRROR_RESULTS.md"))
    parser.add_argument("--skip-sync", action="store_true", help="leave out the RagStore sync (slow to set up)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rng = np.random.default_rng(SEED)
    model = f"bench/precomputed-{args.dim}"
    t0 = time.perf_counter()
    vectors, centroids = make_vectors(rng, args.n, args.dim)
    texts = make_texts(rng, args.n, make_words(rng))
    metas = make_metadata(rng, args.n)
    ids = [f"mem-{i:07d}" for i in range(args.n)]
    near = _unit(vectors[rng.choice(args.n, size=args.queries // 2)] +
                 rng.standard_normal((args.queries // 2, args.dim)).astype(np.float32) * (0.5 / np.sqrt(args.dim)))
    fresh = _unit(centroids[rng.integers(0, TOPICS, size=args.queries - len(near))] +
                  rng.standard_normal((args.queries - len(near), args.dim)).astype(np.float32) * (0.9 / np.sqrt(args.dim)))
    queries = np.ascontiguousarray(rng.permutation(np.concatenate([near, fresh]), axis=0), dtype=np.float32)
    gen_s = time.perf_counter() - t0

    parts = [
        "# Engram mirror benchmark",
        "",
        f"- machine: {machine_info()}. **The 2 cores were shared with other helpers' test and benchmark runs "
        "during this run**; absolute figures are noisy, ratios come from interleaved runs in the same process.",
        f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; N = {args.n:,} memories, dim {args.dim}, "
        f"{args.queries} vector queries, k = {args.k}; data generated in {gen_s:.1f} s",
        f"- data: unit vectors around {TOPICS} random centroids (noise norm 0.9), float32; texts of "
        f"{WORDS_PER_TEXT} Zipf-distributed words from a {VOCABULARY}-word vocabulary; memories: 70% global, the rest "
        "in 3 entity scopes, importance 1..5, 0-2 tags, timestamps over 2 years. Queries: half a memory's vector + "
        "noise, half a fresh point near a random centroid.",
        f"- latency: {WARMUP} untimed warm-up calls per method, then the methods take turns query by query.",
        "",
    ]
    print("\n".join(parts), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as tmp:
        work = Path(tmp)
        sections = []
        rows, path = bench_writes(work, ids, texts, metas, vectors, model)
        sections.append(("## Writes", rows))
        print(f"## Writes\n\n{table(rows)}\n", flush=True)
        rows = bench_recall(path, model, queries, args.k, ids, metas)
        sections.append(("## Recall over the stored vectors", rows))
        print(f"## Recall over the stored vectors\n\n{table(rows)}\n", flush=True)
        rows = bench_engram(path, model, texts, queries, args.k, args.engram_queries, rng)
        sections.append(("## engramai's own recall on the same file", rows))
        print(f"## engramai's own recall on the same file\n\n{table(rows)}\n", flush=True)
        if not args.skip_sync:
            store_n = args.store_n or args.n
            rows = bench_sync(work, ids[:store_n], texts[:store_n], metas[:store_n], vectors[:store_n])
            sections.append((f"## Sync from a RagStore (embedded Chroma, {store_n:,} memories)", rows))
            print(f"## Sync from a RagStore ({store_n:,} memories)\n\n{table(rows)}\n", flush=True)
    for title, rows in sections:
        parts.append(f"{title}\n\n{table(rows)}\n")
    parts.append(
        "Notes: engramai 2.1.0's recall is keyword-first (FTS5 candidates, ACT-R activation from the access log, "
        "Hebbian links) and writes an access-log row per hit and co-activation links on every call; its vector "
        "path (`VectorStore`, JSON vectors, pure-Python cosine) cannot read protocol-v2 BLOBs, so the comparison "
        "is against the recall an engram instance actually runs on this file (on a copy, so its writes do not "
        "touch the measured mirror).\n"
    )
    wall = (f"Total wall time: {time.perf_counter() - started:.0f} s "
            f"(load average at the end {'/'.join(f'{x:.1f}' for x in os.getloadavg())})\n")
    parts.append(wall)
    print(wall)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
