#!/usr/bin/env python
"""Retrieval quality on LoCoMo: which turns of a long conversation answer a question.

    .venv/bin/python bench/locomo.py [--data bench/data/locomo10.json] [--samples conv-26,conv-30,...|all]
                                     [--embed-speaker] [--no-generalisation] [--out bench/LOCOMO_RESULTS.md]

LoCoMo is not part of this repository (its licence is CC BY-NC 4.0): download ``data/locomo10.json``
from https://github.com/snap-research/locomo to ``bench/data/locomo10.json`` (ignored by git) or pass
``--data``. By default the five development conversations are measured (:data:`DEV_SAMPLES`, the
split the published figures use); ``--samples all`` takes every conversation of the file.

Every conversation of the file is stored through brain's real store (``RagStore.upsert_docs``,
type ``turn``, in a temporary embedded Chroma): role ``user`` for the first speaker and
``assistant`` for the second, ``turn_index`` in dialogue order, ``timestamp`` the session's date,
``speaker``, ``dia_id`` and ``session`` in metadata; a shared photo is part of the turn's text
(``[shares a photo: <caption>]``). ``--embed-speaker`` stores each turn with the embedding of
``"<speaker>: <text>"`` instead of the text alone (the representation the issue's baseline figures
were measured with; the stored text is the same).

Each question of categories 1-4 (multi-hop, temporal, open-domain, single-hop; 5 has no answer in
the conversation) is asked of its own conversation by every method:

- raw Chroma similarity: ``col.query`` with ``where={"conversation_id": ...}``
- dense, exact: cosine similarity of every turn, in process (what Chroma's index approximates)
- BM25: Okapi BM25 over the turn texts, plain lower-case words (no stemming, no stop words)
- RRF: reciprocal-rank fusion (k=60) of dense (exact) and that BM25
- brain: :func:`brain.turn_search` (z-scored dense + BM25 over stemmed words with speaker and date,
  a bonus for the speaker the question names, neighbouring-turn context), plus ablations

recall@k: the fraction of a question's evidence turns in the top k, averaged over questions;
hit@k: whether any evidence turn is in the top k. Evidence strings are split on ';' and spaces and
the parts matching ``D<session>:<turn>`` kept; malformed strings and evidence naming no turn are
counted. ms/query excludes embedding the question (the same for every method, reported once).

Weight sensitivity: the ranking's three weights are round defaults; the script also picks them from a
grid on some of the file's conversations and scores the pick on the others (leave one conversation
out, and every pick-on-2/score-on-3 split), next to the defaults on the same questions. On the
development split this is not a held-out measurement: the method was designed on those very
conversations. It shows whether anything hinges on a fitted weight value.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

INVOKED_FROM = Path.cwd()  # --data and --out are relative to where the script was started
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory

from brain.config import Settings  # noqa: E402
from brain.core import open_store  # noqa: E402
from brain.schemas import check_conversation_id  # noqa: E402
from brain.store import RagStore  # noqa: E402
from brain.text import BM25Index, tokenize  # noqa: E402
from brain.turn_search import TurnIndex, TurnSearchWeights  # noqa: E402

DEFAULT_DATA = ROOT / "bench" / "data" / "locomo10.json"
LOCOMO_SOURCE = "https://github.com/snap-research/locomo (the file data/locomo10.json)"
#: the development split: the conversations the method was designed and its figures measured on
DEV_SAMPLES = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
EVIDENCE_RE = re.compile(r"^D(\d+):(\d+)$")
SESSION_DATE_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE)
MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
RRF_K = 60
TOP = 10
TARGET_RECALL10 = 0.65
TARGET_HIT5 = 0.60


# ---- data -------------------------------------------------------------------------------------
def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08T13:56:00+00:00 (LoCoMo gives no time zone; taken as UTC)."""
    m = SESSION_DATE_RE.match(text or "")
    if not m or m.group(5).lower() not in MONTHS:
        raise ValueError(f"unrecognised session date {text!r} (expected e.g. '1:56 pm on 8 May, 2023')")
    hour, minute, half, day, month, year = m.groups()
    hour = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), MONTHS[month.lower()], int(day), hour, int(minute), tzinfo=timezone.utc)


def conversation_id(sample_id: str) -> str:
    """LoCoMo's 'conv-26' already is a valid brain conversation id; anything else gets the prefix."""
    candidate = sample_id if sample_id.startswith("conv-") else "conv-" + re.sub(r"[^A-Za-z0-9._:-]", "-", sample_id)
    return check_conversation_id(candidate)


