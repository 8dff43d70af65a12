#!/usr/bin/env python
"""Benchmark of the mirror's content catch-up (:func:`brain.features.mirror.sync.catch_up`) against reading the
collection raw with Chroma, measured in the same run.

    .venv/bin/python bench/bench_mirror_catch_up.py [--n 10000 100000] [--dim 384] [--out bench/MIRROR_CATCH_UP_RESULTS.md]

For each N: N memories with precomputed unit vectors written through a RagStore (embedded Chroma) with
its mirror on; then, each timed:

- raw read: ``collection.get`` of every document with texts, metadata and vectors, pages of 1000;
- the first catch-up after the writes (Chroma hands vectors back a few ulps off what it was given, so
  every row is compared exactly once and its hash recorded: the worst case, a file of older code too);
- a catch-up of the mirror in step (every row settled by its hash: the usual start);
- a catch-up after 1% of the rows were updated in place in Chroma alone (``mirror_paused``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory

from bench_mirror import PrecomputedEmbedder  # noqa: E402  (documents bring their vectors)

from brain.app.core import open_store  # noqa: E402
from brain.app.rag_store import RagStore  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.mirror import catch_up, verify_mirror  # noqa: E402
from brain.store.mirror_link import mirror_paused

SEED = 1313
BATCH = 1000


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def raw_read(store: RagStore) -> tuple[int, float]:
    started = time.perf_counter()
    read = offset = 0
    while True:
        page = store.col.get(limit=BATCH, offset=offset, include=["documents", "metadatas", "embeddings"])
        read += len(page["ids"])
        offset += len(page["ids"])
        if len(page["ids"]) < BATCH:
            return read, time.perf_counter() - started


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def bench(work: Path, n: int, dim: int) -> list[tuple[str, str, str, str]]:
    rng = np.random.default_rng(SEED)
    vectors = unit_vectors(rng, n, dim)
    store = open_store(Settings(data_dir=work / f"store-{n}"), embedder=PrecomputedEmbedder(dim))
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        store.upsert_docs([{"id": f"m-{i}", "text": f"memory number {i} about topic {i % 97}", "type": "memory",
                            "importance": 1 + i % 5, "embedding": vectors[i]} for i in range(start, min(n, start + BATCH))])
    build_s = time.perf_counter() - t0
    read, read_s = raw_read(store)
    assert read == n
    first, first_s = timed(lambda: catch_up(store, store.mirror))
    assert first.changed == 0, first
    steady, steady_s = timed(lambda: catch_up(store, store.mirror))
    assert steady.changed == 0 and steady.rehashed == 0, steady
    read2, read2_s = raw_read(store)  # again, next to the steady catch-up
    read_s = min(read_s, read2_s)
    changed = rng.choice(n, size=max(1, n // 100), replace=False)
    new = unit_vectors(rng, len(changed), dim)
    with mirror_paused(store):
        for start in range(0, len(changed), BATCH):
            part = range(start, min(len(changed), start + BATCH))
            store.upsert_docs([{"id": f"m-{changed[j]}", "text": f"memory number {changed[j]}, updated", "type": "memory",
                                "importance": 1 + int(changed[j]) % 5, "embedding": new[j]} for j in part])
    repaired, repaired_s = timed(lambda: catch_up(store, store.mirror))
    assert repaired.updated == len(changed) and repaired.added == repaired.deleted == 0, repaired
    assert verify_mirror(store, store.mirror).ok
    store.close()
    raw = f"{read_s:.2f} s raw collection.get"
    return [
        (f"(set-up) {n:,} memories written through store and mirror", f"{n / build_s:,.0f} docs/s", "", ""),
        (f"raw Chroma read of {n:,} documents with vectors", f"{read_s:.2f} s", "", "1.00"),
        (f"catch-up, mirror in step (hashes settled), N={n:,}", f"{steady_s:.2f} s", raw, f"{steady_s / read_s:.2f}"),
        (f"catch-up after 1% ({len(changed):,}) updated in Chroma alone, N={n:,}", f"{repaired_s:.2f} s", raw,
         f"{repaired_s / read_s:.2f}"),
        (f"first catch-up after writes (every row compared exactly once), N={n:,}", f"{first_s:.2f} s", raw,
         f"{first_s / read_s:.2f}"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "MIRROR_CATCH_UP_RESULTS.md")
    args = parser.parse_args()
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            rows += bench(Path(tmp), n, args.dim)
    load = os.getloadavg()
    lines = [
        "# Mirror catch-up benchmark",
        "",
        f"- machine: {os.cpu_count()} cores, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at the end; "
        f"Python {platform.python_version()}; embedded Chroma; {args.dim}-d float32 unit vectors",
        f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; ratio = time / raw Chroma read of the same "
        "collection (lower is better; the catch-up reads the same data, hashes it and reads the mirror's hashes)",
        "",
        "| metric | measured | reference | ratio |",
        "|---|---|---|---|",
    ] + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
