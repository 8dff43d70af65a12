#!/usr/bin/env python
"""Retrieval quality on LoCoMo, on the path a chat backend uses: which turns of a long conversation answer a question.

    .venv/bin/python bench/locomo.py [--data bench/data/locomo10.json] [--samples conv-26,conv-30,...|all]
                                     [--left-out conv-42,conv-43] [--out bench/LOCOMO_RESULTS.md]

LoCoMo is not part of this repository (its licence is CC BY-NC 4.0): download ``data/locomo10.json``
from https://github.com/snap-research/locomo to ``bench/data/locomo10.json`` (ignored by git) or pass
``--data``. By default the five development conversations are measured (:data:`DEV_SAMPLES`, the
split the published figures use); ``--samples all`` takes every conversation of the file.

Every conversation is recorded through :meth:`ChatMemory.record_exchange` (:func:`ingest`), in a
temporary embedded Chroma, as a chat backend would: speaker A as the user, speaker B as the
assistant (their names as ``user_name`` / ``assistant_name``), each session's date as the timestamp,
a shared photo as part of the turn's text (``[shares a photo: <caption>]``). A followed by B is one
exchange; a turn without its partner in its session (a session B opens, or one A closes) is an
exchange of one turn.

Each question of categories 1-4 (multi-hop, temporal, open-domain, single-hop; 5 has no answer in
the conversation) is asked of its own conversation, after its last turn, by every method:

- brain: :meth:`ChatMemory.related_turns_for` (:func:`retrieve`), the call ``build_context`` makes
  for its related turns (z-scored dense, with the speakers' names projected out of the vectors, + BM25
  over stemmed words with speaker, date and the previous turn's words, a bonus for the speaker the
  question names and one for the turns that say when if the question asks when, the best-matching
  session's share,
  neighbouring-turn context; nothing when no turn reaches the embedder's similarity floor), with k = 10
  instead of ``RAG_RELATED_TURN_TOP_K``; it leaves out the ``RAG_TURN_TOP_K`` latest turns, which the
  context shows anyway (the header counts the evidence turns among them). Ablations rank the same turns
  with :class:`~brain.rules.turn_search.TurnIndex` and other weights, or without the speakers' names (and
  without the gate). The gate is also measured on each question asked of the next conversation.
- raw Chroma similarity: ``col.query`` with ``where={"conversation_id": ...}`` on a plain Chroma
  collection of the same turns embedded as ``"<speaker>: <text>"`` (the stronger raw baseline)
- BM25: Okapi BM25 over the turn texts, plain lower-case words (no stemming, no stop words)
- RRF: reciprocal-rank fusion (k=60) of that dense ranking (exact) and that BM25

recall@k: the fraction of a question's evidence turns in the top k, averaged over questions;
hit@k: whether any evidence turn is in the top k. Evidence strings are split on ';' and spaces and
the parts matching ``D<session>:<turn>`` kept; malformed strings and evidence naming no turn are
counted. ms/query excludes embedding the question (the same for every method, reported once).

``--left-out`` names conversations kept out of every choice made on this benchmark; the report
gives their pooled figures next to those of the conversations the choices were made on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import chromadb
import numpy as np

INVOKED_FROM = Path.cwd()  # --data and --out are relative to where the script was started
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.chat import ChatMemory  # noqa: E402
from brain.model.results import Document  # noqa: E402
from brain.model.schemas import check_conversation_id  # noqa: E402
from brain.providers.summarizers import ExtractiveSummarizer  # noqa: E402
from brain.rules.turn_search import TurnIndex, TurnSearchWeights  # noqa: E402
from brain.text import BM25Index, tokenize  # noqa: E402

DEFAULT_DATA = ROOT / "bench" / "data" / "locomo10.json"
LOCOMO_SOURCE = "https://github.com/snap-research/locomo (the file data/locomo10.json)"
#: the development split: the conversations the method was designed and its figures measured on
DEV_SAMPLES = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
#: kept out of every choice made since the speakers moved onto the chat path (fixed before measuring)
LEFT_OUT = ("conv-42", "conv-43")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
EVIDENCE_RE = re.compile(r"^D(\d+):(\d+)$")
SESSION_DATE_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE)
MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
RRF_K = 60
TOP = 10
TARGET_RECALL10 = 0.80
TARGET_HIT5 = 0.78
TARGET_CATEGORY_RECALL10 = 0.60


# ---- data -------------------------------------------------------------------------------------
def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08T13:56:00+00:00 (LoCoMo gives no time zone; taken as UTC)."""
    m = SESSION_DATE_RE.match(text or "")
    if not m or m.group(5).lower() not in MONTHS:
        raise ValueError(f"unrecognised session date {text!r} (expected e.g. '1:56 pm on 8 May, 2023')")
    hour, minute, half, day, month, year = m.groups()
    hour = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), MONTHS[month.lower()], int(day), hour, int(minute), tzinfo=UTC)


