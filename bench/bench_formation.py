#!/usr/bin/env python
"""Memory formation on LoCoMo: do the facts a model forms from a conversation match the gold observations?

    .venv/bin/python bench/bench_formation.py --serve qwen1.5b [--data ../shared/bench/locomo/locomo-dev.json]
        [--samples conv-26,conv-30|all] [--sessions K] [--every-n 5] [--timeout SECONDS]
        [--out bench/FORMATION_QUALITY_RESULTS.md]

``--serve qwen1.5b`` (or ``smollm2``) starts the model tier's llama.cpp server (scripts/llama_server.py, after
``bash scripts/setup.sh test``) and points brain at it (``BRAIN_SUMMARIZER=openai``, the formation and summary
models its alias). Without ``--serve`` the model comes from the environment as in service: an OpenAI-compatible
server (``BRAIN_SUMMARIZER=openai``, ``BRAIN_OPENAI_BASE_URL``) or Ollama (``OLLAMA_HOST``), the model from
``BRAIN_FORMATION_MODEL``, the summaries' from ``BRAIN_SUMMARY_MODEL``; the mirror is off and the store temporary.
A CPU-only model takes seconds to a minute per batch: ``--sessions K`` feeds only each conversation's first K
sessions (and asks only the questions whose evidence lies in them).

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

(c) Summaries. The summaries the model wrote for the formed windows, the extractive summaries
(:class:`~brain.providers.summarizers.ExtractiveSummarizer`, the fallback) of the same windows, and LoCoMo's own
session summaries of the sessions fed, each split into sentences and matched to the same gold observations
as the facts are: the share of the observations a summary states. And the share of questions whose answer's
content words all appear in the summaries of the windows (sessions, for LoCoMo's) holding its evidence.

(d) Duplicates and changes. Pairs of a conversation's active formed memories at cosine >= :data:`DUPLICATE`
(the same fact said twice), and the memories the model superseded (an update or a deletion it chose).

(e) Cost. Prompt and eval tokens and model seconds, from the formation batches' counters (repairs and
retries included; summaries not), per exchange fed; and the time ``record_exchange`` took per exchange.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
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
#: cosine similarity at or above which two formed memories say the same thing: read off pairs of conv-26's
#: gold observations (MiniLM) before any model ran: at 0.90 and above they restate one fact; at 0.86-0.89
#: related facts, a few restatements among them
DUPLICATE = 0.90
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+")


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


# ---- the pipeline -------------------------------------------------------------------------------
@dataclass
class Formed:
    """What formation made of one conversation."""

    conversation: locomo.Conversation
    exchanges: int
    record_seconds: float  # record_exchange, summed over the exchanges
    batches: list  # FormationBatch
    memories: list  # Document: the formed memories, every status
    gold: list[tuple[str, list[str], object]]  # the gold observations inside formed windows
    gold_outside: int  # gold observations with a source turn in no formed window
    score: FactScore | None = None
    #: per source ("model", "extractive", "locomo"): (the LoCoMo turn ids it covers, its text), one per window
    #: (per session for LoCoMo's own summaries)
    summaries: dict[str, list[tuple[set[str], str]]] = field(default_factory=dict)
    model_written: int = 0  # summaries the model wrote (the rest fell back to the extractive summariser)


def covered_dia_ids(store, conv: locomo.Conversation, batches) -> set[str]:
    """The LoCoMo turn ids of the turns in a window whose formation ran (done or failed)."""
    from brain.model.schemas import parse_turn_range

    ranges = [parse_turn_range(b.turn_range) for b in batches if b.status != "pending"]
    covered = set()
    for turn in store.conversation_turns(conv.id):
        index = int(turn.metadata["turn_index"])
        if any(lo <= index <= hi for lo, hi in ranges):
            covered.add(conv.dia_by_turn_id[turn.id])
    return covered


def formed_memories(store, conversation_id: str) -> list:
    """The memories formation made from the conversation, superseded ones included, oldest first."""
    from brain.model.schemas import DocType

    docs = store.get(where={"conversation_id": conversation_id}, type=DocType.MEMORY)
    return sorted((d for d in docs if d.metadata.get("source") == "chat"),
                  key=lambda d: (str(d.metadata.get("timestamp")), d.id))


def window_summaries(store, conv: locomo.Conversation) -> tuple[list, list, int]:
    """The conversation's stored summaries and the extractive summaries of the same windows, each with the
    LoCoMo turn ids of its window; and how many of the stored ones the model wrote."""
    from brain.model.schemas import DocType, parse_turn_range
    from brain.providers.summarizers import ExtractiveSummarizer
    from brain.providers.summarizers.base import TurnText

    extractive_summarizer = ExtractiveSummarizer()
    turns = {int(t.metadata["turn_index"]): t for t in store.conversation_turns(conv.id)}
    model, extractive, written = [], [], 0
    summaries = store.get(where={"conversation_id": conv.id}, type=DocType.SUMMARY)
    for summary in sorted(summaries, key=lambda d: parse_turn_range(d.metadata["turn_range"])):
        lo, hi = parse_turn_range(summary.metadata["turn_range"])
        window = [turns[i] for i in range(lo, hi + 1) if i in turns]
        dias = {conv.dia_by_turn_id[t.id] for t in window if t.id in conv.dia_by_turn_id}
        model.append((dias, summary.text))
        written += summary.metadata.get("summarizer") != ExtractiveSummarizer.name
        extractive.append((dias, extractive_summarizer.summarize(
            [TurnText(int(t.metadata["turn_index"]), t.metadata["role"], t.text) for t in window])))
    return model, extractive, written


def locomo_summaries(sample: dict, conv: locomo.Conversation) -> list[tuple[set[str], str]]:
    """LoCoMo's own summary of each session fed (``sample``: the conversation's raw LoCoMo record), with the
    session's turn ids."""
    given = sample.get("session_summary") or {}
    return [({t.dia_id for t in turns}, given[f"session_{i}_summary"])
            for i, (_, turns) in enumerate(conv.sessions, start=1) if given.get(f"session_{i}_summary")]


