#!/usr/bin/env python
"""Many users, one service: the indexes split by scope, measured in one run with synthetic vectors.

    .venv/bin/python bench/bench_partitions.py [--queries 300] [--budget-mb 256] [--cold-entities 40]
                                               [--cold-budget-mb 16] [--cold-filler 300000]
                                               [--rss-budget-mb 64]
                                               [--out bench/PARTITIONS_RESULTS.md]

1. **Warm queries at every size.** 1,000 entities x 100 memories (100k), 1,000 x 1,000 (1M), 10,000 x 100
   (1M) and 100,000 x 10 (1M), plus 1,000 global memories: brain's partitioned index (``Partitions``, the
   store's own code) with as many entity parts resident as fit the budget, against one index holding only
   the queried entity's memories and the global ones, on the same rows and queries. Parts come from a
   loader that generates each scope's rows from its name (no Chroma here: a warm query never reads it),
   so a million memories cost only the parts resident. At 100k the unpartitioned layout (one index of
   every row, the scope a mask) is measured too.
2. **A cold entity's first request**, on a real embedded Chroma store: ``--cold-entities`` entities of
   1,000 memories each, 1,000 global ones and ``--cold-filler`` memories of other entities (10 each;
   300,000 by default, about 5 minutes to write on 2 cores; a million takes 40) in the collection; each
   entity's first ``retrieve_memories`` reads its part from Chroma (found by its scope, read by id), and
   in a second round, evicted meanwhile, from its part file.
3. **Worker RSS**: the process's resident set before the indexes and while and after serving three times
   more entities than the budget holds, against the budget.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import resource
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.providers.embeddings.base import Embedder, Kind  # noqa: E402
from brain.rules.ranking import ScoreWeights  # noqa: E402
from brain.rules.relevance import Calibration  # noqa: E402
from brain.store.indexes import refresh_index  # noqa: E402
from brain.store.memory_index import ROW_OBJECT_BYTES, MemoryIndex  # noqa: E402
from brain.store.memory_query import MemoryQuery  # noqa: E402
from brain.store.partitions import Partitions  # noqa: E402

DIM = 384
NOW = 1_760_000_000.0
GLOBAL_ROWS = 1_000
WORDS = ["tea", "coffee", "peanut", "allergy", "marathon", "berlin", "volvo", "service", "garden", "piano",
         "passport", "lisbon", "dentist", "invoice", "bicycle", "sister", "recipe", "holiday", "train", "doctor"]
#: the shipped weighting's shape (similarity, importance, recency, lexical, a floor and a margin)
WEIGHTS = ScoreWeights(1.0, 0.1, 0.05, lexical=1.0, floor=0.1, margin=0.24)
SIZES = [(1_000, 100), (1_000, 1_000), (10_000, 100), (100_000, 10)]


def rows_of(scope: str, n: int) -> dict:
    """``n`` memories of ``scope``, the same every time (seeded by the scope's name)."""
    rng = np.random.default_rng(zlib.crc32(scope.encode()))
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    words = rng.integers(len(WORDS), size=(n, 5))
    name = scope.removeprefix("entity:")
    return {
        "ids": [f"{name}-{j}" for j in range(n)],
        "documents": [" ".join(WORDS[w] for w in words[j]) + f" note {j} of {name}" for j in range(n)],
        "metadatas": [{"type": "memory", "scope": scope, "importance": int(1 + j % 5), "ts_epoch": NOW - 3600.0 * j,
                       "timestamp": "2025-10-09T00:00:00+00:00", "source": "chat"} for j in range(n)],
        "embeddings": vectors,
    }


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, p))