def conversation_id(sample_id: str) -> str:
    """LoCoMo's 'conv-26' already is a valid brain conversation id; anything else gets the prefix."""
    candidate = sample_id if sample_id.startswith("conv-") else "conv-" + re.sub(r"[^A-Za-z0-9._:-]", "-", sample_id)
    return check_conversation_id(candidate)


@dataclass
class Turn:
    speaker: str
    dia_id: str
    text: str  # as a chat backend stores it: a shared photo's caption included


@dataclass
class Conversation:
    id: str
    speakers: tuple[str, str]  # (A: the user, B: the assistant)
    sessions: list[tuple[datetime, list[Turn]]]
    questions: list[dict]  # {question, category, evidence: [dia_id]}
    evidence_stats: Counter = field(default_factory=Counter)
    dia_by_turn_id: dict[str, str] = field(default_factory=dict)  # filled by ingest

    @property
    def turns(self) -> list[Turn]:
        return [t for _, turns in self.sessions for t in turns]


def load(path: Path) -> list[Conversation]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for sample in samples:
        conv = sample["conversation"]
        speakers = (conv["speaker_a"], conv["speaker_b"])
        sessions = []
        session = 1
        while f"session_{session}" in conv:
            when = session_date(conv[f"session_{session}_date_time"])
            turns = []
            for turn in conv[f"session_{session}"]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [shares a photo: {turn['blip_caption']}]"
                turns.append(Turn(turn["speaker"], turn["dia_id"], text))
            sessions.append((when, turns))
            session += 1
        dia_ids = {t.dia_id for _, turns in sessions for t in turns}
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
        out.append(Conversation(conversation_id(sample["sample_id"]), speakers, sessions, questions, stats))
    return out


def exchanges(conv: Conversation) -> list[tuple[datetime, Turn | None, Turn | None]]:
    """The conversation as (date, user turn, assistant turn) exchanges in order: A then B in the same
    session is one exchange; a turn without its partner stands alone (the other side None)."""
    user, assistant = conv.speakers
    out: list[tuple[datetime, Turn | None, Turn | None]] = []
    for when, turns in conv.sessions:
        i = 0
        while i < len(turns):
            turn = turns[i]
            nxt = turns[i + 1] if i + 1 < len(turns) else None
            if turn.speaker == user and nxt is not None and nxt.speaker == assistant:
                out.append((when, turn, nxt))
                i += 2
            else:
                out.append((when, turn, None) if turn.speaker == user else (when, None, turn))
                i += 1
    return out


def ingest(chat: ChatMemory, conv: Conversation, *, entity: str | None = None) -> int:
    """Record ``conv`` through ``chat.record_exchange`` (see the module docstring), in ``entity``'s scope
    when given; returns the turns written and fills ``conv.dia_by_turn_id``."""
    user, assistant = conv.speakers
    written = 0
    for when, user_turn, assistant_turn in exchanges(conv):
        exchange = chat.record_exchange(conv.id, user_turn.text if user_turn else None,
                                        assistant_turn.text if assistant_turn else None, entity=entity,
                                        timestamp=when, user_name=user, assistant_name=assistant)
        for turn_id, turn in ((exchange.user_turn_id, user_turn), (exchange.assistant_turn_id, assistant_turn)):
            if turn is not None:
                conv.dia_by_turn_id[turn_id] = turn.dia_id
                written += 1
    return written


