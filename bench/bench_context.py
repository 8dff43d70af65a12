#!/usr/bin/env python
"""Benchmark of ``ChatMemory.build_context`` in process against a single unfiltered raw ``col.query``.

    .venv/bin/python bench/bench_context.py [--n 100000] [--queries 300] [--dim 384] [--out bench/CONTEXT_RESULTS.md]

Builds a chat-shaped corpus with precomputed vectors (the generator of ``bench_store.py``): a persona of
6 sections, FAQ entries, memories in global and entity scopes, conversations of 40 turns with a
summary every 10 turns. Then, query by query and interleaved, it times ``build_context`` (persona,
FAQ, memories, summaries, recent turns, budget, prompt) and one unfiltered ``col.query`` on the same
collection with the same vector (n_results = 5, documents + metadatas + distances). Both sides get
the query vector without a model (a lookup embedder), so the ratio compares retrieval work alone; the
local model's ``embed_query`` cost is measured separately. Conversations are read once before timing
(the store caches their turns, as in a running service). Prints Markdown and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
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

from bench_store import DAY, NOW, TOPICS, PrecomputedEmbedder, _iso, make_space, topic_vectors  # noqa: E402

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.chat import ChatMemory  # noqa: E402
from brain.providers.summarizers import ExtractiveSummarizer  # noqa: E402
from brain.rules.relevance import Calibration  # noqa: E402
from brain.store.indexes import refresh_index
from brain.wiring import get_embedder  # noqa: E402

SEED = 20241121
SHARES = {"memory": 0.38, "turn": 0.45, "faq": 0.125}  # the rest: summaries (one per 10 turns) + 6 persona sections
TURNS_PER_CONVERSATION = 40
ENTITIES = ("alice", "bob", "carol", "dana", "eve")
# who started each conversation: its turns and summaries are in that entity's scope (None: global), and
# a context request for it names that entity, as a chat backend's would
OWNERS = (None, None, *ENTITIES)


def conversation_owner(conversation_id: str) -> str | None:
    return OWNERS[int(conversation_id.rsplit("-", 1)[1]) % len(OWNERS)]
TAGS = ("work", "family", "health", "travel", "food", "music", "sport", "money")
PERSONA = ("core", "tone", "style", "values", "boundaries", "knowledge")
WORDS = ("the user asked about", "we talked about", "remember that", "a note on", "plans for", "an update on")
BATCH = 1000


def make_docs(n: int, dim: int, rng: np.random.Generator) -> tuple[list[dict], list[str]]:
    space = make_space(rng, dim)
    n_turn = int(n * SHARES["turn"]) // TURNS_PER_CONVERSATION * TURNS_PER_CONVERSATION
    n_conv = n_turn // TURNS_PER_CONVERSATION
    n_summary = n_turn // 10
    n_faq = int(n * SHARES["faq"])
    n_memory = n - n_turn - n_summary - n_faq - len(PERSONA)
    kinds = (["persona"] * len(PERSONA) + ["faq"] * n_faq + ["memory"] * n_memory + ["turn"] * n_turn
             + ["summary"] * n_summary)
    topics = rng.choice(TOPICS, size=len(kinds), p=space.topic_p)
    vectors = topic_vectors(rng, space, topics)
    epochs = NOW - rng.integers(0, 730 * DAY, size=len(kinds)).astype(np.float64)
    docs, conversations = [], [f"conv-bench-{c}" for c in range(n_conv)]
    counters = dict.fromkeys(["persona", "faq", "memory", "turn", "summary"], 0)
    for row, kind in enumerate(kinds):
        i = counters[kind]
        counters[kind] += 1
        text = f"{WORDS[row % len(WORDS)]} topic {topics[row]} ({kind} {i}): " + " ".join(TAGS[(row + j) % 8] for j in range(8))
        doc = {"id": f"{kind}-{i:07d}", "text": text, "type": kind, "embedding": vectors[row],
               "timestamp": _iso(epochs[row])}
        if kind == "persona":
            doc.update(version="2026-01-01T00:00:00+00:00", topic=PERSONA[i], position=i, sections=len(PERSONA),
                       source="system")
        elif kind == "faq":
            doc.update(topic=f"topic-{i % 40}", source="kb")
        elif kind == "memory":
            scope = "global" if rng.random() < 0.7 else f"entity:{ENTITIES[rng.integers(len(ENTITIES))]}"
            doc.update(scope=scope, importance=int(rng.integers(1, 6)), source="chat")
            tags = [TAGS[t] for t in sorted(rng.choice(8, size=rng.integers(0, 3), replace=False))]
            if tags:
                doc["tags"] = tags
        elif kind == "turn":
            doc.update(conversation_id=conversations[i // TURNS_PER_CONVERSATION], role=("user", "assistant")[i % 2],
                       turn_index=i % TURNS_PER_CONVERSATION + 1, source="chat")
            owner = conversation_owner(doc["conversation_id"])
            if owner is not None:
                doc["scope"] = f"entity:{owner}"
        else:
            per = TURNS_PER_CONVERSATION // 10
            doc.update(conversation_id=conversations[i // per], summary_index=i % per + 1,
                       turn_range=f"{(i % per) * 10 + 1}-{(i % per) * 10 + 10}", source="system")
            owner = conversation_owner(doc["conversation_id"])
            if owner is not None:
                doc["scope"] = f"entity:{owner}"
        docs.append(doc)
    order = rng.permutation(len(docs))  # types interleaved, as a live store would be
    return [docs[j] for j in order], conversations


def percentiles(samples: list[float]) -> tuple[float, float]:
    a = np.asarray(samples) * 1000.0
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="documents in the store")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--dim", type=int, default=384, help="vector dimension (384 = local/minilm-l6-v2)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "CONTEXT_RESULTS.md")
    args = parser.parse_args()

    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    docs, conversations = make_docs(args.n, args.dim, rng)
    space_rng = np.random.default_rng(SEED + 1)
    queries = np.stack([docs[int(j)]["embedding"] for j in space_rng.choice(len(docs), size=args.queries)])
    queries = queries + 0.5 * space_rng.standard_normal(queries.shape).astype(np.float32) / np.sqrt(args.dim)
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    generated = time.perf_counter() - t0

    tmp = Path(tempfile.mkdtemp(prefix="bench-context-"))
    lines: list[str] = []
    try:
        settings = Settings(data_dir=tmp / "data", summary_every_n=1000)
        embedder = PrecomputedEmbedder(queries)
        embedder.name = f"bench/precomputed-{args.dim}"
        store = open_store(settings, embedder=embedder)
        # the precomputed embedder cannot embed the shipped calibration pairs: calibrate on the synthetic
        # space's own unrelated pairs (random query, document)
        pick = space_rng.integers(len(docs), size=4000)
        sims = np.einsum("ij,ij->i", queries[space_rng.integers(len(queries), size=4000)],
                         np.stack([docs[int(j)]["embedding"] for j in pick]))
        store.retrieval.use_calibration(Calibration(embedder=embedder.name, mean=float(sims.mean()),
                                                    sd=float(sims.std()), related_median=0.0, pairs=4000,
                                                    data="synthetic"))
        t0 = time.perf_counter()
        for s in range(0, len(docs), BATCH):
            store.upsert_docs(docs[s : s + BATCH])
        ingest = time.perf_counter() - t0
        chat = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
        t0 = time.perf_counter()
        refresh_index(store)
        index_build = time.perf_counter() - t0
        picked = [conversations[int(j)] for j in rng.choice(len(conversations), size=min(50, len(conversations)), replace=False)]
        for conv in picked:  # each conversation read from Chroma once (then cached, as in a service)
            store.recent_turns(conv)
        calls = [(f"q{i}", picked[i % len(picked)], conversation_owner(picked[i % len(picked)]))
                 for i in range(args.queries)]
        for text, conv, entity in calls[:10]:  # warm-up
            chat.build_context(conv, text, entity)
            store.col.query(query_embeddings=[queries[int(text[1:])]], n_results=5)
        ours, raw, sizes = [], [], []
        for text, conv, entity in calls:
            vec = queries[int(text[1:])]
            t = time.perf_counter()
            ctx = chat.build_context(conv, text, entity)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.col.query(query_embeddings=[vec], n_results=5, include=["documents", "metadatas", "distances"])
            raw.append(time.perf_counter() - t)
            sizes.append((len(ctx.persona), len(ctx.faq), len(ctx.memory), len(ctx.summary), len(ctx.turn), ctx.chars))
        p50, p95 = percentiles(ours)
        r50, r95 = percentiles(raw)
        mean_sizes = np.mean(np.asarray(sizes, dtype=float), axis=0)

        model = get_embedder(Settings())
        model.embed_query("warm up the model")
        model_times = []
        for i in range(50):
            t = time.perf_counter()
            model.embed_query(f"What did I tell you about my trip to Lisbon in May, number {i}?")
            model_times.append(time.perf_counter() - t)
        m50, m95 = percentiles(model_times)
        counts = store.stats()["by_type"]
        chat.close()
        store.close()

        load = os.getloadavg()
        ratio50 = p50 / r50
        lines += [
            "# build_context benchmark (in process)",
            "",
            f"- machine: {os.cpu_count()} cores, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at the end; "
            f"Python {platform.python_version()}, numpy {np.__version__}",
            f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {args.n:,} documents "
            f"({', '.join(f'{k} {v:,}' for k, v in counts.items())}), {args.dim}-d vectors, {args.queries} queries; "
            f"generated in {generated:.1f} s, ingested in {ingest:.0f} s ({len(docs) / ingest:,.0f} docs/s), "
            f"in-process indexes built in {index_build:.1f} s",
            "- settings: defaults (persona whole, faq_top_k 2, memory_top_k 3, summary_top_k 2, turn_top_k 4, "
            "8000-char budget); queries cycle over 50 conversations, each asked for by the entity that owns it (None/None/alice..eve)",
            f"- context per call (mean): persona {mean_sizes[0]:.1f}, faq {mean_sizes[1]:.1f}, memory {mean_sizes[2]:.1f}, "
            f"summary {mean_sizes[3]:.1f}, turn {mean_sizes[4]:.1f} items; {mean_sizes[5]:.0f} prompt chars",
            "",
            "| metric | measured | reference | ratio | target | ok? |",
            "|---|---|---|---|---|---|",
            f"| build_context p50 | {p50:.3f} ms | {r50:.3f} ms raw col.query unfiltered (n_results 5) | {ratio50:.2f} "
            f"| <= 3.0 | {'yes' if ratio50 <= 3.0 else '**NO**'} |",
            f"| build_context p95 | {p95:.3f} ms | {r95:.3f} ms raw col.query unfiltered | {p95 / r95:.2f} |  |  |",
            f"| local/minilm-l6-v2 embed_query, one chat message (not cached; paid once per build_context) "
            f"| p50 {m50:.2f} ms, p95 {m95:.2f} ms |  |  |  |  |",
            "",
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