@dataclass
class Conversation:
    id: str
    speakers: tuple[str, str]
    docs: list[dict]  # turn documents for upsert_docs
    questions: list[dict]  # {question, category, evidence: [dia_id]}
    evidence_stats: Counter = field(default_factory=Counter)


def load(path: Path) -> list[Conversation]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for sample in samples:
        conv = sample["conversation"]
        speakers = (conv["speaker_a"], conv["speaker_b"])
        docs = []
        session = 1
        while f"session_{session}" in conv:
            when = session_date(conv[f"session_{session}_date_time"])
            for turn in conv[f"session_{session}"]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [shares a photo: {turn['blip_caption']}]"
                docs.append({
                    "text": text, "type": "turn", "conversation_id": conversation_id(sample["sample_id"]),
                    "role": "user" if turn["speaker"] == speakers[0] else "assistant",
                    "turn_index": len(docs) + 1, "timestamp": when, "source": "import",
                    "speaker": turn["speaker"], "dia_id": turn["dia_id"], "session": session,
                })
            session += 1
        dia_ids = {d["dia_id"] for d in docs}
        stats: Counter = Counter()
        questions = []
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = []
            for raw in qa.get("evidence", []):
                parts = [p for p in re.split(r"[;\s]+", raw) if p]
                good = [p for p in parts if EVIDENCE_RE.match(p)]
                if len(parts) != 1 or len(good) != 1:
                    stats["malformed evidence strings (split or dropped)"] += 1
                for dia in good:
                    if dia in dia_ids:
                        evidence.append(dia)
                    else:
                        stats["evidence ids naming no turn (dropped)"] += 1
            evidence = list(dict.fromkeys(evidence))
            if not evidence:
                stats["questions without usable evidence (skipped)"] += 1
                continue
            questions.append({"question": qa["question"], "category": qa["category"], "evidence": evidence})
        out.append(Conversation(conversation_id(sample["sample_id"]), speakers, docs, questions, stats))
    return out


# ---- methods ----------------------------------------------------------------------------------
def rrf(*rankings: np.ndarray, k: int = RRF_K) -> np.ndarray:
    """Reciprocal-rank fusion scores from score vectors (rank 1 = highest score, ties by position)."""
    total = np.zeros(len(rankings[0]))
    for scores in rankings:
        order = np.lexsort((np.arange(len(scores)), -scores))
        ranks = np.empty(len(scores))
        ranks[order] = np.arange(1, len(scores) + 1)
        total += 1.0 / (k + ranks)
    return total


def top_ids(scores: np.ndarray, ids: list[str], k: int = TOP) -> list[str]:
    return [ids[i] for i in np.lexsort((np.arange(len(scores)), -scores))[:k]]


def metrics(found: list[str], evidence: list[str]) -> tuple[float, float, float]:
    top5, top10 = set(found[:5]), set(found[:10])
    return (
        sum(e in top5 for e in evidence) / len(evidence),
        sum(e in top10 for e in evidence) / len(evidence),
        float(any(e in top5 for e in evidence)),
    )


GRID = {
    "lexical share": (0.3, 0.4, 0.5, 0.6, 0.7),  # dense = 1 - share
    "speaker": (0.0, 0.5, 1.0, 1.5),
    "neighbour": (0.0, 0.25, 0.5, 0.75, 1.0),
}


def grid_weights() -> list[TurnSearchWeights]:
    return [TurnSearchWeights(dense=1 - share, lexical=share, speaker=speaker, neighbour=neighbour)
            for share, speaker, neighbour in itertools.product(*GRID.values())]


def describe(w: TurnSearchWeights) -> str:
    return f"dense {w.dense:.1f} / lexical {w.lexical:.1f}, speaker {w.speaker:g}, neighbour {w.neighbour:g}"


# ---- run --------------------------------------------------------------------------------------
def run(args) -> str:
    conversations = args.conversations
    with tempfile.TemporaryDirectory(prefix="brain-locomo-") as tmp, \
            open_store(Settings(data_dir=Path(tmp), index_types="memory")) as store:
        return measure(args, conversations, store)