def retrieve(chat: ChatMemory, conversation: str, question: str, vector: np.ndarray, k: int = TOP) -> list[str]:
    """The ids of the turns brain relates to ``question``: the call ``build_context`` makes."""
    return [item.id for item in chat.related_turns_for(conversation, question, query_vector=vector, k=k)]


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


def session_of(dia_id: str) -> str:
    return dia_id.split(":", 1)[0]


def metrics(found: list[str], evidence: list[str]) -> tuple[float, float, float, float]:
    """(R@5, R@10, H@5, session-level R@10: the share of the evidence's sessions among the sessions of the top 10)."""
    top5, top10 = set(found[:5]), set(found[:10])
    sessions, evidence_sessions = {session_of(d) for d in found[:10]}, {session_of(e) for e in evidence}
    return (
        sum(e in top5 for e in evidence) / len(evidence),
        sum(e in top10 for e in evidence) / len(evidence),
        float(any(e in top5 for e in evidence)),
        len(evidence_sessions & sessions) / len(evidence_sessions),
    )


def bench_settings(data_dir: Path) -> Settings:
    """The defaults, in a temporary store; summaries never fall due (they would only add embedding time)."""
    return Settings(data_dir=data_dir, index_types="memory", summary_every_n=1000)


def without_speakers(turns: list[Document]) -> list[Document]:
    """The turns as the chat path wrote them before it knew who spoke."""
    return [replace(t, metadata={k: v for k, v in t.metadata.items() if k != "speaker"}) for t in turns]


# ---- run --------------------------------------------------------------------------------------
@contextmanager
def chat_memory() -> Iterator[tuple[Path, ChatMemory]]:
    """A temporary directory and the chat memory of a store in it, as the benchmarks record conversations."""
    with tempfile.TemporaryDirectory(prefix="brain-locomo-") as tmp, \
            open_store(bench_settings(Path(tmp))) as store, \
            ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat:
        yield Path(tmp), chat


def run(args) -> str:
    with chat_memory() as (tmp, chat):
        raw = chromadb.PersistentClient(path=str(tmp / "raw"), settings=chromadb.Settings(anonymized_telemetry=False))
        return measure(args, args.conversations, chat, raw)


METHODS = ["raw Chroma similarity (col.query, `speaker: text` embedded)", "dense, exact (`speaker: text` embedded)",
           "BM25 (plain words)", "RRF dense + BM25", "brain (ChatMemory.related_turns_for)", "  without session context",
           "  without neighbour context", "  without the previous turn's words",
           "  without the previous turn's words, neighbour 0.5 (the former default)", "  without speaker bonus",
           "  without the time bonus for questions asking when", "  with the names left in the dense signal",
           "  without speaker names on the turns"]
BRAIN = METHODS[4]
ABLATIONS = {
    "  without session context": TurnSearchWeights(session=0.0),
    "  without neighbour context": TurnSearchWeights(neighbour=0.0),
    "  without the previous turn's words": TurnSearchWeights(previous_words=False),
    "  without the previous turn's words, neighbour 0.5 (the former default)":
        TurnSearchWeights(previous_words=False, neighbour=0.5),
    "  without speaker bonus": TurnSearchWeights(speaker=0.0),
    "  without the time bonus for questions asking when": TurnSearchWeights(time=0.0),
}