def sentences(texts) -> list[str]:
    return [x for text in texts for x in _SENTENCE.split(" ".join(text.split())) if x]


def stated(texts: list[str], gold: list[str], embedder, threshold: float = THRESHOLD) -> int:
    """How many ``gold`` facts some sentence of ``texts`` states (cosine >= ``threshold``). Unlike
    :func:`score_facts` a sentence may state several: a summary compresses."""
    parts = sentences(texts)
    if not parts or not gold:
        return 0
    return int(((unit_vectors(embedder, parts) @ unit_vectors(embedder, gold).T).max(axis=0) >= threshold).sum())


def content_words(text: str) -> set[str]:
    from brain.text.stop_words import STOP_WORDS

    return {w for w in (w.lower() for w in _WORD.findall(text)) if w not in STOP_WORDS}


def answers_stated(windows: list[tuple[set[str], str]], questions: list[tuple[list[str], str]]) -> tuple[int, int]:
    """(questions whose answer's content words all appear in the summaries of the windows holding their
    evidence, questions asked): only questions with an answer of content words and evidence in some window."""
    hits = asked = 0
    for evidence, answer in questions:
        words = content_words(answer)
        texts = [text for dias, text in windows if dias & set(evidence)]
        if not words or not texts:
            continue
        asked += 1
        hits += words <= content_words(" ".join(texts))
    return hits, asked


def duplicates(memories, embedder) -> int:
    """Pairs of active memories at cosine >= :data:`DUPLICATE`."""
    active = [m.text for m in memories if m.metadata.get("status", "active") == "active"]
    if len(active) < 2:
        return 0
    vectors = unit_vectors(embedder, active)
    return int(np.triu(vectors @ vectors.T >= DUPLICATE, k=1).sum())


