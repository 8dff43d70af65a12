#!/usr/bin/env python
"""How far the related-turn ranking can go with the signals it has, on LoCoMo.

    .venv/bin/python bench/locomo_ceiling.py [--data bench/data/locomo10.json] [--samples ...]
                                             [--left-out conv-42,conv-43] [--out bench/LOCOMO_CEILING.md]

The conversations are recorded as in ``bench/locomo.py`` (same data, same arguments). For every question
and every turn of its conversation (the ``RAG_TURN_TOP_K`` latest left out, as there), the signals are
taken from :class:`~brain.rules.turn_search.TurnIndex` itself, one hit per turn with its parts:

- dense, lexical, session, neighbour: the parts in standard deviations (divided by their shipped weights);
- speaker, time: whether the turn gets the speaker bonus and the time bonus;

and three more that brain does not use, to see whether they would pay:

- sentence: the standardised best cosine between the question and one sentence of the turn (a shared
  photo's caption counts as a sentence), each sentence embedded by the store's embedder and the
  speakers' names taken out as for the dense part;
- question: the turn ends with a question mark (it asks rather than tells);
- length: the log of the turn's length in characters, centred.

A ranking is a weighted sum of those. Coordinate ascent (three rounds over a grid of weights from -4 to 4,
from the shipped weights and from them with the sentence signal in the dense one's place) finds the weights with the best mean recall@10 on the conversations
the choices were made on; the report gives that fit's figures where it was fitted (an optimistic
ceiling: it has seen the answers), on the conversations left out, and for each of the choosing
conversations when fitted on the other ones. The fit is repeated with each category's recall@10 as
the objective: the best that category can do in-sample under any such weights.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402

from brain.features.chat import ChatMemory  # noqa: E402
from brain.model.vectors import unit_rows  # noqa: E402

SIGNALS = ("dense", "lexical", "session", "neighbour", "speaker", "time", "sentence", "question", "length")
#: grid of each weight's candidate values, and their negatives
GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
ROUNDS = 3
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'\[])|\s*(?=\[shares a photo)")


@dataclass
class Question:
    conversation: str
    category: int
    evidence: list[str]
    signals: np.ndarray  # turns x SIGNALS, the latest turns left out
    dia: list[str]  # those turns' LoCoMo ids
    hits: np.ndarray  # how many evidence entries name each turn


def sentences(text: str) -> list[str]:
    return [p.strip() for p in SENTENCE_BREAK.split(text) if p and p.strip()] or [text]


def standardised(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 1e-12 else np.zeros_like(values)


def collect(conversations, chat: ChatMemory) -> list[Question]:
    store, weights = chat.store, None
    out: list[Question] = []
    for conv in conversations:
        turns = store.conversation_turns(conv.id)
        recent = {t.id for t in store.recent_turns(conv.id, chat.settings.turn_top_k)}
        index = chat.related_turns.index(conv.id, turns)
        weights = index.weights
        ordered = index.turns
        position = {t.id: i for i, t in enumerate(ordered)}
        pieces = [(i, s) for i, t in enumerate(ordered) for s in sentences(t.text)]
        # the names taken out, as from the dense signal
        vectors = index.without_names(unit_rows(store.embedder.embed_documents([s for _, s in pieces])))
        owner = np.array([i for i, _ in pieces])
        keep = np.array([t.id not in recent for t in ordered])
        asks = np.array([t.text.rstrip().endswith("?") for t in ordered], dtype=float)
        length = np.log1p([len(t.text) for t in ordered])
        length -= length.mean()
        dia = [conv.dia_by_turn_id[t.id] for t in ordered]
        for q in conv.questions:
            vector = store.embedder.embed_query(q["question"])
            signals = np.zeros((len(ordered), len(SIGNALS)))
            for hit in index.search(q["question"], vector, len(ordered)):
                i = position[hit.id]
                signals[i, :6] = (hit.dense_part / weights.dense, hit.lexical_part / weights.lexical,
                                  hit.session_part / weights.session, hit.neighbour_part / weights.neighbour,
                                  hit.speaker_part > 0, hit.time_part > 0)
            best = np.full(len(ordered), -1.0)
            np.maximum.at(best, owner, vectors @ index.without_names(unit_rows(vector)))
            signals[:, 6], signals[:, 7], signals[:, 8] = standardised(best), asks, length
            hits = np.array([q["evidence"].count(d) for d in dia], dtype=float)
            out.append(Question(conv.id, q["category"], q["evidence"], signals[keep],
                                [d for d, k in zip(dia, keep) if k], hits[keep]))
    shipped = np.array([weights.dense, weights.lexical, weights.session, weights.neighbour, weights.speaker,
                        weights.time, 0.0, 0.0, 0.0])
    return out, shipped


def recall10(questions: list[Question], w: np.ndarray, category: int | None = None) -> float:
    values = [q.hits[np.argpartition(-(q.signals @ w), locomo.TOP)[:locomo.TOP]].sum() / len(q.evidence)
              for q in questions if category is None or q.category == category]
    return float(np.mean(values)) if values else float("nan")


def fit(questions: list[Question], shipped: np.ndarray, category: int | None = None) -> np.ndarray:
    """The weights with the best mean recall@10 (of ``category``'s questions) found by coordinate ascent
    from each of :func:`starts`; a local search, so a lower bound of the best any weights can do."""
    grid = np.concatenate([GRID, -np.array(GRID[1:])])
    found = []
    for start in starts(shipped):
        w, best = start, recall10(questions, start, category)
        for _ in range(ROUNDS):
            for j in range(len(w)):
                for value in grid:
                    trial = w.copy()
                    trial[j] = value
                    score = recall10(questions, trial, category)
                    if score > best + 1e-12:
                        w, best = trial, score
        found.append((best, -len(found), w))
    return max(found, key=lambda f: f[:2])[2]


def starts(shipped: np.ndarray) -> list[np.ndarray]:
    """The shipped weights, and the sentence signal in place of the dense one (an ascent moves one weight
    at a time, so it would not swap them by itself)."""
    by_sentence = shipped.copy()
    by_sentence[SIGNALS.index("sentence")], by_sentence[SIGNALS.index("dense")] = shipped[0], 0.0
    return [shipped.copy(), by_sentence]


def figures(questions: list[Question], w: np.ndarray) -> str:
    rows = []
    for q in questions:
        scores = q.signals @ w
        found = [q.dia[i] for i in np.lexsort((np.arange(len(scores)), -scores))[:locomo.TOP]]
        rows.append((q.category, locomo.metrics(found, q.evidence)))
    m = locomo.mean3([r for _, r in rows])
    cats = [locomo.mean3([r for c, r in rows if c == cat])[1] for cat in locomo.CATEGORIES]
    return (f"{len(rows)} | {m[1]:.3f} | {m[2]:.3f} | {m[3]:.3f} | "
            + " | ".join("-" if np.isnan(v) else f"{v:.3f}" for v in cats))


def weights_text(w: np.ndarray) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in zip(SIGNALS, w) if value)


def measure(args, chat: ChatMemory) -> str:
    t0 = time.perf_counter()
    for conv in args.conversations:
        locomo.ingest(chat, conv)
    ingest_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    questions, shipped = collect(args.conversations, chat)
    collect_s = time.perf_counter() - t0
    ids = [c.id for c in args.conversations]
    chosen_on = [c for c in ids if c not in args.left_out]
    left_out = [c for c in ids if c in args.left_out]
    if not chosen_on:
        raise SystemExit("every conversation is left out: nothing to fit on (name fewer with --left-out)")

    def of(group):
        return [q for q in questions if q.conversation in group]

    t0 = time.perf_counter()
    fitted = fit(of(chosen_on), shipped)
    head = ("| weights | on | questions | R@10 | H@5 | session R@10 | "
            + " | ".join(f"{c} {n}" for c, n in locomo.CATEGORIES.items()) + " |")
    rule = "|" + "---|" * (head.count("|") - 1)
    lines = [
        "# LoCoMo: how far the related-turn ranking can go with its signals",
        "",
        f"`.venv/bin/python bench/locomo_ceiling.py` on {args.data.name} ({', '.join(ids)}); "
        f"embedder {chat.store.embedder.name}. Recorded in {ingest_s:.0f} s; signals (sentences embedded "
        f"included) in {collect_s:.0f} s. Recall@10 per category; weights fitted by coordinate ascent on "
        f"{', '.join(chosen_on)} (the choosing conversations).",
        "",
        "## The best weights for all questions", "", head, rule,
    ]
    for label, w in ((f"shipped ({weights_text(shipped)})", shipped), (f"fitted ({weights_text(fitted)})", fitted)):
        lines.append(f"| {label} | choosing | {figures(of(chosen_on), w)} |")
        if left_out:
            lines.append(f"| {label} | left out | {figures(of(left_out), w)} |")
    if len(chosen_on) > 1:
        lines += ["", "## Fitted on the other choosing conversations", "", head, rule]
        for held in chosen_on:
            w = fit(of([c for c in chosen_on if c != held]), shipped)
            lines.append(f"| shipped | {held} | {figures(of([held]), shipped)} |")
            lines.append(f"| fitted without it ({weights_text(w)}) | {held} | {figures(of([held]), w)} |")
    lines += ["", "## The best weights for one category, in-sample", "", head, rule]
    for category, name in locomo.CATEGORIES.items():
        w = fit(of(chosen_on), shipped, category)
        lines.append(f"| best for {name} ({weights_text(w)}) | choosing | {figures(of(chosen_on), w)} |")
    lines += ["", f"Fitting took {time.perf_counter() - t0:.0f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    os.chdir(ROOT)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = locomo.parse_args(parser)
    with locomo.chat_memory() as (_, chat):
        report = measure(args, chat)
    locomo.publish(report, args.out)


if __name__ == "__main__":
    main()