def measure(args, conversations: list[Conversation], chat: ChatMemory, raw) -> str:
    store = chat.store
    embedder = store.embedder
    settings = chat.settings

    t0 = time.perf_counter()
    n_turns = sum(ingest(chat, conv) for conv in conversations)
    ingest_s = time.perf_counter() - t0

    # the raw baseline: the same turns in a plain Chroma collection, embedded with their speaker
    t0 = time.perf_counter()
    col = raw.get_or_create_collection("locomo", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    speaker_vectors: dict[str, np.ndarray] = {}
    for conv in conversations:
        turns = store.conversation_turns(conv.id)
        vectors = embedder.embed_documents([f"{t.metadata['speaker']}: {t.text}" for t in turns])
        col.add(ids=[t.id for t in turns], embeddings=[v.tolist() for v in vectors],
                metadatas=[{"conversation_id": conv.id} for _ in turns])
        speaker_vectors.update({t.id: v / np.linalg.norm(v) for t, v in zip(turns, vectors)})
    raw_s = time.perf_counter() - t0

    store.retrieval.similarity_floor()  # the embedder's calibration, measured once per store: not in ms/query
    per_q: dict[str, list[tuple[int, str, tuple[float, float, float]]]] = defaultdict(list)
    seconds: Counter = Counter()
    embed_s = 0.0
    n_questions = in_recent = 0
    question_vectors: list[np.ndarray] = []  # in the order of the questions
    gated: Counter = Counter()  # questions whose related section the similarity floor left empty
    for conv in conversations:
        by_id = conv.dia_by_turn_id
        turns = store.conversation_turns(conv.id)
        recent = {t.id for t in store.recent_turns(conv.id, settings.turn_top_k)}
        index = chat.related_turns.index(conv.id, turns)  # what related_turns_for searches (built once, cached)
        ordered = index.turns
        ids = [t.id for t in ordered]
        dia = [by_id[i] for i in ids]
        dense_matrix = np.stack([speaker_vectors[i] for i in ids])
        plain = BM25Index([tokenize(t.text, stem=False, stop_words=False) for t in ordered])
        names = chat.related_turns.name_vectors(conv.speakers)  # what the chat path's index is given
        ablation_indexes = {name: TurnIndex(ordered, w, name_vectors=names) for name, w in ABLATIONS.items()}
        ablation_indexes["  with the names left in the dense signal"] = TurnIndex(ordered)
        ablation_indexes[METHODS[-1]] = TurnIndex(without_speakers(ordered))
        for q in conv.questions:
            n_questions += 1
            in_recent += sum(by_id[i] in q["evidence"] for i in recent)
            t = time.perf_counter()
            vector = embedder.embed_query(q["question"])
            embed_s += time.perf_counter() - t
            question_vectors.append(vector)
            unit = vector / np.linalg.norm(vector)
            found: dict[str, list[str]] = {}

            t = time.perf_counter()
            got = col.query(query_embeddings=[vector.tolist()], n_results=TOP, where={"conversation_id": conv.id},
                            include=[])
            found[METHODS[0]] = [by_id[i] for i in got["ids"][0]]
            seconds[METHODS[0]] += time.perf_counter() - t

            t = time.perf_counter()
            dense = dense_matrix @ unit
            found[METHODS[1]] = top_ids(dense, dia)
            seconds[METHODS[1]] += time.perf_counter() - t

            t = time.perf_counter()
            bm25 = plain.scores(tokenize(q["question"], stem=False, stop_words=False))
            found[METHODS[2]] = top_ids(bm25, dia)
            seconds[METHODS[2]] += time.perf_counter() - t

            t = time.perf_counter()
            found[METHODS[3]] = top_ids(rrf(dense_matrix @ unit,
                                            plain.scores(tokenize(q["question"], stem=False, stop_words=False))), dia)
            seconds[METHODS[3]] += time.perf_counter() - t

            t = time.perf_counter()
            found[BRAIN] = [by_id[i] for i in retrieve(chat, conv.id, q["question"], vector)]
            seconds[BRAIN] += time.perf_counter() - t
            gated["own"] += not found[BRAIN]

            for name, ablation in ablation_indexes.items():
                t = time.perf_counter()
                hits = ablation.search(q["question"], vector, TOP + len(recent))
                found[name] = [by_id[h.id] for h in hits if h.id not in recent][:TOP]
                seconds[name] += time.perf_counter() - t

            for name in METHODS:
                per_q[name].append((q["category"], conv.id, metrics(found[name], q["evidence"])))

    # each question asked of the next conversation, which is about other people: how often the gate empties
    # the related section (it should), and how often it empties it for the question's own conversation
    questions = [(conv.id, q) for conv in conversations for q in conv.questions]
    for (cid, q), vector in zip(questions, question_vectors):
        other = conversations[([c.id for c in conversations].index(cid) + 1) % len(conversations)].id
        if other != cid:
            gated["foreign asked"] += 1
            gated["foreign"] += not retrieve(chat, other, q["question"], vector)

    lines = report_header(args, conversations, n_turns, n_questions, ingest_s, raw_s, embed_s, in_recent, store)
    lines.insert(-1, f"- The related section's gate (shown only when the conversation's closest turn reaches the "
                     f"similarity floor, {chat.related_turns.floor():.3f} for this embedder, or "
                     f"{chat.related_turns.named_floor():.3f} when the question names one of its speakers): empty for "
                     f"{gated['own']} of the {n_questions} questions asked of their own conversation, and for "
                     f"{gated['foreign']} of {gated['foreign asked']} "
                     f"({gated['foreign'] / max(1, gated['foreign asked']):.0%}) "
                     "asked of the next conversation (about other people).")
    lines += main_table(METHODS, per_q, seconds, n_questions)
    lines += per_conversation_table(conversations, per_q, METHODS[0], METHODS[3], BRAIN)
    lines += split_table(conversations, per_q[BRAIN], args.left_out)
    return "\n".join(lines) + "\n"


def mean3(rows) -> np.ndarray:
    return np.mean(np.array(rows), axis=0) if rows else np.full(4, np.nan)


def report_header(args, conversations, n_turns, n_questions, ingest_s, raw_s, embed_s, in_recent, store) -> list[str]:
    stats = sum((c.evidence_stats for c in conversations), Counter())
    cats = Counter(q["category"] for c in conversations for q in c.questions)
    n_exchanges = sum(len(exchanges(c)) for c in conversations)
    lines = [
        "# LoCoMo: evidence-turn retrieval on the chat path",
        "",
        f"`.venv/bin/python bench/locomo.py` on {args.data.name} ({', '.join(c.id for c in conversations)}); "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"embedder {store.embedder.name}.",
        "",
        f"- {n_turns} turns recorded through `ChatMemory.record_exchange` as {n_exchanges} exchanges in "
        f"{ingest_s:.1f} s ({n_turns / ingest_s:.0f} turns/s, embedding included), each with its speaker's name "
        f"and its session's date; the raw baseline's collection (`speaker: text` embedded) took {raw_s:.1f} s more.",
        f"- {n_questions} questions of categories 1-4 ("
        + ", ".join(f"{CATEGORIES[c]} {cats[c]}" for c in sorted(cats)) + "); "
        + ("; ".join(f"{v} {k}" for k, v in sorted(stats.items())) or "no malformed evidence") + f"; {in_recent} "
        f"evidence turns among the {store.settings.turn_top_k} latest turns (shown by the context anyway, so not "
        "related turns: counted as missed).",
        f"- Embedding a question: {1000 * embed_s / n_questions:.2f} ms (not in the ms/query below).",
        "",
    ]
    return lines


def main_table(methods, per_q, seconds, n_questions) -> list[str]:
    base = mean3([m for _, _, m in per_q[methods[0]]])
    head = "| method | R@5 | R@10 | H@5 | session R@10 | " + " | ".join(f"{c} {CATEGORIES[c]} R@10 / H@5" for c in CATEGORIES) + " | ms/query | R@10 vs raw |"
    lines = ["## All questions", "", head, "|" + "---|" * (head.count("|") - 1)]
    for name in methods:
        overall = mean3([m for _, _, m in per_q[name]])
        cells = []
        for c in CATEGORIES:
            cat = mean3([m for cat_, _, m in per_q[name] if cat_ == c])
            cells.append(f"{cat[1]:.3f} / {cat[2]:.3f}" if not np.isnan(cat[1]) else "no questions")
        label = name.replace("  ", "&nbsp;&nbsp;") if name.startswith("  ") else name
        lines.append(f"| {label} | {overall[0]:.3f} | {overall[1]:.3f} | {overall[2]:.3f} | {overall[3]:.3f} | "
                     + " | ".join(cells)
                     + f" | {1000 * seconds[name] / n_questions:.2f} | {overall[1] / base[1]:.2f}x |")
    rows = per_q[BRAIN]
    brain = mean3([m for _, _, m in rows])
    weakest = min((mean3([m for c, _, m in rows if c == cat])[1], CATEGORIES[cat]) for cat in CATEGORIES
                  if any(c == cat for c, _, _ in rows))
    met = brain[1] >= TARGET_RECALL10 and brain[2] >= TARGET_HIT5 and weakest[0] >= TARGET_CATEGORY_RECALL10
    lines += ["", f"Target R@10 >= {TARGET_RECALL10} and H@5 >= {TARGET_HIT5}, no category below R@10 "
              f"{TARGET_CATEGORY_RECALL10}: **{'met' if met else 'NOT met'}** (brain {brain[1]:.3f} / {brain[2]:.3f}; "
              f"weakest category {weakest[1]} {weakest[0]:.3f}).", ""]
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


def split_table(conversations, rows, left_out: tuple[str, ...]) -> list[str]:
    """brain's figures pooled over the conversations choices were made on and over those left out."""
    ids = [c.id for c in conversations]
    out = [c for c in ids if c in left_out]
    chosen_on = [c for c in ids if c not in left_out]
    if not out or not chosen_on:
        return []
    lines = ["## Choosing and left-out conversations", "",
             "| conversations | questions | brain R@10 / H@5 / session R@10 | " + " | ".join(
                 f"{c} {CATEGORIES[c]} R@10" for c in CATEGORIES) + " |", "|---|---|---|" + "---|" * len(CATEGORIES)]
    for label, group in (("choices made on", chosen_on), ("left out", out)):
        mine = [(c, m) for c, cid, m in rows if cid in group]
        m = mean3([m for _, m in mine])
        cats = [mean3([m for c, m in mine if c == cat])[1] for cat in CATEGORIES]
        lines.append(f"| {label}: {', '.join(group)} | {len(mine)} | {m[1]:.3f} / {m[2]:.3f} / {m[3]:.3f} | "
                     + " | ".join("-" if np.isnan(v) else f"{v:.3f}" for v in cats) + " |")
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


def parse_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The LoCoMo file and the conversations to measure, from the command line; a usage error (exit 2)
    that says where LoCoMo comes from when the file is missing or is not LoCoMo's."""
    parser.add_argument("--data", type=Path, help=f"a LoCoMo JSON file (list of samples; default {DEFAULT_DATA})")
    parser.add_argument("--samples", default=",".join(DEV_SAMPLES),
                        help="comma-separated sample ids to measure, or 'all' (default: the development split)")
    parser.add_argument("--left-out", default=",".join(LEFT_OUT),
                        help="comma-separated sample ids kept out of every choice (reported apart)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    args.data = data_path(args.data)
    args.left_out = tuple(s.strip() for s in args.left_out.split(",") if s.strip())
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist. LoCoMo does not come with brain: download it from "
                     f"{LOCOMO_SOURCE} to {DEFAULT_DATA}, or pass --data PATH")
    try:
        args.conversations = select(load(args.data), args.samples, args.data)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # not JSON, or not LoCoMo's shape
        parser.error(f"{args.data} is not a usable LoCoMo file: {type(exc).__name__}: {exc}")
    return args


def publish(report: str, out: Path | None) -> None:
    """Print the report, and write it to ``out`` (relative to where the script was started) when given."""
    print(report)
    if out:
        (out if out.is_absolute() else INVOKED_FROM / out).write_text(report, encoding="utf-8")


def main() -> None:
    os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory
    args = parse_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    publish(run(args), args.out)


if __name__ == "__main__":
    main()
