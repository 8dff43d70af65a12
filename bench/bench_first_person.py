#!/usr/bin/env python
"""What the first-person floor costs a memory search: one entity's memories searched for a message in the third
person and for one in the first (whose floor needs the similarity of every one of the entity's memories), against
numpy's product of the query with every row.

    .venv/bin/python bench/bench_first_person.py [--sizes 1000,10000,100000] [--queries 200] [--out FILE]

Rows are random unit vectors (384 dimensions, MiniLM's) with short texts, all of one entity, searched with the
shipped relevance weights of MiniLM's calibration (floor, margin, the first-person rule). Each query is a row
plus noise, so a few rows are close and most are not, as for a real message. Times are per search, p50 and p95,
measured interleaved in one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from brain.config import Settings  # noqa: E402
from brain.rules.ranking import ScoreWeights  # noqa: E402
from brain.rules.relevance import FIRST_PERSON_FLOOR_Z, FIRST_PERSON_STAND_OUT_Z  # noqa: E402
from brain.store.memory_index import MemoryIndex  # noqa: E402
from brain.store.memory_query import MemoryQuery  # noqa: E402

DIM = 384
#: MiniLM's calibration on the shipped pairs (bench/RELEVANCE_RESULTS.md)
MEAN, SD = 0.035, 0.080
SCOPE = "entity:nadia"
WORDS = ("garden", "train", "sister", "coffee", "marathon", "cello", "Leeds", "engineer", "birthday", "volvo")


def weights() -> ScoreWeights:
    s = Settings()
    return ScoreWeights.relevance(
        s, floor=MEAN + 6 * SD, margin=3 * SD,
        first_person=(MEAN + FIRST_PERSON_FLOOR_Z * SD, FIRST_PERSON_STAND_OUT_Z * SD, MEAN),
    )


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


def measure(n: int, queries: int, rng: np.random.Generator) -> dict[str, float]:
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [" ".join(WORDS[w] for w in rng.integers(len(WORDS), size=5)) for _ in range(n)]
    metas = [{"type": "memory", "scope": SCOPE, "importance": int(rng.integers(1, 6)), "ts_epoch": 1.7e9}
             for _ in range(n)]
    index = MemoryIndex(DIM, capacity=n)
    index.upsert([f"doc-{i}" for i in range(n)], vectors, texts, metas)
    w, now, scopes = weights(), time.time(), {"global", SCOPE}
    third, first, raw = [], [], []
    for i in range(queries + 5):
        q = vectors[int(rng.integers(n))] + 0.08 * rng.standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        t0 = time.perf_counter()
        index.search(MemoryQuery(q, 3, w, now, scopes=scopes, query_text="where does she run"))
        t1 = time.perf_counter()
        index.search(MemoryQuery(q, 3, w, now, scopes=scopes, query_text="where do I run", about=SCOPE))
        t2 = time.perf_counter()
        vectors @ q
        t3 = time.perf_counter()
        if i >= 5:  # the first searches build the lexical side
            third.append(t1 - t0)
            first.append(t2 - t1)
            raw.append(t3 - t2)
    return {"third_p50": percentile(third, 50), "third_p95": percentile(third, 95),
            "first_p50": percentile(first, 50), "first_p95": percentile(first, 95),
            "numpy_p50": percentile(raw, 50)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(45)
    lines = ["# The first-person floor's cost", "",
             f"`.venv/bin/python bench/bench_first_person.py` · {platform.machine()}, {os.cpu_count()} cores, "
             f"load {os.getloadavg()[0]:.1f} · {args.queries} queries per size, one entity's memories", "",
             "| memories of the entity | third person p50 / p95 (ms) | first person p50 / p95 (ms) "
             "| first / third p50 | numpy q @ rows p50 (ms) | first person / numpy |",
             "|---|---|---|---|---|---|"]
    for n in (int(x) for x in args.sizes.split(",")):
        r = measure(n, args.queries, rng)
        lines.append(f"| {n:,} | {r['third_p50']:.3f} / {r['third_p95']:.3f} | {r['first_p50']:.3f} / "
                     f"{r['first_p95']:.3f} | {r['first_p50'] / r['third_p50']:.2f}x | {r['numpy_p50']:.3f} | "
                     f"{r['first_p50'] / r['numpy_p50']:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