def measure(args, conversations: list[Conversation], store: RagStore) -> str:
    embedder = store.embedder

    # ingest
    t0 = time.perf_counter()
    n_turns = 0
    for conv in conversations:
        docs = conv.docs
        if args.embed_speaker:
            vectors = embedder.embed_documents([f"{d['speaker']}: {d['text']}" for d in docs])
            docs = [{**d, "embedding": v} for d, v in zip(docs, vectors)]
        store.upsert_docs(docs)
        n_turns += len(docs)
    ingest_s = time.perf_counter() - t0

    defaults = TurnSearchWeights()
    methods = ["raw Chroma similarity (col.query)", "dense, exact", "BM25 (plain words)", "RRF dense + BM25",
               "brain hybrid (turn_search)", "  without neighbour context", "  without speaker bonus",
               "  z-fused dense + BM25 only"]
    ablations = {
        "  without neighbour context": TurnSearchWeights(neighbour=0.0),
        "  without speaker bonus": TurnSearchWeights(speaker=0.0),
        "  z-fused dense + BM25 only": TurnSearchWeights(speaker=0.0, neighbour=0.0),
    }
    per_q: dict[str, list[tuple[int, str, tuple[float, float, float]]]] = defaultdict(list)
    seconds: Counter = Counter()
    embed_s = 0.0
    get_s = build_s = 0.0
    # choosing weights on some conversations and scoring them on another needs at least two
    grid = [] if args.no_generalisation or len(conversations) < 2 else grid_weights()
    grid_results: dict[int, dict[str, list[tuple[float, float, float]]]] = defaultdict(lambda: defaultdict(list))
    n_questions = 0
    for conv in conversations:
        t = time.perf_counter()
        turns = store.get(where={"conversation_id": conv.id}, type="turn", include_embeddings=True)
        get_s += time.perf_counter() - t
        t = time.perf_counter()
        index = TurnIndex(turns, defaults)
        build_s += time.perf_counter() - t
        dia = [d.metadata["dia_id"] for d in index.turns]
        ids = [d.id for d in index.turns]
        by_id = dict(zip(ids, dia))
        plain = BM25Index([tokenize(d.text, stem=False, stop_words=False) for d in index.turns])
        ablation_indexes = {name: TurnIndex(turns, w) for name, w in ablations.items()}
        grid_indexes = [TurnIndex(turns, w) for w in grid]
        for q in conv.questions:
            n_questions += 1
            t = time.perf_counter()
            vector = embedder.embed_query(q["question"])
            embed_s += time.perf_counter() - t
            unit = vector / np.linalg.norm(vector)
            found: dict[str, list[str]] = {}

            t = time.perf_counter()
            got = store.col.query(query_embeddings=[vector.tolist()], n_results=TOP,
                                  where={"conversation_id": conv.id}, include=[])
            found[methods[0]] = [by_id[i] for i in got["ids"][0]]
            seconds[methods[0]] += time.perf_counter() - t

            t = time.perf_counter()
            dense = index.similarities(unit)
            found[methods[1]] = top_ids(dense, dia)
            seconds[methods[1]] += time.perf_counter() - t

            t = time.perf_counter()
            bm25 = plain.scores(tokenize(q["question"], stem=False, stop_words=False))
            found[methods[2]] = top_ids(bm25, dia)
            seconds[methods[2]] += time.perf_counter() - t

            t = time.perf_counter()
            found[methods[3]] = top_ids(rrf(index.similarities(unit),
                                            plain.scores(tokenize(q["question"], stem=False, stop_words=False))), dia)
            seconds[methods[3]] += time.perf_counter() - t

            t = time.perf_counter()
            found[methods[4]] = [by_id[h.id] for h in index.search(q["question"], vector, TOP)]
            seconds[methods[4]] += time.perf_counter() - t

            for name, ablation in ablation_indexes.items():
                t = time.perf_counter()
                found[name] = [by_id[h.id] for h in ablation.search(q["question"], vector, TOP)]
                seconds[name] += time.perf_counter() - t

            for name in methods:
                per_q[name].append((q["category"], conv.id, metrics(found[name], q["evidence"])))
            for g, gi in enumerate(grid_indexes):
                grid_results[g][conv.id].append(metrics([by_id[h.id] for h in gi.search(q["question"], vector, TOP)], q["evidence"]))

    lines = report_header(args, conversations, n_turns, n_questions, ingest_s, embed_s, get_s, build_s, store)
    lines += main_table(methods, per_q, seconds, n_questions)
    lines += per_conversation_table(conversations, per_q, methods[0], methods[3], methods[4])
    if grid:
        lines += generalisation(conversations, grid, grid_results, per_q[methods[4]])
    return "\n".join(lines) + "\n"


def mean3(rows) -> np.ndarray:
    return np.mean(np.array(rows), axis=0) if rows else np.full(3, np.nan)