def form(chat, conversations: list[locomo.Conversation], observations, timeout: float) -> list[Formed]:
    """Feed every conversation (its entity named after it), wait for the summary worker's queue, read
    what was formed."""
    timings = {}
    for conv in conversations:
        t = time.perf_counter()
        locomo.ingest(chat, conv, entity=conv.id)
        timings[conv.id] = time.perf_counter() - t
    if not chat.wait_for_summaries(timeout):
        raise TimeoutError(f"the summary worker's queue did not drain in {timeout:g} s (--timeout); "
                           f"{chat.pending_summaries()} windows still queued")
    out = []
    for conv in conversations:
        batches = chat.formation_batches(conversation_id=conv.id)
        covered = covered_dia_ids(chat.store, conv, batches)
        gold = [o for o in observations[conv.id] if all(dia in covered for dia in o[1])]
        formed = Formed(conv, len(locomo.exchanges(conv)), timings[conv.id], batches,
                        formed_memories(chat.store, conv.id), gold, len(observations[conv.id]) - len(gold))
        model, extractive, formed.model_written = window_summaries(chat.store, conv)
        formed.summaries = {"model": model, "extractive": extractive}
        out.append(formed)
    return out


def context_measure(chat, questions, sources: dict[str, list[str]], ids_of: dict[str, set[str]],
                    foreign_of: dict[str, str]) -> dict[str, float]:
    """bench_relevance's memory-section measurement (through ``build_context``) over ``questions``."""
    for q in questions:
        q.answerable = any(t in q.evidence for m in ids_of.get(q.conversation, ()) for t in sources.get(m, ()))

    def brain(q, entity: str) -> list[str]:
        return [item.id for item in chat.build_context(None, q.text, entity=entity).memory]

    return relevance.measure(brain, questions, sources, foreign_of)["all"]


@dataclass
class Results:
    settings: object  # Settings
    formed: list[Formed]
    seconds: float  # feeding and forming, wall time
    context: dict[str, dict[str, float]]  # the memory-section measurement: "formed" and "gold"
    questions: int
    embedder: object
    answers: dict[str, list[tuple[list[str], str]]]  # per conversation: (evidence, answer)


def evaluate(args, *, embedder=None, **settings) -> Results:
    """Form, score and measure ``args.conversations`` of ``args.data``; ``settings`` override the
    environment's (the tests point OLLAMA_HOST at the test server this way)."""
    from brain.app.core import open_store
    from brain.config import Settings
    from brain.features.chat import ChatMemory
    from brain.providers.summarizers import ExtractiveSummarizer

    observations, questions = relevance.load(args.data)
    chosen = [c.id for c in args.conversations]
    fed = {t.dia_id for c in args.conversations for t in c.turns}
    samples = raw_samples(args.data, args.conversations)
    questions = [q for q in questions if q.conversation in chosen and set(q.evidence) <= fed]
    foreign_of = {c: chosen[(i + 1) % len(chosen)] for i, c in enumerate(chosen)}
    with tempfile.TemporaryDirectory(prefix="brain-formation-") as tmp:
        formation_settings = Settings(**{"mirror_enabled": False, "summary_every_n": args.every_n, **settings,
                                         "data_dir": Path(tmp) / "formed", "formation": True})
        check_model(formation_settings)
        t0 = time.perf_counter()
        with open_store(formation_settings, embedder=embedder) as store, ChatMemory(store) as chat:
            if not chat.formation.enabled:
                raise SystemExit(f"bench_formation: formation is off: {chat.formation.off_reason}")
            formed = form(chat, args.conversations, observations, args.timeout)
            seconds = time.perf_counter() - t0
            embedder = store.embedder
            for f in formed:
                f.score = score_facts([m.text for m in f.memories], [text for text, _, _ in f.gold], embedder,
                                      THRESHOLD)
                f.summaries["locomo"] = locomo_summaries(samples[f.conversation.id], f.conversation)
            sources = {m.id: [f.conversation.dia_by_turn_id[t] for t in m.metadata.get("source_turns") or []
                              if t in f.conversation.dia_by_turn_id] for f in formed for m in f.memories}
            ids_of = {f.conversation.id: {m.id for m in f.memories} for f in formed}
            context = {"formed": context_measure(chat, questions, sources, ids_of, foreign_of)}
        gold_settings = Settings(data_dir=Path(tmp) / "gold", mirror_enabled=False, summary_every_n=1000)
        with open_store(gold_settings, embedder=embedder) as store, \
                ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat:
            gold_sources, gold_ids = relevance.store_memories(chat, {f.conversation.id: f.gold for f in formed})
            context["gold"] = context_measure(chat, questions, gold_sources, gold_ids, foreign_of)
    return Results(formation_settings, formed, seconds, context, len(questions), embedder,
                   answers_of(samples, fed))