def warm(entities: int, per_entity: int, args: argparse.Namespace, rng: np.random.Generator) -> dict:
    def loader(scope):
        if scope is None:
            raise RuntimeError("the bench never searches every scope")
        return [rows_of(scope, GLOBAL_ROWS if scope == "global" else per_entity)]

    partitions = Partitions(("memory",), DIM, int(args.budget_mb * 2**20), loader, threading.RLock())
    partitions.load_global()
    view = partitions.views["memory"]
    fits = max(1, int(args.budget_mb * 2**20 // (per_entity * (DIM * 5 + 80 + ROW_OBJECT_BYTES))))
    served = [f"entity:user{int(i)}" for i in rng.choice(entities, size=min(entities, fits), replace=False)]
    started = time.perf_counter()
    for scope in served:  # the resident set a busy worker holds
        partitions.parts({"global", scope})
    fill_s = time.perf_counter() - started
    evicted_before = partitions.evictions
    part_t, alone_t, mismatches = [], [], 0
    for i in range(args.queries):
        scope = served[int(rng.integers(len(served)))]
        own = rows_of(scope, per_entity)
        q = own["embeddings"][int(rng.integers(per_entity))] + 0.9 * rng.standard_normal(DIM).astype(np.float32)
        text = " ".join(WORDS[w] for w in rng.integers(len(WORDS), size=3))
        glob = rows_of("global", GLOBAL_ROWS)
        alone = MemoryIndex(DIM, capacity=per_entity + GLOBAL_ROWS)
        alone.upsert(glob["ids"] + own["ids"], np.concatenate([glob["embeddings"], own["embeddings"]]),
                     glob["documents"] + own["documents"], glob["metadatas"] + own["metadatas"])
        scopes = {"global", scope}
        # one search each first: both indexes' lexical sides built and their rows in the CPU's caches
        alone.search(MemoryQuery(q, 3, WEIGHTS, NOW, scopes=scopes, query_text=text))
        view.search(MemoryQuery(q, 3, WEIGHTS, NOW, scopes=scopes, query_text=text))
        t0 = time.perf_counter()
        got = view.search(MemoryQuery(q, 3, WEIGHTS, NOW, scopes=scopes, query_text=text))
        t1 = time.perf_counter()
        ref = alone.search(MemoryQuery(q, 3, WEIGHTS, NOW, scopes=scopes, query_text=text))
        t2 = time.perf_counter()
        part_t.append(t1 - t0)
        alone_t.append(t2 - t1)
        mismatches += [h.id for h in got] != [h.id for h in ref]
    out = {
        "entities": entities, "per_entity": per_entity, "total": entities * per_entity + GLOBAL_ROWS,
        "resident": len(partitions.entities), "fill_s": fill_s, "evictions": partitions.evictions - evicted_before,
        "part_p50": percentile(part_t, 50), "alone_p50": percentile(alone_t, 50),
        "part_p95": percentile(part_t, 95), "alone_p95": percentile(alone_t, 95), "mismatches": mismatches,
        "resident_mb": partitions.resident_bytes() / 2**20,
    }
    if entities * per_entity <= 100_000:  # the unpartitioned layout: one index of every row, the scope a mask
        whole = MemoryIndex(DIM, capacity=entities * per_entity + GLOBAL_ROWS)
        for scope in ["global"] + [f"entity:user{i}" for i in range(entities)]:
            page = rows_of(scope, GLOBAL_ROWS if scope == "global" else per_entity)
            whole.upsert(page["ids"], page["embeddings"], page["documents"], page["metadatas"])
        times = []
        for i in range(args.queries):
            scope = served[int(rng.integers(len(served)))]
            q = rng.standard_normal(DIM).astype(np.float32)
            whole.search(MemoryQuery(q, 3, WEIGHTS, NOW, scopes={"global", scope}, query_text="tea garden"))
            t0 = time.perf_counter()
            whole.search(q, 3, WEIGHTS, NOW, scopes={"global", scope}, query_text="coffee piano")
            times.append(time.perf_counter() - t0)
        out["whole_p50"] = percentile(times, 50)
        del whole
    return out


class QueryKeys(Embedder):
    """Query vectors by key (``"q7"``); documents arrive with their embeddings."""

    name = "bench/synthetic-384"

    def __init__(self, vectors: np.ndarray):
        super().__init__(batch_size=64, cache_size=0)
        self._vectors = vectors

    @property
    def dimension(self) -> int:
        return DIM

    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        return self._vectors[[int(t.removeprefix("q")) for t in texts]]


def cold(args: argparse.Namespace, rng: np.random.Generator) -> dict:
    """First requests of entities not resident: read from Chroma (never served by this worker), then, once
    each was evicted under a budget holding a few parts, read back from its part file."""
    entities = [f"entity:cold{i}" for i in range(args.cold_entities)]
    queries = rng.standard_normal((len(entities), DIM)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", mirror_enabled=False, index_memory_mb=args.cold_budget_mb,
                            snapshot_key_dir=Path(tmp) / "keys")
        with open_store(settings, embedder=QueryKeys(queries)) as store:
            started = time.perf_counter()
            batch = store.client.get_max_batch_size()
            for scope in ["global", *entities]:
                page = rows_of(scope, GLOBAL_ROWS if scope == "global" else 1_000)
                for s in range(0, len(page["ids"]), batch):
                    store.col.add(ids=page["ids"][s:s + batch], embeddings=page["embeddings"][s:s + batch],
                                  documents=page["documents"][s:s + batch], metadatas=page["metadatas"][s:s + batch])
            filler = 0
            while filler < args.cold_filler:  # the rest of the service: entities of 10 memories each
                pages = [rows_of(f"entity:filler{filler // 10 + j}", 10) for j in range(batch // 10)]
                store.col.add(ids=[i for p in pages for i in p["ids"]],
                              embeddings=np.concatenate([p["embeddings"] for p in pages]),
                              documents=[d for p in pages for d in p["documents"]],
                              metadatas=[m for p in pages for m in p["metadatas"]])
                filler += 10 * len(pages)
            write_s = time.perf_counter() - started
            # random unit vectors of 384 dimensions are unrelated pairs: their spread calibrates the gate
            store.retrieval.use_calibration(Calibration(embedder=QueryKeys.name, mean=0.0, sd=float(DIM**-0.5),
                                                        related_median=0.0, pairs=0, data="synthetic"))
            refresh_index(store)  # the global part, as at start-up
            rounds = {}
            for name in ("chroma", "file"):
                firsts, seconds = [], []
                for i, scope in enumerate(entities):
                    entity = scope.removeprefix("entity:")
                    t0 = time.perf_counter()
                    hits = store.retrieve_memories(f"q{i}", k=3, entity=entity)
                    t1 = time.perf_counter()
                    store.retrieve_memories(f"q{i}", k=3, entity=entity)
                    t2 = time.perf_counter()
                    firsts.append(t1 - t0)
                    seconds.append(t2 - t1)
                    assert all(h.metadata["scope"] in ("global", scope) for h in hits)
                store.state.part_files.wait()  # the evicted parts' files written
                rounds[name] = (firsts, seconds)
            stats = store.state.partition_stats()  # (store.stats() counts every document: slow at a million)
    out = {"entities": len(entities), "write_s": write_s, "loads": stats["loads"], "filler": filler,
           "from_files": stats["loads_from_files"], "evictions": stats["evictions"]}
    for name, (firsts, seconds) in rounds.items():
        out[name] = {"p50": percentile(firsts, 50), "p95": percentile(firsts, 95), "max": percentile(firsts, 100),
                     "next": percentile(seconds, 50)}
    return out


def rss(args: argparse.Namespace, rng: np.random.Generator) -> dict:
    per_entity, budget = 100, args.rss_budget_mb
    before = rss_mb()
    partitions = Partitions(("memory",), DIM, int(budget * 2**20), lambda s: [rows_of(s, GLOBAL_ROWS if s == "global" else per_entity)],
                            threading.RLock())
    partitions.load_global()
    fits = int(budget * 2**20 // (per_entity * (DIM * 5 + 80 + ROW_OBJECT_BYTES)))
    peak = before
    for n in range(3 * fits):
        partitions.parts({"global", f"entity:user{int(rng.integers(1_000_000))}"})
        if n % 100 == 0:
            peak = max(peak, rss_mb())
    after = rss_mb()
    return {"budget": budget, "before": before, "after": after, "peak": max(peak, after),
            "resident_mb": partitions.resident_bytes() / 2**20, "entities_served": 3 * fits,
            "resident": len(partitions.entities), "evictions": partitions.evictions}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--budget-mb", type=float, default=256.0)
    parser.add_argument("--rss-budget-mb", type=float, default=64.0)
    parser.add_argument("--cold-entities", type=int, default=40)
    parser.add_argument("--cold-budget-mb", type=float, default=16.0)
    parser.add_argument("--cold-filler", type=int, default=300_000,
                        help="memories of other entities in the cold phase's collection (10 per entity)")
    parser.add_argument("--out", type=Path, default=Path("bench/PARTITIONS_RESULTS.md"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(39)
    t_start = time.perf_counter()
    rss_row = rss(args, rng)  # first, in a process that has held no other index
    gc.collect()  # each phase starts without the garbage of the one before (a worker carries none of it)
    cold_row = cold(args, rng)
    warm_rows = []
    for entities, per_entity in SIZES:
        gc.collect()
        warm_rows.append(warm(entities, per_entity, args, rng))
    elapsed = time.perf_counter() - t_start
    lines = [
        "# Many users, one service: the index split by scope",
        "",
        f"`.venv/bin/python bench/bench_partitions.py` · {platform.machine()}, {os.cpu_count()} cores · "
        f"{elapsed:.0f} s · {DIM}-d synthetic unit vectors, {GLOBAL_ROWS:,} global memories, k 3, "
        f"{args.queries} queries per size, BRAIN_INDEX_MEMORY_MB={args.budget_mb:g}",
        "",
        "## Warm `retrieve_memories`: the partitioned index against a store of only that entity",
        "",
        "| entities | memories each | memories in all | entity parts resident | p50 partitioned | p50 only that entity | ratio | p95 partitioned / alone | results equal | p50 one index of every row |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in warm_rows:
        whole = f"{r['whole_p50']:.3f} ms ({r['whole_p50'] / r['alone_p50']:.1f}x)" if "whole_p50" in r else "not built (see below)"
        lines.append(
            f"| {r['entities']:,} | {r['per_entity']:,} | {r['total']:,} | {r['resident']:,} ({r['resident_mb']:.0f} MB) | "
            f"{r['part_p50']:.3f} ms | {r['alone_p50']:.3f} ms | **{r['part_p50'] / r['alone_p50']:.2f}x** | "
            f"{r['part_p95']:.3f} / {r['alone_p95']:.3f} ms | {args.queries - r['mismatches']}/{args.queries} | {whole} |"
        )
    c = cold_row
    lines += [
        "",
        "## A cold entity's first request (embedded Chroma, real reads)",
        "",
        f"{c['entities']} entities of 1,000 memories, {GLOBAL_ROWS:,} global ones and {c['filler']:,} of "
        f"{c['filler'] // 10:,} other entities (10 each) written to the collection "
        f"({c['write_s']:.0f} s); BRAIN_INDEX_MEMORY_MB={args.cold_budget_mb:g}, so a few parts stay resident. Each "
        "entity's first `retrieve_memories` reads its part: in the first round from Chroma (a `where` on scope), in "
        f"the second, the part having been evicted meanwhile, from its part file ({c['loads']} loads, "
        f"{c['from_files']} from files, {c['evictions']} evictions).",
        "",
        "| the part read from | first request p50 | p95 | max | the next request p50 |",
        "|---|---|---|---|---|",
    ] + [
        f"| {label} | {c[key]['p50']:.1f} ms | **{c[key]['p95']:.1f} ms** | {c[key]['max']:.1f} ms | {c[key]['next']:.3f} ms |"
        for key, label in (("chroma", "Chroma (never served by this worker)"), ("file", "its part file (evicted before)"))
    ] + [
        "",
        "## Worker RSS under a budget",
        "",
        "| budget | entities served (100 memories each) | parts resident at the end | evictions | index's own estimate | RSS before | RSS peak | RSS after | above the budget |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {rss_row['budget']:g} MB | {rss_row['entities_served']:,} | {rss_row['resident']:,} | {rss_row['evictions']:,} | "
        f"{rss_row['resident_mb']:.1f} MB | {rss_row['before']:.0f} MB | {rss_row['peak']:.0f} MB | {rss_row['after']:.0f} MB | "
        f"{rss_row['peak'] - rss_row['before'] - rss_row['budget']:+.0f} MB |",
        "",
        f"Peak resident set of the whole run: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