def report_header(args, conversations, n_turns, n_questions, ingest_s, embed_s, get_s, build_s, store) -> list[str]:
    stats = sum((c.evidence_stats for c in conversations), Counter())
    cats = Counter(q["category"] for c in conversations for q in c.questions)
    lines = [
        "# LoCoMo: evidence-turn retrieval",
        "",
        f"`.venv/bin/python bench/locomo.py{' --embed-speaker' if args.embed_speaker else ''}` on "
        f"{args.data.name} ({', '.join(c.id for c in conversations)}); {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, embedder {store.embedder.name}.",
        "",
        f"- {n_turns} turns stored through `RagStore.upsert_docs` in {ingest_s:.1f} s ({n_turns / ingest_s:.0f} turns/s, "
        f"embedding included); turns embedded as {'`<speaker>: <text>`' if args.embed_speaker else 'their text'}.",
        f"- {n_questions} questions of categories 1-4 ("
        + ", ".join(f"{CATEGORIES[c]} {cats[c]}" for c in sorted(cats)) + "); "
        + ("; ".join(f"{v} {k}" for k, v in sorted(stats.items())) or "no malformed evidence") + ".",
        f"- Embedding a question: {1000 * embed_s / n_questions:.2f} ms (not in the ms/query below). brain's path also "
        f"fetches the turns (`store.get(..., include_embeddings=True)`: {1000 * get_s / len(conversations):.0f} ms per "
        f"conversation) and builds the index (`TurnIndex`: {1000 * build_s / len(conversations):.0f} ms per conversation) "
        f"once per conversation.",
        "",
    ]
    return lines


def main_table(methods, per_q, seconds, n_questions) -> list[str]:
    base = mean3([m for _, _, m in per_q[methods[0]]])
    head = "| method | R@5 | R@10 | H@5 | " + " | ".join(f"{c} {CATEGORIES[c]} R@10 / H@5" for c in CATEGORIES) + " | ms/query | R@10 vs raw |"
    lines = ["## All questions", "", head, "|" + "---|" * (head.count("|") - 1)]
    for name in methods:
        overall = mean3([m for _, _, m in per_q[name]])
        cells = []
        for c in CATEGORIES:
            cat = mean3([m for cat_, _, m in per_q[name] if cat_ == c])
            cells.append(f"{cat[1]:.3f} / {cat[2]:.3f}" if not np.isnan(cat[1]) else "no questions")
        label = name.replace("  ", "&nbsp;&nbsp;") if name.startswith("  ") else name
        lines.append(f"| {label} | {overall[0]:.3f} | {overall[1]:.3f} | {overall[2]:.3f} | " + " | ".join(cells)
                     + f" | {1000 * seconds[name] / n_questions:.2f} | {overall[1] / base[1]:.2f}x |")
    hybrid = mean3([m for _, _, m in per_q[methods[4]]])
    verdict = "met" if hybrid[1] >= TARGET_RECALL10 and hybrid[2] >= TARGET_HIT5 else "NOT met"
    lines += ["", f"Target recall@10 >= {TARGET_RECALL10} and hit@5 >= {TARGET_HIT5}: **{verdict}** "
              f"(brain hybrid {hybrid[1]:.3f} / {hybrid[2]:.3f}).", ""]
    return lines


def per_conversation_table(conversations, per_q, raw, rrf_name, hybrid) -> list[str]:
    lines = ["## Per conversation (default weights: nothing tuned per conversation)", "",
             "| conversation | questions | raw R@10 / H@5 | RRF R@10 / H@5 | brain R@10 / H@5 |", "|---|---|---|---|---|"]
    for conv in conversations:
        cells = []
        for name in (raw, rrf_name, hybrid):
            m = mean3([m for _, cid, m in per_q[name] if cid == conv.id])
            cells.append(f"{m[1]:.3f} / {m[2]:.3f}")
        lines.append(f"| {conv.id} | {len(conv.questions)} | " + " | ".join(cells) + " |")
    return lines + [""]