def raw_samples(data: Path, conversations) -> dict[str, dict]:
    """The chosen conversations' raw LoCoMo records, by conversation id, read once."""
    import json

    chosen = {c.id for c in conversations}
    records = {locomo.conversation_id(s["sample_id"]): s for s in json.loads(data.read_text(encoding="utf-8"))}
    return {conv: record for conv, record in records.items() if conv in chosen}


def answers_of(samples: dict[str, dict], fed: set[str]) -> dict[str, list[tuple[list[str], str]]]:
    """Per conversation its questions of categories 1-4 as (evidence turn ids, answer), evidence all fed."""
    out: dict[str, list[tuple[list[str], str]]] = {conv: [] for conv in samples}
    for conv, sample in samples.items():
        for qa in sample["qa"]:
            evidence = [e for raw in qa.get("evidence", []) for e in re.split(r"[;\s]+", raw) if e]
            if qa.get("category") in (1, 2, 3, 4) and evidence and set(evidence) <= fed and "answer" in qa:
                out[conv].append((evidence, str(qa["answer"])))
    return out


def request_turns(body: dict) -> tuple[str | None, list[tuple[int, str]]]:
    """What a formation request sent to the model holds: the entity the answer must name, and the window's
    turns as (turn_index, transcript line), read off the messages ``brain.rules.formation.formation_messages``
    writes. For scripted models (the latency benchmark, the tests)."""
    system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
    user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
    entity = re.search(r'entity: always "([^"]*)"', system)
    turns = [(int(m.group(1)), m.group(2)) for m in re.finditer(r"^\[(\d+)\](.*)$", user, re.MULTILINE)]
    return (entity.group(1) if entity else None), turns


def check_model(settings) -> None:
    """A clear error, before anything is fed, when the model server is down or lacks the model."""
    if settings.summarizer == "openai":
        from brain.model.errors import ExtractorUnavailable, SummarizerUnavailable
        from brain.wiring.providers import formation_off_reason, get_extractor, get_summarizer

        if (reason := formation_off_reason(settings)) is not None:
            raise SystemExit(f"bench_formation: {reason}")
        try:
            get_summarizer(settings).ping()
            get_extractor(settings).ping()
        except (SummarizerUnavailable, ExtractorUnavailable) as exc:
            raise SystemExit(f"bench_formation: {exc} (BRAIN_OPENAI_BASE_URL={settings.openai_base_url}); "
                             "start the server, or pass --serve qwen1.5b") from None
        return
    check_ollama_model(settings)


def check_ollama_model(settings) -> None:
    import httpx

    host = settings.ollama_host.rstrip("/")
    try:
        names = {m.get("name") for m in httpx.get(f"{host}/api/tags", timeout=10).json().get("models", [])}
    except (httpx.HTTPError, ValueError) as exc:
        raise SystemExit(f"bench_formation: no Ollama at OLLAMA_HOST={host} ({type(exc).__name__}: {exc}); "
                         "start one, point OLLAMA_HOST at one, or pass --serve qwen1.5b") from None
    model = settings.formation_model
    if model not in names and f"{model}:latest" not in names:
        raise SystemExit(f"bench_formation: {host} has no model {model!r} (BRAIN_FORMATION_MODEL); pull it "
                         f"(`ollama pull {model}`) or choose one of: {', '.join(sorted(n for n in names if n))}")


def endpoint(settings) -> str:
    return settings.openai_base_url if settings.summarizer == "openai" else settings.ollama_host


