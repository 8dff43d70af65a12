#!/usr/bin/env python
"""Memory formation on LoCoMo: do the facts a model forms from a conversation match the gold observations?

    OLLAMA_HOST=http://<host>:11434 BRAIN_FORMATION_MODEL=<model> \\
        .venv/bin/python bench/bench_formation.py [--data ../shared/bench/locomo/locomo-dev.json]
                                                  [--samples conv-26,conv-30|all] [--every-n 5]
                                                  [--out bench/FORMATION_QUALITY_RESULTS.md]

Any Ollama endpoint will do (``OLLAMA_HOST``; the model from ``BRAIN_FORMATION_MODEL``, the summaries'
model from ``BRAIN_SUMMARY_MODEL``): every other setting is the default, in a temporary store.

Feeding. Each conversation is recorded exchange by exchange through ``ChatMemory.record_exchange``
(bench/locomo.py's :func:`~locomo.exchanges` and :func:`~locomo.ingest`: speaker A as the user, B as the
assistant, each session's date as the timestamp) in the scope of an entity named after the conversation,
with ``BRAIN_FORMATION=true`` and the summary worker running, so formation runs as it does in service:
one batch per summary window of ``2 * --every-n`` turns, on the worker's queue. Then the queue is waited
for. The trailing turns of a conversation that fill no window are never formed (as in service, until the
conversation goes on): gold observations whose source turns are not all in a formed window are left out
of the scoring, and counted.

(a) Facts. The formed memories of a conversation (``source: chat``, every status: a fact later superseded
was still formed) are scored against its gold observations (bench/bench_relevance.py's :func:`load`) by
:func:`score_facts`: both sides embedded by the local MiniLM embedder brain ships, cosine similarity,
one-to-one greedy matching at :data:`THRESHOLD` -> precision (matched / formed), recall (matched / gold),
F1, per conversation and pooled (matches summed over conversations).

The threshold, 0.75, was read off locomo-dev.json with MiniLM before any model was run:
- facts about other people stay below it: a gold observation's best match among the next conversation's
  observations has p99 0.54-0.66 and a maximum of 0.69 over the five pairs of conversations;
- a restatement clears it: 28 observations of conv-26 rewritten by hand as a small model words them
  ("Melanie is taking a pottery class." for "Melanie signed up for a pottery class and finds it therapeutic
  for self-expression and creativity.") are at 0.79 or more from their own observation (p10 0.83, median 0.90).
LoCoMo states many facts more than once (an observation's nearest other observation of the same
conversation: median 0.73-0.80), so a formed fact may match a restatement rather than its own source; the
matching being one-to-one, a fact the gold says three times and the model forms once counts once. Greedy
matching (the most similar pair first) is simple to check by hand; it may match a pair or two fewer than
the largest matching would.

(b) Context. The relevance benchmark's memory-section measurement (bench/bench_relevance.py's
:func:`measure`: recall, precision, foreign-empty over the questions of categories 1-4 asked through
``build_context``) on the formed memories, a memory being relevant when one of its source turns is in
the question's evidence; next to it, the same measurement on the gold observations stored as
bench_relevance stores them, in a store of their own.

(c) Cost. Prompt and eval tokens and model seconds, from the formation batches' counters (repairs and
retries included; summaries not), per exchange fed; and the time ``record_exchange`` took per exchange.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

INVOKED_FROM = Path.cwd()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_relevance as relevance  # noqa: E402
import locomo  # noqa: E402

#: cosine similarity at or above which a formed fact and a gold observation are the same fact (see above)
THRESHOLD = 0.75


@dataclass(frozen=True)
class FactScore:
    """How a set of formed facts matches a set of gold facts. ``pairs``: (formed index, gold index,
    similarity) of each match, most similar first."""

    extracted: int
    gold: int
    threshold: float
    pairs: tuple[tuple[int, int, float], ...] = field(default=())

    @property
    def matched(self) -> int:
        return len(self.pairs)

    @property
    def precision(self) -> float:
        """matched / formed; nothing formed is precision 1.0 when there was nothing to form, else 0.0."""
        return self.matched / self.extracted if self.extracted else float(self.gold == 0)

    @property
    def recall(self) -> float:
        """matched / gold; nothing to form is recall 1.0."""
        return self.matched / self.gold if self.gold else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: FactScore) -> FactScore:
        """Pooled over two sets (the indices of the pairs are no longer meaningful and are dropped)."""
        if other.threshold != self.threshold:
            raise ValueError(f"cannot pool scores at thresholds {self.threshold} and {other.threshold}")
        return FactScore(self.extracted + other.extracted, self.gold + other.gold, self.threshold,
                         tuple((-1, -1, s) for *_, s in self.pairs + other.pairs))


def unit_vectors(embedder, texts: list[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    vectors = np.asarray(embedder.embed_documents(list(texts)), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def score_facts(extracted: list[str], gold: list[str], embedder, threshold: float = THRESHOLD) -> FactScore:
    """Match ``extracted`` to ``gold`` one to one: every pair whose cosine similarity (``embedder``'s
    document vectors) is at least ``threshold``, most similar first (ties: the earlier formed fact, then
    the earlier gold fact), is a match unless one of its two facts is matched already."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if not extracted or not gold:
        return FactScore(len(extracted), len(gold), threshold)
    similarity = unit_vectors(embedder, extracted) @ unit_vectors(embedder, gold).T
    rows, cols = np.nonzero(similarity >= threshold)
    order = np.lexsort((cols, rows, -similarity[rows, cols]))
    used_extracted: set[int] = set()
    used_gold: set[int] = set()
    pairs = []
    for k in order:
        i, j = int(rows[k]), int(cols[k])
        if i in used_extracted or j in used_gold:
            continue
        used_extracted.add(i)
        used_gold.add(j)
        pairs.append((i, j, float(similarity[i, j])))
    return FactScore(len(extracted), len(gold), threshold, tuple(pairs))