def generalisation(conversations, grid, grid_results, default_rows) -> list[str]:
    ids = [c.id for c in conversations]
    default_by_conv = defaultdict(list)
    for _, cid, m in default_rows:
        default_by_conv[cid].append(m)

    def pooled(g: int, convs) -> np.ndarray:
        return mean3([m for cid in convs for m in grid_results[g][cid]])

    def objective(g: int, convs) -> float:
        m = pooled(g, convs)
        return (m[1] + m[2]) / 2  # the target's two figures, equally weighted

    def best(convs) -> int:
        return max(range(len(grid)), key=lambda g: objective(g, convs))  # ties: the earlier grid point

    lines = ["## Weight sensitivity (within these conversations)", "",
             "Nothing in this section is held out: on the development split the method's parts and defaults "
             "were designed on these very conversations. The rows below choose among the three weights on some "
             "of them and score the choice on another; they show whether anything hinges on a fitted weight "
             "value, not how the method does on conversations it has not seen.", "",
             f"Grid: lexical share {GRID['lexical share']} (dense = 1 - share), speaker {GRID['speaker']}, "
             f"neighbour {GRID['neighbour']} ({len(grid)} points); BM25 k1 1.2, b 0.75 fixed. The objective is "
             "(R@10 + H@5) / 2 pooled over the choosing conversations' questions.", ""]
    overall_best = best(ids)
    m = pooled(overall_best, ids)
    lines.append(f"Best grid point on all {len(ids)} conversations (in-sample, an upper bound): {describe(grid[overall_best])}: "
                 f"R@10 {m[1]:.3f}, H@5 {m[2]:.3f}; the defaults ({describe(TurnSearchWeights())}): "
                 f"R@10 {mean3([r for _, _, r in default_rows])[1]:.3f}, H@5 {mean3([r for _, _, r in default_rows])[2]:.3f}.")
    lines += ["", "### Leave one conversation out (a choice among the weights, inside these conversations)", "",
              "| left out | weights picked on the other conversations | its R@10 / H@5 (picked) | its R@10 / H@5 (defaults) |",
              "|---|---|---|---|"]
    left_rows, default_left = [], []
    for cid in ids:
        g = best([c for c in ids if c != cid])
        left_rows += grid_results[g][cid]
        default_left += default_by_conv[cid]
        a, d = mean3(grid_results[g][cid]), mean3(default_by_conv[cid])
        lines.append(f"| {cid} | {describe(grid[g])} | {a[1]:.3f} / {a[2]:.3f} | {d[1]:.3f} / {d[2]:.3f} |")
    a, d = mean3(left_rows), mean3(default_left)
    lines.append(f"| **pooled** | | **{a[1]:.3f} / {a[2]:.3f}** | **{d[1]:.3f} / {d[2]:.3f}** |")
    if len(ids) >= 3:
        splits = list(itertools.combinations(ids, 2))
        tuned, worst = [], [np.inf, np.inf]
        for tune in splits:
            test = [c for c in ids if c not in tune]
            m = pooled(best(list(tune)), test)
            tuned.append(m)
            worst = [min(worst[0], m[1]), min(worst[1], m[2])]
        tuned = np.array(tuned)
        lines += ["", f"### Pick on 2, score on the other {len(ids) - 2} ({len(splits)} splits)", "",
                  f"R@10 mean {tuned[:, 1].mean():.3f} (worst split {worst[0]:.3f}), "
                  f"H@5 mean {tuned[:, 2].mean():.3f} (worst split {worst[1]:.3f})."]
    return lines + [""]


def data_path(given: Path | None) -> Path:
    """``--data`` relative to where the script was started; the default file when not given."""
    if given is None:
        return DEFAULT_DATA
    given = given.expanduser()
    return given if given.is_absolute() else INVOKED_FROM / given


def select(conversations: list[Conversation], samples: str, path: Path) -> list[Conversation]:
    """The conversations ``--samples`` names (comma-separated ids, or ``all``), in the file's order."""
    if samples == "all":
        return conversations
    wanted = [s.strip() for s in samples.split(",") if s.strip()]
    missing = [s for s in wanted if s not in {c.id for c in conversations}]
    if missing or not wanted:
        raise ValueError(f"{path} has no sample {', '.join(missing) or '(none named)'}; it holds "
                         f"{', '.join(c.id for c in conversations)} (use --samples all for every one)")
    return [c for c in conversations if c.id in wanted]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help=f"a LoCoMo JSON file (list of samples; default {DEFAULT_DATA})")
    parser.add_argument("--samples", default=",".join(DEV_SAMPLES),
                        help="comma-separated sample ids to measure, or 'all' (default: the development split)")
    parser.add_argument("--embed-speaker", action="store_true", help="embed turns as '<speaker>: <text>'")
    parser.add_argument("--no-generalisation", action="store_true", help="skip the weight grid (the weight-sensitivity section)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    args.data = data_path(args.data)
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist. LoCoMo does not come with brain: download it from "
                     f"{LOCOMO_SOURCE} to {DEFAULT_DATA}, or pass --data PATH")
    try:
        args.conversations = select(load(args.data), args.samples, args.data)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # not JSON, or not LoCoMo's shape
        parser.error(f"{args.data} is not a usable LoCoMo file: {type(exc).__name__}: {exc}")
    report = run(args)
    print(report)
    if args.out:
        out = args.out if args.out.is_absolute() else INVOKED_FROM / args.out
        out.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
