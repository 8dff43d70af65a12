#!/usr/bin/env python
"""Cold start of a worker: the in-process indexes from the index snapshot vs a rebuild from Chroma.

    .venv/bin/python bench/scaleout_cold_start.py [--n 100000] [--dim 768] [--chroma-url URL] [--out FILE]

Builds bench_store's synthetic mixed-type corpus (precomputed vectors) through a RagStore, embedded or on
a Chroma server (``--chroma-url``; then with the change feed), saves the index snapshot, and then times
a cold start in a fresh Python process per case: ``open_store`` plus the first index build
(``memory_index()``), imports excluded. Cases: snapshots off (a rebuild reading the whole collection)
and snapshots on (the snapshot loaded; with a server, the change feed after it applied). Both starts
then rank the same queries, and the results must be identical (ids and scores). ``--out`` also writes
the table, with the machine and the command, to a Markdown file (``bench/COLD_START_RESULTS.md``).

:func:`run` returns the rows (``bench/bench_scaleout.py`` prints them as its part (c)).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_store import NOW, PrecomputedEmbedder, machine_info, make_corpus  # noqa: E402  (chdirs to ROOT)

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.store.indexes import index_sizes, memory_index, refresh_index
from brain.store.indexes import save_index_snapshot

QUERIES = 50
K = 5
TARGET = 0.2  # snapshot start <= 0.2x the rebuild


def _settings(data_dir: Path, chroma_url: str | None, collection: str, snapshot: bool) -> Settings:
    # the embedded store's snapshot key beside the temporary data directory, not in the user's state directory
    return Settings(data_dir=data_dir, chroma_url=chroma_url, collection=collection, index_snapshot=snapshot,
                    mirror_enabled=False, snapshot_key_dir=data_dir.parent / "snapshot-keys")


def cold_start(data_dir: Path, chroma_url: str | None, collection: str, snapshot: bool,
               queries: np.ndarray) -> dict[str, Any]:
    """In this process: open the store and build its indexes (timed), then rank ``queries``."""
    started = time.perf_counter()
    store = open_store(_settings(data_dir, chroma_url, collection, snapshot), embedder=PrecomputedEmbedder(queries))
    sizes = index_sizes(store)  # the first index build: every indexed type
    seconds = time.perf_counter() - started
    with store:  # a start from the snapshot changed nothing, so its close saves nothing
        ranked = [[(h.id, h.score) for h in store.retrieve_memories(None, k=K, now=NOW, all_scopes=True, query_vector=q)]
                  for q in queries]
    return {"seconds": seconds, "sizes": sizes, "ranked": ranked}


def _child(data_dir: Path, chroma_url: str | None, collection: str, snapshot: bool, queries: Path) -> dict[str, Any]:
    """``cold_start`` in a fresh Python process (nothing of the store is loaded yet)."""
    code = ("import json, sys, numpy as np; from pathlib import Path; import scaleout_cold_start as b; "
            "print(json.dumps(b.cold_start(Path(sys.argv[1]), sys.argv[2] or None, sys.argv[3], sys.argv[4] == '1', "
            "np.load(sys.argv[5]))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bench")])}
    out = subprocess.run([sys.executable, "-c", code, str(data_dir), chroma_url or "", collection,
                          "1" if snapshot else "0", str(queries)], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(n_docs: int = 100_000, *, dim: int = 768, chroma_url: str | None = None) -> list[dict]:
    """Rows ``{"case", "seconds", "ratio", "note"}``: the cold start with a rebuild from Chroma (ratio 1)
    and from the snapshot (ratio to the rebuild; target <= 0.2), and the snapshot's save."""
    corpus = make_corpus(n_docs, QUERIES, dim)
    if dim != 768:
        PrecomputedEmbedder.name = f"bench/precomputed-{dim}"
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-cold-start-{n_docs}-"))
    collection = f"cold-{uuid.uuid4().hex[:8]}"
    try:
        queries = tmp / "queries.npy"
        np.save(queries, corpus.query_vectors)
        settings = _settings(tmp / "data", chroma_url, collection, True)
        with open_store(settings, embedder=PrecomputedEmbedder(corpus.query_vectors)) as store:
            memory_index(store)  # live while written, as in a running service
            for s in range(0, len(corpus), 1000):
                store.upsert_docs(corpus.store_docs[s:s + 1000])
            # Chroma hands vectors back a few ulps off what it was given: the snapshot saves what it holds,
            # so that a rebuild's ranking is the exact reference
            refresh_index(store)
            started = time.perf_counter()
            path = save_index_snapshot(store)
            save_s = time.perf_counter() - started
        size = path.stat().st_size
        rebuild = _child(tmp / "data", chroma_url, collection, False, queries)
        loaded = _child(tmp / "data", chroma_url, collection, True, queries)
        same = rebuild["ranked"] == loaded["ranked"] and rebuild["sizes"] == loaded["sizes"]
        indexed = sum(rebuild["sizes"].values())
        where = "a Chroma server" if chroma_url else "embedded Chroma"
        return [
            {"case": "cold start, rebuild from Chroma", "seconds": rebuild["seconds"], "ratio": 1.0,
             "note": f"{n_docs:,} documents ({indexed:,} indexed), {where}; open_store + first index build"},
            {"case": "cold start, index snapshot", "seconds": loaded["seconds"],
             "ratio": loaded["seconds"] / rebuild["seconds"],
             "note": f"target <= {TARGET}; {QUERIES} queries ranked "
                     f"{'identically (ids and scores)' if same else 'DIFFERENTLY'}"},
            {"case": "index snapshot save (at close)", "seconds": save_s, "ratio": save_s / rebuild["seconds"],
             "note": f"{size / 2**20:,.0f} MiB file"},
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def table(rows: list[dict]) -> str:
    lines = ["| case | seconds | ratio | note |", "|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['seconds']:.2f} | {r['ratio']:.3f} | {r['note']} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="documents in the collection")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--chroma-url", default=None, help="a Chroma server (default: the embedded store)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    machine = machine_info()
    rows = run(args.n, dim=args.dim, chroma_url=args.chroma_url)
    print(table(rows))
    if args.out is not None:
        command = " ".join(["bench/scaleout_cold_start.py", *(argv if argv is not None else sys.argv[1:])])
        args.out.write_text(f"# Cold start: the index snapshot vs a rebuild from Chroma\n\n"
                            f"- run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `{command}`\n"
                            f"- machine: {machine}\n\n{table(rows)}\n", encoding="utf-8")
    return 0 if rows[1]["ratio"] <= TARGET and "identically" in rows[1]["note"] else 1


if __name__ == "__main__":
    sys.exit(main())