# ---- report -------------------------------------------------------------------------------------
def report(args, results: Results) -> str:
    settings, formed, wall, n_questions = results.settings, results.formed, results.seconds, results.questions

    def per_exchange(total: float, exchanges: int) -> float:
        return total / exchanges if exchanges else float("nan")

    lines = [
        "# Memory formation on LoCoMo",
        "",
        f"`{args.command}` on {args.data.name} ({', '.join(f.conversation.id for f in formed)}); "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        f"- model {settings.formation_model} at {endpoint(settings)} (BRAIN_SUMMARIZER={settings.summarizer}); "
        f"BRAIN_SUMMARY_EVERY_N={settings.summary_every_n} "
        f"(a batch every {settings.summary_every_n} exchanges); fed and formed in {wall:.0f} s",
        f"- facts matched at cosine >= {THRESHOLD} (local MiniLM), one to one, most similar first",
        "",
        "| conversation | exchanges | batches done / failed / pending | formed | gold (outside formed windows) "
        "| matched | precision | recall | F1 | prompt tokens / exchange | eval tokens / exchange "
        "| model s / exchange | record_exchange ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    pooled = FactScore(0, 0, THRESHOLD)
    totals = dict(exchanges=0, prompt=0, eval=0, seconds=0.0, record=0.0)
    for f in formed:
        status = {s: sum(b.status == s for b in f.batches) for s in ("done", "failed", "pending")}
        prompt = sum(b.prompt_tokens or 0 for b in f.batches)
        evals = sum(b.eval_tokens or 0 for b in f.batches)
        seconds = sum(b.seconds or 0.0 for b in f.batches)
        totals["exchanges"] += f.exchanges
        totals["prompt"] += prompt
        totals["eval"] += evals
        totals["seconds"] += seconds
        totals["record"] += f.record_seconds
        pooled = pooled + f.score
        lines.append(row(f.conversation.id, f.exchanges, f"{status['done']} / {status['failed']} / {status['pending']}",
                         f.score, f"{len(f.gold)} ({f.gold_outside})", per_exchange(prompt, f.exchanges),
                         per_exchange(evals, f.exchanges), per_exchange(seconds, f.exchanges),
                         1000 * per_exchange(f.record_seconds, f.exchanges)))
    n = totals["exchanges"]
    lines.append(row("**all**", n, "", pooled, f"{pooled.gold} ({sum(f.gold_outside for f in formed)})",
                     per_exchange(totals["prompt"], n), per_exchange(totals["eval"], n),
                     per_exchange(totals["seconds"], n), 1000 * per_exchange(totals["record"], n)))
    lines += [
        "",
        "## The memory section of the context (bench_relevance's measurement)",
        "",
        f"{n_questions} questions of categories 1-4 asked through `build_context` with the conversation's entity; "
        "a memory is relevant when one of its source turns is in the question's evidence; foreign empty: asked "
        "with the next conversation's entity"
        + (" (one conversation: its own, so not meaningful)" if len(formed) == 1 else "")
        + ".",
        "",
        "| memories | answerable questions | recall | precision | foreign empty | shown |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in (("formed by the model", results.context["formed"]),
                    ("gold observations (as bench_relevance)", results.context["gold"])):
        lines.append(f"| {name} | {int(m['answerable'])} | {m['recall']:.3f} | {m['precision']:.3f} | "
                     f"{m['foreign_empty']:.3f} | {m['shown']:.2f} |")
    lines += summaries_section(results), duplicates_section(results)
    return "\n".join(lines) + "\n"


def summaries_section(results: Results) -> str:
    formed, embedder = results.formed, results.embedder
    written = sum(f.model_written for f in formed)
    windows = sum(len(f.summaries["model"]) for f in formed)
    rows = [
        "",
        "## Summaries",
        "",
        f"{windows} windows summarised, {written} by the model (the rest by the extractive fallback). A gold "
        f"observation is stated when a summary sentence is at cosine >= {THRESHOLD} from it (a sentence may state "
        "several); an answer is stated when its content words all appear in the summaries of its evidence's "
        "windows (LoCoMo's: sessions; they also cover the trailing turns that fill no window).",
        "",
        "| summaries | sentences | gold observations stated | answers stated | mean characters |",
        "|---|---|---|---|---|",
    ]
    gold = sum(len(f.gold) for f in formed)
    for source, name in (("model", "written by the model"), ("extractive", "extractive (the fallback)"),
                         ("locomo", "LoCoMo's session summaries")):
        texts = [text for f in formed for _, text in f.summaries[source]]
        facts = sum(stated([t for _, t in f.summaries[source]], [g for g, _, _ in f.gold], embedder) for f in formed)
        hits, asked = (sum(x) for x in zip(*(answers_stated(f.summaries[source], results.answers[f.conversation.id])
                                            for f in formed)))
        mean_chars = sum(map(len, texts)) / len(texts) if texts else float("nan")
        rows.append(f"| {name} | {len(sentences(texts))} | {facts} / {gold} = {facts / max(gold, 1):.3f} | "
                    f"{hits} / {asked} = {hits / max(asked, 1):.3f} | {mean_chars:.0f} |")
    return "\n".join(rows)


def duplicates_section(results: Results) -> str:
    rows = [
        "",
        "## Duplicates and changes",
        "",
        f"Duplicates: pairs of a conversation's active formed memories at cosine >= {DUPLICATE}. Status: what "
        "became of the formed memories (superseded: the model said a later fact changes it).",
        "",
        "| conversation | formed | formed / exchange | active | superseded | other status | duplicate pairs |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in results.formed:
        status = [m.metadata.get("status", "active") for m in f.memories]
        active, superseded = status.count("active"), status.count("superseded")
        rows.append(f"| {f.conversation.id} | {len(status)} | {len(status) / max(f.exchanges, 1):.2f} | {active} | "
                    f"{superseded} | {len(status) - active - superseded} | "
                    f"{duplicates(f.memories, results.embedder)} |")
    return "\n".join(rows)


def row(name, exchanges, batches, score: FactScore, gold: str, prompt, evals, seconds, record_ms) -> str:
    return (f"| {name} | {exchanges} | {batches} | {score.extracted} | {gold} | {score.matched} | "
            f"{score.precision:.3f} | {score.recall:.3f} | {score.f1:.3f} | {prompt:.0f} | {evals:.0f} | "
            f"{seconds:.2f} | {record_ms:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=relevance.DEFAULT_DATA,
                        help=f"LoCoMo JSON with observations (default {relevance.DEFAULT_DATA})")
    parser.add_argument("--samples", default=",".join(locomo.DEV_SAMPLES),
                        help="comma-separated sample ids, or 'all' (default: the development split)")
    parser.add_argument("--sessions", type=int, default=None,
                        help="feed only each conversation's first K sessions (default: all)")
    parser.add_argument("--serve", choices=("qwen1.5b", "smollm2"), default=None,
                        help="start the model tier's llama.cpp server with this model and use it")
    parser.add_argument("--every-n", type=int, default=5, help="BRAIN_SUMMARY_EVERY_N: exchanges per formation batch")
    parser.add_argument("--timeout", type=float, default=24 * 3600.0,
                        help="seconds to wait for the formation queue after feeding")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    args.command = ".venv/bin/python bench/bench_formation.py " + " ".join(sys.argv[1:])
    if not args.data.is_absolute():
        args.data = INVOKED_FROM / args.data
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist: pass --data PATH to a LoCoMo JSON file with observations "
                     f"(LoCoMo: {locomo.LOCOMO_SOURCE})")
    try:
        args.conversations = locomo.select(locomo.load(args.data), args.samples, args.data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"{args.data} is not a usable LoCoMo file: {type(exc).__name__}: {exc}")
    if args.sessions is not None:
        if args.sessions < 1:
            parser.error("--sessions must be at least 1")
        for conv in args.conversations:
            conv.sessions = conv.sessions[:args.sessions]
    os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory
    if args.serve:
        sys.path.insert(0, str(ROOT / "scripts"))
        import llama_server

        with llama_server.serve(args.serve) as server:
            text = report(args, evaluate(args, summarizer="openai", openai_base_url=server.base_url,
                                         summary_model=server.alias, formation_model=server.alias))
    else:
        text = report(args, evaluate(args))
    print(text)
    if args.out:
        out = args.out if args.out.is_absolute() else INVOKED_FROM / args.out
        out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
