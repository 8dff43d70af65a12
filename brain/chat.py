"""The chat-facing layer: what the model should see, what was said, and what to remember.

:class:`ChatMemory` is the one object a chat backend holds (the HTTP API is a thin shell over it):

* :meth:`ChatMemory.build_context` — one question per user message: persona, FAQ entries, ranked
  memories, conversation summaries and recent turns, each limited by its ``RAG_*`` setting and all
  together by a character (and optionally token) budget. The message is embedded once.
* :meth:`ChatMemory.record_exchange` — stores the user and assistant turns in one write, with
  consecutive ``turn_index`` values, and schedules a summary every ``RAG_SUMMARY_EVERY_N`` exchanges.
* Summaries are written by one background thread: the model summariser (Ollama) with retries and
  back-off, then a deterministic extractive fallback marked ``fallback: true`` in its metadata. A
  chat request never waits for a summariser; :meth:`resummarize_fallbacks` upgrades fallbacks later.
* :meth:`remember`, :meth:`consolidate` (see :mod:`brain.consolidate`) and optional access tracking.

When the budget is tight, whole items are dropped, lowest priority first (:data:`DROP_PRIORITY`):
the persona is who the assistant is and goes last; the recent turns are what the user is replying
to; memories are the durable personal facts; summaries restate older turns (partly covered by the
memories); FAQ entries are generic knowledge the model often partly has. Inside a section the
weakest item goes first (lowest score or similarity; for turns, the oldest).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from brain.cache import LRUCache
from brain.config import Settings
from brain.errors import BrainError, ValidationError
from brain.ids import derived_id
from brain.schemas import (
    GLOBAL_SCOPE,
    DocType,
    check_extra_metadata,
    valid_conversation_id,
    entity_scope,
    format_timestamp,
    format_turn_range,
    parse_timestamp,
    parse_turn_range,
    utc_now,
)
from brain.summarizers import (
    ExtractiveSummarizer,
    Summarizer,
    SummarizerError,
    SummarizerUnavailable,
    TurnText,
    get_summarizer,
)
from brain.text.tokenizer import counting_tokenizer, tokenizer_path

if TYPE_CHECKING:
    from brain.consolidate import ConsolidationReport
    from brain.rag_store import RagStore

log = logging.getLogger(__name__)

#: sections in the order they appear in the prompt
SECTIONS = ("persona", "faq", "memory", "summary", "related", "turn")
#: sections in the order they are kept when the budget is tight (the last is dropped first)
DROP_PRIORITY = ("persona", "turn", "memory", "related", "summary", "faq")
HEADINGS = {
    "persona": "## Persona",
    "faq": "## Knowledge base",
    "memory": "## What you remember",
    "summary": "## Earlier in this conversation",
    "related": "## Earlier turns related to this message",
    "turn": "## Recent turns",
}
#: conversations whose turn search index (brain.turn_search) is kept in process
_TURN_INDEXES_CACHED = 256
#: persona sections served per call (the whole current version; the cap only bounds a broken file)
PERSONA_MAX_SECTIONS = 1000
#: when no tokenizer is at hand: about four characters per token for English prose
CHARS_PER_TOKEN = 4
#: seconds between writes of recorded memory uses (access tracking), and a size that forces one
ACCESS_FLUSH_SECONDS = 1.0
ACCESS_FLUSH_SIZE = 512
#: conversations whose summary position is kept in process
_STATES_CACHED = 4096
_LOCK_STRIPES = 64
# keys record_exchange sets itself; metadata= may not override them
_TURN_KEYS = frozenset({"text", "type", "id", "embedding", "role", "conversation_id", "turn_index",
                        "timestamp", "ts_epoch", "source", "scope"})


def new_conversation_id() -> str:
    return f"conv-{uuid.uuid4()}"


# ---- results ---------------------------------------------------------------------------------------
@dataclass
class ContextItem:
    """One document in a context. ``scores``: memories have ``score``, ``similarity``,
    ``similarity_part``, ``importance_part``, ``recency_part``; persona, FAQ and summaries
    ``similarity``; turns none (they are chosen by position)."""

    id: str
    text: str
    metadata: dict[str, Any]
    scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "metadata": dict(self.metadata), "scores": dict(self.scores)}


@dataclass
class Context:
    """What the model should see for one user message: one list per document type and the
    rendered ``prompt``. ``dropped`` lists the items the budget left out (section, id)."""

    conversation_id: str | None
    entity: str | None
    enabled: bool = True
    persona: list[ContextItem] = field(default_factory=list)
    faq: list[ContextItem] = field(default_factory=list)
    memory: list[ContextItem] = field(default_factory=list)
    summary: list[ContextItem] = field(default_factory=list)
    related: list[ContextItem] = field(default_factory=list)
    turn: list[ContextItem] = field(default_factory=list)
    prompt: str = ""
    chars: int = 0
    tokens: int | None = None
    dropped: list[dict[str, str]] = field(default_factory=list)

    def sections(self) -> dict[str, list[ContextItem]]:
        return {name: getattr(self, name) for name in SECTIONS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "entity": self.entity,
            "enabled": self.enabled,
            "sections": {name: [item.to_dict() for item in items] for name, items in self.sections().items()},
            "prompt": self.prompt,
            "chars": self.chars,
            "tokens": self.tokens,
            "dropped": [dict(d) for d in self.dropped],
        }


@dataclass
class Exchange:
    """What :meth:`ChatMemory.record_exchange` stored; ``summaries_scheduled`` lists the turn ranges
    queued for summarising because of this exchange (e.g. ``["1-10"]``)."""

    conversation_id: str
    user_turn_id: str
    assistant_turn_id: str
    user_turn_index: int
    assistant_turn_index: int
    summaries_scheduled: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "user_turn_id": self.user_turn_id,
            "assistant_turn_id": self.assistant_turn_id,
            "user_turn_index": self.user_turn_index,
            "assistant_turn_index": self.assistant_turn_index,
            "summaries_scheduled": list(self.summaries_scheduled),
        }


@dataclass(frozen=True)
class SummaryJob:
    conversation_id: str
    start: int
    end: int
    summary_index: int
    attempt: int = 0  # failed store writes so far

    @property
    def turn_range(self) -> str:
        return format_turn_range(self.start, self.end)


@dataclass
class _SummaryState:
    covered: int  # last turn index summarised or queued
    next_index: int  # summary_index of the next summary


# ---- token counting ----------------------------------------------------------------------------------
class TokenCounter:
    """Counts tokens for the budget: the local MiniLM WordPiece tokenizer (no truncation, no special
    tokens) when its file is installed, else ``ceil(chars / 4)``. WordPiece is not the chat model's
    tokenizer; on English it counts a little more than Llama-style BPE does, so the budget errs on the
    safe side. Pieces split at whitespace and punctuation, so counts of lines add up."""

    def __init__(self):
        self._tokenizer = None
        self.method = f"estimate: ceil(chars / {CHARS_PER_TOKEN})"
        try:
            tokenizer_path()
        except BrainError:  # not installed (an Ollama-only setup): estimating is expected
            log.info("no local tokenizer; the token budget uses an estimate of %d characters per token", CHARS_PER_TOKEN)
            return
        try:
            self._tokenizer = counting_tokenizer()
        except ImportError:
            log.info("no local tokenizer; the token budget uses an estimate of %d characters per token", CHARS_PER_TOKEN)
            return
        except BrainError as exc:  # installed but unreadable: worth a warning
            log.warning("cannot read the local tokenizer (%s); the token budget uses an estimate", exc)
            return
        self.method = "wordpiece (local/minilm-l6-v2 tokenizer)"

    def count(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        if self._tokenizer is None:
            return [math.ceil(len(t) / CHARS_PER_TOKEN) for t in texts]
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]


# ---- the prompt ---------------------------------------------------------------------------------------
def _line(section: str, item: ContextItem) -> str:
    text = item.text.strip()
    meta = item.metadata
    if section == "persona":
        return f"{meta['heading']}:\n{text}" if meta.get("heading") else text
    if section == "memory":
        return f"- {text}" + (f" (about {meta['entity']})" if meta.get("entity") else "")
    if section == "summary":
        return f"- (turns {meta['turn_range']}) {text}" if meta.get("turn_range") else f"- {text}"
    if section == "turn":
        return f"{str(meta.get('role', 'user')).capitalize()}: {text}"
    if section == "related":
        when = str(meta.get("timestamp", ""))[:10]
        return f"{str(meta.get('role', 'user')).capitalize()} (turn {meta.get('turn_index')}, {when}): {text}"
    return f"- {text}"


_SEPARATOR = {"persona": "\n\n"}


def render_prompt(sections: Mapping[str, Sequence[ContextItem]]) -> str:
    """The prompt block: one headed block per non-empty section, in :data:`SECTIONS` order."""
    blocks = []
    for name in SECTIONS:
        items = sections.get(name) or []
        if items:
            body = _SEPARATOR.get(name, "\n").join(_line(name, item) for item in items)
            blocks.append(f"{HEADINGS[name]}\n{body}")
    return "\n\n".join(blocks)


class _Budget:
    """Drops whole items, lowest priority first, until the prompt fits ``max_chars`` and ``max_tokens``."""

    def __init__(self, sections: dict[str, list[ContextItem]], drop_order: dict[str, list[ContextItem]],
                 max_chars: int, max_tokens: int, counter: TokenCounter | None):
        self.sections = sections
        self.drop_order = drop_order
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        lines = {id(item): _line(name, item) for name, items in sections.items() for item in items}
        self.chars = {key: len(text) for key, text in lines.items()}
        self.tokens: dict[int, int] = {}
        self.heading_tokens: dict[str, int] = {}
        if max_tokens > 0 and counter is not None:
            keys = list(lines)
            self.tokens = dict(zip(keys, counter.count([lines[k] for k in keys])))
            self.heading_tokens = dict(zip(SECTIONS, counter.count([HEADINGS[s] for s in SECTIONS])))

    def size(self) -> tuple[int, int | None]:
        chars, tokens, blocks = 0, 0, 0
        for name in SECTIONS:
            items = self.sections[name]
            if not items:
                continue
            blocks += 1
            sep = len(_SEPARATOR.get(name, "\n"))
            chars += len(HEADINGS[name]) + 1 + sum(self.chars[id(i)] for i in items) + sep * (len(items) - 1)
            if self.tokens:
                tokens += self.heading_tokens[name] + sum(self.tokens[id(i)] for i in items)
        chars += 2 * max(blocks - 1, 0)
        return chars, (tokens if self.tokens else None)

    def fit(self) -> list[dict[str, str]]:
        dropped = []
        queue = [(name, item) for name in reversed(DROP_PRIORITY) for item in self.drop_order[name]]
        chars, tokens = self.size()
        for name, item in queue:
            if chars <= self.max_chars and (tokens is None or tokens <= self.max_tokens):
                break
            self.sections[name] = [i for i in self.sections[name] if i is not item]
            reason = "max_chars" if chars > self.max_chars else "max_tokens"
            dropped.append({"section": name, "id": item.id, "reason": reason})
            chars, tokens = self.size()
        return dropped


# ---- the chat memory ----------------------------------------------------------------------------------
class ChatMemory:
    """Context assembly, conversation recording, summaries and memories over one :class:`RagStore`.

    ``settings`` defaults to the store's. ``summarizer`` defaults to the Ollama model of
    ``BRAIN_SUMMARY_MODEL``; ``fallback`` to :class:`ExtractiveSummarizer`. With ``start_worker=False``
    no thread is started: scheduled summaries wait until :meth:`wait_for_summaries` (which then
    runs them in the caller's thread) or :meth:`close` (which writes extractive ones).
    ``unavailable_cooldown``: after a summary needed the fallback, later ones use it at once for this
    many seconds instead of waiting through the retries again (a queue would otherwise pile up while
    Ollama is down). Thread-safe.
    """

    def __init__(
        self,
        store: RagStore,
        settings: Settings | None = None,
        *,
        summarizer: Summarizer | None = None,
        fallback: Summarizer | None = None,
        start_worker: bool = True,
        unavailable_cooldown: float | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.settings = settings if settings is not None else store.settings
        self.summarizer: Summarizer = summarizer if summarizer is not None else get_summarizer(self.settings)
        self.fallback: Summarizer = fallback if fallback is not None else ExtractiveSummarizer()
        self.unavailable_cooldown = (self.settings.summary_cooldown_seconds if unavailable_cooldown is None
                                     else unavailable_cooldown)
        self._clock = clock
        self._token_counter: TokenCounter | None = None
        # conversation -> (its turn ids, TurnIndex, turn vectors by id), least recently used first
        self._turn_search: LRUCache[str, tuple[tuple[str, ...], Any, dict[str, Any]]] = LRUCache(_TURN_INDEXES_CACHED)
        self._stripes = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self._states: LRUCache[str, _SummaryState] = LRUCache(_STATES_CACHED)
        # the summary queue and the worker
        self._cond = threading.Condition()
        self._jobs: deque[SummaryJob] = deque()
        self._running: SummaryJob | None = None
        self._stop = threading.Event()
        self._closed = False
        self._down_until = 0.0  # monotonic time until which the model summariser is skipped
        self._status: dict[str, Any] = {"reachable": None, "last_error": None, "last_error_at": None,
                                        "last_success_at": None, "model_summaries": 0, "fallback_summaries": 0}
        # access tracking
        self._used: dict[str, float] = {}
        self._used_lock = threading.Lock()
        self._last_flush = time.monotonic()
        self._thread: threading.Thread | None = None
        if start_worker:
            self._thread = threading.Thread(target=self._run, name="brain-summaries", daemon=True)
            self._thread.start()

    def __enter__(self) -> ChatMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- context ---------------------------------------------------------------------------------------
    def build_context(self, conversation_id: str | None, user_message: str, entity: str | None = None) -> Context:
        """What the model should see for ``user_message`` (see the module docstring for the budget)."""
        conversation_id = _check_conversation(conversation_id, required=False)
        if not isinstance(user_message, str) or not user_message.strip():
            raise ValidationError("user_message must be a non-empty string",
                                  [{"item": None, "field": "user_message", "message": "empty"}])
        if entity is not None:
            _check_entity(entity)
        s = self.settings
        context = Context(conversation_id=conversation_id, entity=entity, enabled=s.rag_enabled)
        if not s.rag_enabled:
            return context  # nothing is read: not the store, not the embedder
        store = self.store
        want_summaries = s.enable_summary and conversation_id is not None
        want_related = s.enable_turn and s.enable_related_turns and conversation_id is not None
        vector = None
        if s.enable_persona or s.enable_faq or s.enable_memory or want_summaries or want_related:
            vector = store.embedder.embed_query(user_message)  # once, for every document type
        rank: dict[str, list[ContextItem]] = {name: [] for name in SECTIONS}  # best first
        if s.enable_persona:
            hits = store.retrieve_persona(None, PERSONA_MAX_SECTIONS, query_vector=vector)
            rank["persona"] = [_similarity_item(h) for h in hits]
        if s.enable_faq:
            rank["faq"] = [_similarity_item(h) for h in store.retrieve_faq(None, s.faq_top_k, query_vector=vector)]
        if s.enable_memory:
            hits = store.retrieve_memories(None, s.memory_top_k, entity, query_vector=vector)
            rank["memory"] = [
                ContextItem(h.id, h.text, h.metadata, {
                    "score": h.score, "similarity": h.similarity, "similarity_part": h.similarity_part,
                    "importance_part": h.importance_part, "recency_part": h.recency_part})
                for h in hits
            ]
            if s.track_access and hits:
                self._note_use([h.id for h in hits])
        if want_summaries:
            hits = store.retrieve_summaries(None, s.summary_top_k, conversation_id, query_vector=vector)
            rank["summary"] = [_similarity_item(h) for h in hits]
        if s.enable_turn and conversation_id is not None:
            turns = store.recent_turns(conversation_id, s.turn_top_k)
            rank["turn"] = [ContextItem(d.id, d.text, d.metadata) for d in reversed(turns)]  # newest first
            if want_related:
                rank["related"] = self._related_turns(conversation_id, user_message, vector,
                                                      {d.id for d in turns}, s.related_turn_top_k)
        shown = {
            "persona": sorted(rank["persona"], key=lambda i: int(i.metadata.get("position", 0))),
            "faq": list(rank["faq"]),
            "memory": list(rank["memory"]),
            "summary": sorted(rank["summary"], key=lambda i: int(i.metadata.get("summary_index") or 0)),
            "related": sorted(rank["related"], key=lambda i: int(i.metadata.get("turn_index") or 0)),
            "turn": list(reversed(rank["turn"])),
        }
        drop_order = {name: list(reversed(items)) for name, items in rank.items()}
        counter = self._tokens() if s.context_max_tokens > 0 else None
        budget = _Budget(shown, drop_order, s.context_max_chars, s.context_max_tokens, counter)
        context.dropped = budget.fit()
        for name in SECTIONS:
            setattr(context, name, budget.sections[name])
        context.prompt = render_prompt(budget.sections)
        context.chars, context.tokens = budget.size()
        return context

    def _related_turns(self, conversation_id: str, user_message: str, vector: Any, recent: set[str],
                       k: int) -> list[ContextItem]:
        """The ``k`` older turns (outside the recent window) that best match the message, by the hybrid
        of :mod:`brain.turn_search` (dense + BM25, speaker, neighbouring turns)."""
        turns = self.store.conversation_turns(conversation_id)
        if len(turns) <= len(recent):
            return []
        index = self._turn_index(conversation_id, turns)
        hits = index.search(user_message, vector, min(len(turns), k + len(recent)))
        return [ContextItem(h.id, h.text, h.metadata, {
                    "score": h.score, "similarity": h.similarity, "bm25": h.bm25, "dense_part": h.dense_part,
                    "lexical_part": h.lexical_part, "speaker_part": h.speaker_part,
                    "neighbour_part": h.neighbour_part})
                for h in hits if h.id not in recent][:k]

    def _turn_index(self, conversation_id: str, turns: list[Any]) -> Any:
        """The conversation's search index, rebuilt when its turns changed; vectors are fetched once per turn."""
        from brain.turn_search import TurnIndex

        key = tuple(t.id for t in turns)
        cached = self._turn_search.get(conversation_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        vectors = cached[2] if cached is not None else {}
        missing = [t.id for t in turns if t.id not in vectors]
        if missing:
            # by id alone: the ids are turns already, and a type filter makes Chroma scan metadata
            vectors = {**vectors, **{d.id: d.embedding for d in self.store.get(missing, include_embeddings=True)}}
        with_vectors = [t for t in turns if t.id in vectors]
        index = TurnIndex([type(t)(id=t.id, text=t.text, metadata=t.metadata, embedding=vectors[t.id])
                           for t in with_vectors])
        self._turn_search.put(conversation_id, (key, index, {t.id: vectors[t.id] for t in with_vectors}))
        return index

    def _tokens(self) -> TokenCounter:
        if self._token_counter is None:
            self._token_counter = TokenCounter()
        return self._token_counter

    # ---- recording ---------------------------------------------------------------------------------------
    def record_exchange(
        self,
        conversation_id: str | None,
        user_text: str,
        assistant_text: str,
        *,
        entity: str | None = None,
        timestamp: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Exchange:
        """Store the exchange as two turns (one write: both or neither) with consecutive ``turn_index``
        values; ``conversation_id`` ``None`` starts a new conversation (``conv-<uuid>``). With
        ``entity`` the turns are stored in that entity's scope. Schedules the summaries now due."""
        conversation_id = _check_conversation(conversation_id, required=False) or new_conversation_id()
        extra = dict(metadata or {})
        clashing = sorted(k for k in extra if k in _TURN_KEYS)
        if clashing:
            raise ValidationError(
                f"metadata may not set {clashing}: record_exchange sets them itself",
                [{"item": None, "field": f"metadata.{k}", "message": "reserved"} for k in clashing],
            )
        if entity is not None:
            extra["scope"] = _check_entity(entity)
        if timestamp is None:
            timestamp = utc_now()
        with self._stripes[hash(conversation_id) % _LOCK_STRIPES]:
            user_id, assistant_id = self.store.upsert_turn(
                conversation_id, user_text, assistant_text, user_ts=timestamp, assistant_ts=timestamp,
                source="chat", **extra,
            )
            user_index, assistant_index = self._turn_indexes(conversation_id, user_id, assistant_id)
            scheduled = self._schedule(conversation_id, assistant_index)
        return Exchange(conversation_id, user_id, assistant_id, user_index, assistant_index,
                        [job.turn_range for job in scheduled])

    def _turn_indexes(self, conversation_id: str, user_id: str, assistant_id: str) -> tuple[int, int]:
        recent = self.store.recent_turns(conversation_id, 2)  # served from the store's cache
        if [d.id for d in recent] != [user_id, assistant_id]:  # another writer got in between
            recent = self.store.get([user_id, assistant_id])
        by_id = {d.id: int(d.metadata["turn_index"]) for d in recent}
        return by_id[user_id], by_id[assistant_id]

    def _state(self, conversation_id: str) -> _SummaryState:
        state = self._states.get(conversation_id)
        if state is not None:
            return state
        covered, index = 0, 0
        for doc in self.store.get(where={"conversation_id": conversation_id}, type=DocType.SUMMARY):
            index = max(index, int(doc.metadata.get("summary_index") or 0))
            try:
                covered = max(covered, parse_turn_range(doc.metadata.get("turn_range"))[1])
            except ValueError:  # no range (written around the schema): covers nothing we can tell
                pass
        state = _SummaryState(covered=covered, next_index=index + 1)
        self._states.put(conversation_id, state)
        return state

    def _schedule(self, conversation_id: str, last_turn: int) -> list[SummaryJob]:
        """Queue a job for each full window of ``2 * RAG_SUMMARY_EVERY_N`` turns not yet summarised."""
        window = 2 * self.settings.summary_every_n
        state = self._state(conversation_id)
        jobs = []
        while last_turn - state.covered >= window:
            jobs.append(SummaryJob(conversation_id, state.covered + 1, state.covered + window, state.next_index))
            state.covered += window
            state.next_index += 1
        if jobs:
            with self._cond:
                self._jobs.extend(jobs)
                self._cond.notify_all()
        return jobs

    def remember(
        self,
        text: str,
        *,
        importance: int = 3,
        tags: Sequence[str] | None = None,
        entity: str | None = None,
        conversation_id: str | None = None,
        timestamp: datetime | str | float | None = None,
        source: str = "chat",
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Store an explicit memory (in ``entity``'s scope, else global); returns its id. The same text
        in the same scope updates the existing memory. ``created_at`` records the first write."""
        extra = check_extra_metadata(metadata, ("importance", "tags", "entity", "conversation_id"), call="remember")
        try:
            when = parse_timestamp(timestamp if timestamp is not None else utc_now())
        except ValueError as exc:
            raise ValidationError(str(exc), [{"item": None, "field": "timestamp", "message": str(exc)}]) from None
        extra.setdefault("created_at", format_timestamp(when))
        return self.store.upsert_memory(
            text, importance=importance, tags=tags, timestamp=when, source=source,
            entity=entity, conversation_id=conversation_id, **extra,
        )

    def consolidate(self, *, dry_run: bool = False, threshold: float | None = None) -> ConsolidationReport:
        """Merge near-duplicate memories of each scope (see :mod:`brain.consolidate`)."""
        from brain.consolidate import consolidate_memories

        threshold = self.settings.consolidate_threshold if threshold is None else threshold
        return consolidate_memories(self.store, threshold=threshold, dry_run=dry_run)

    # ---- summaries -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._jobs and not self._stop.is_set():
                    self._cond.wait(timeout=ACCESS_FLUSH_SECONDS)
                if self._stop.is_set():
                    return
                job = self._jobs.popleft() if self._jobs else None
                self._running = job
            try:
                self._maybe_flush_access()
            except Exception:  # as above: the uses stay queued for the next flush
                log.exception("writing memory uses failed")
            if job is None:
                continue
            try:
                self._summarize_job(job)
            except Exception:  # not one of ours (e.g. a raw Chroma error): log it, keep the worker alive
                log.exception("summary of %s turns %s failed", job.conversation_id, job.turn_range)
                self._states.pop(job.conversation_id)  # the window is scheduled again later
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def _turn_texts(self, conversation_id: str, start: int, end: int) -> tuple[list[TurnText], list[Any]]:
        docs = self.store.get(
            where={"conversation_id": conversation_id, "turn_index": {"$gte": start, "$lte": end}}, type=DocType.TURN
        )
        docs.sort(key=lambda d: int(d.metadata.get("turn_index") or 0))
        return [TurnText(int(d.metadata["turn_index"]), str(d.metadata.get("role", "user")), d.text) for d in docs], docs

    def _summarize_job(self, job: SummaryJob, *, model: bool = True) -> None:
        """Summarise one window and store it; never raises (the worker must keep going)."""
        try:
            turns, docs = self._turn_texts(job.conversation_id, job.start, job.end)
            if not turns:
                log.warning("no turns %s in %s to summarise (deleted?); skipped", job.turn_range, job.conversation_id)
                return
            text, name, reason = self._summarize(turns, job, use_model=model)
            self._write_summary(job, text, name, reason, docs)
        except BrainError as exc:  # the store failed: try the same window again, then give up on it for now
            if job.attempt < self.settings.summary_retries and not self._stop.is_set():
                delay = self.settings.summary_backoff_seconds * 2 ** job.attempt
                log.warning("could not store the summary of %s turns %s (%s); retrying in %.1f s",
                            job.conversation_id, job.turn_range, exc, delay)
                self._stop.wait(delay)
                with self._cond:  # first in line again, so the windows stay in order
                    self._jobs.appendleft(replace(job, attempt=job.attempt + 1))
                    self._cond.notify_all()
                return
            log.error("could not store the summary of %s turns %s: %s; it is scheduled again on the next exchange",
                      job.conversation_id, job.turn_range, exc)
            self._states.pop(job.conversation_id)

    def _summarize(self, turns: list[TurnText], job: SummaryJob, *, use_model: bool) -> tuple[str, str, str | None]:
        """(text, summariser name, fallback reason or None)."""
        reason = None
        if not use_model:
            reason = "the summary queue was closed before the model ran"
        elif time.monotonic() < self._down_until:
            reason = f"the model summariser failed recently ({self._status['last_error']})"
        else:
            try:
                return self._model_summary(turns, interruptible=True), self.summarizer.name, None
            except SummarizerError as exc:
                reason = _one_line(str(exc))
                self._down_until = time.monotonic() + self.unavailable_cooldown
        log.warning("summary of %s turns %s written by the extractive fallback: %s",
                    job.conversation_id, job.turn_range, reason)
        return self.fallback.summarize(turns), self.fallback.name, reason

    def _model_summary(self, turns: list[TurnText], *, interruptible: bool) -> str:
        """The model's summary, retried BRAIN_SUMMARY_RETRIES times with doubling back-off, all of it within
        BRAIN_SUMMARY_DEADLINE_SECONDS (each attempt gets at most the time left); raises the last error.

        A hung server (it accepts the connection and never answers) costs one deadline, not a timeout per
        attempt: the first timeout marks it unreachable in :meth:`health`, and no attempt outlives the deadline."""
        attempts = self.settings.summary_retries + 1
        budget = self.settings.summary_deadline_seconds
        deadline = time.monotonic() + budget
        for attempt in range(attempts):
            try:
                left = deadline - time.monotonic()
                text = self.summarizer.summarize(turns, timeout=min(self.settings.summary_timeout, max(left, 0.001)))
            except SummarizerError as exc:
                self._status.update(reachable=not isinstance(exc, SummarizerUnavailable),
                                    last_error=_one_line(str(exc)), last_error_at=_now_iso())
                if attempt + 1 == attempts:
                    raise
                delay = self.settings.summary_backoff_seconds * 2**attempt
                if time.monotonic() + delay >= deadline:
                    raise type(exc)(  # the same kind of failure, said to have run out of time
                        f"no model summary within BRAIN_SUMMARY_DEADLINE_SECONDS={budget:g} after {attempt + 1} "
                        f"attempt{'s' if attempt else ''}; the last: {_one_line(str(exc))}"
                    ) from None
                if interruptible and self._stop.wait(delay):
                    raise  # closing: do not keep the caller waiting
                if not interruptible:
                    time.sleep(delay)
                continue
            self._status.update(reachable=True, last_success_at=_now_iso())
            self._down_until = 0.0
            return text
        raise AssertionError("unreachable")  # pragma: no cover

    def _write_summary(self, job: SummaryJob, text: str, name: str, reason: str | None, docs: list[Any],
                       doc_id: str | None = None, timestamp: Any = None) -> None:
        last = docs[-1].metadata
        meta: dict[str, Any] = {"summarizer": name, "fallback": reason is not None}
        if reason is not None:
            meta["fallback_reason"] = reason[:500]
        scope = last.get("scope")
        if scope and scope != GLOBAL_SCOPE:
            meta["scope"] = scope
        self.store.upsert_summary(
            job.conversation_id, text, turn_range=job.turn_range, summary_index=job.summary_index,
            timestamp=timestamp or last.get("timestamp"), source="system",
            id=doc_id or summary_id(job.conversation_id, job.summary_index), **meta,
        )
        self._status["fallback_summaries" if reason is not None else "model_summaries"] += 1

    def resummarize_fallbacks(self, conversation_id: str | None = None) -> int:
        """Replace extractive fallback summaries with the model's (same id, index and range), in the
        caller's thread. Returns how many were replaced. Raises :class:`SummarizerUnavailable` if the
        model cannot be reached (the ones replaced before that stay replaced); a summary the model
        answers garbage for is left as it is, with a warning."""
        conversation_id = _check_conversation(conversation_id, required=False)
        where: dict[str, Any] = {"fallback": True}
        if conversation_id is not None:
            where["conversation_id"] = conversation_id
        docs = self.store.get(where=where, type=DocType.SUMMARY)
        docs.sort(key=lambda d: (d.metadata["conversation_id"], int(d.metadata.get("summary_index") or 0)))
        replaced = 0
        for doc in docs:
            try:
                start, end = parse_turn_range(doc.metadata.get("turn_range"))
            except ValueError:
                continue
            job = SummaryJob(doc.metadata["conversation_id"], start, end, int(doc.metadata["summary_index"]))
            turns, turn_docs = self._turn_texts(job.conversation_id, job.start, job.end)
            if not turns:
                continue
            try:
                text = self._model_summary(turns, interruptible=False)
            except SummarizerUnavailable as exc:
                raise SummarizerUnavailable(
                    f"{exc} (replaced {replaced} of {len(docs)} fallback summaries; run again when it is up)"
                ) from None
            except SummarizerError as exc:
                log.warning("kept the fallback summary %s: %s", doc.id, _one_line(str(exc)))
                continue
            self._write_summary(job, text, self.summarizer.name, None, turn_docs, doc_id=doc.id,
                                timestamp=doc.metadata.get("timestamp"))
            replaced += 1
        return replaced

    def pending_summaries(self) -> int:
        """Summaries queued or being written."""
        with self._cond:
            return len(self._jobs) + (self._running is not None)

    def wait_for_summaries(self, timeout: float | None = None) -> bool:
        """Block until every scheduled summary is stored (True) or ``timeout`` seconds passed (False).
        Without a worker thread the queued jobs run here, in the caller's thread."""
        if self._thread is None:
            while True:
                with self._cond:
                    if not self._jobs:
                        break
                    job = self._jobs.popleft()
                self._summarize_job(job)
            self.flush_access()
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._running is not None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        self.flush_access()
        return True

    def health(self, *, probe: bool = False) -> dict[str, Any]:
        """The summariser's status: ``reachable`` (None until known; ``probe=True`` asks it now),
        ``queue_length``, ``last_error``, and counts of summaries written by the model and the fallback."""
        if probe:
            try:
                self.summarizer.ping()
                self._status.update(reachable=True)
            except SummarizerError as exc:
                self._status.update(reachable=False, last_error=_one_line(str(exc)), last_error_at=_now_iso())
        return {
            "summarizer": self.summarizer.name,
            "fallback": self.fallback.name,
            **self._status,
            "queue_length": self.pending_summaries(),
            "worker_running": self._thread is not None and self._thread.is_alive(),
            # seconds during which new summaries go straight to the fallback after a failure
            "fallback_for_seconds": round(max(0.0, self._down_until - time.monotonic()), 1),
            "summary_every_n": self.settings.summary_every_n,
        }

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop the worker (after the summary in progress; a back-off wait is cut short), write
        extractive summaries for the windows still queued — so none is missing; the model can
        replace them later — and persist recorded memory uses. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        while True:
            with self._cond:
                if not self._jobs:
                    break
                job = self._jobs.popleft()
            self._summarize_job(job, model=False)
        self.flush_access()

    # ---- access tracking ---------------------------------------------------------------------------------
    def _note_use(self, ids: Sequence[str]) -> None:
        now = self._clock()
        self.store.memory_index().set_last_used({i: now for i in ids})  # ranking sees it at once
        with self._used_lock:
            for doc_id in ids:
                self._used[doc_id] = now
            due = len(self._used) >= ACCESS_FLUSH_SIZE
        if due and self._thread is not None:
            with self._cond:
                self._cond.notify_all()

    def _maybe_flush_access(self) -> None:
        if self._used and (time.monotonic() - self._last_flush >= ACCESS_FLUSH_SECONDS
                           or len(self._used) >= ACCESS_FLUSH_SIZE):
            self.flush_access()

    def flush_access(self) -> int:
        """Persist the memory uses recorded since the last flush (``last_used`` in their metadata);
        the worker does this about every second. Returns how many memories were written."""
        with self._used_lock:
            pending, self._used = self._used, {}
            self._last_flush = time.monotonic()
        if not pending:
            return 0
        try:
            return self.store.record_memory_use(pending)
        except BrainError as exc:
            log.error("could not persist the last use of %d memories (will retry): %s", len(pending), exc)
            with self._used_lock:
                for doc_id, epoch in pending.items():
                    self._used[doc_id] = max(epoch, self._used.get(doc_id, epoch))
            return 0


def summary_id(conversation_id: str, summary_index: int) -> str:
    """Summaries have stable ids, so writing a window twice (a retry, a second process) replaces it."""
    return derived_id("summary", conversation_id, str(summary_index))


def _similarity_item(hit) -> ContextItem:
    return ContextItem(hit.id, hit.text, hit.metadata, {"similarity": hit.similarity})


def _check_conversation(value: Any, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    return valid_conversation_id(value)


def _check_entity(entity: Any) -> str:
    if not isinstance(entity, str):
        raise ValidationError(f"entity must be a string, got {entity!r}",
                              [{"item": None, "field": "entity", "message": "not a string"}])
    try:
        return entity_scope(entity)
    except ValueError as exc:
        message = f"entity: {exc}"
        raise ValidationError(message, [{"item": None, "field": "entity", "message": message}]) from None


def _one_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _now_iso() -> str:
    return format_timestamp(utc_now())


__all__ = [
    "ChatMemory",
    "Context",
    "ContextItem",
    "DROP_PRIORITY",
    "Exchange",
    "SECTIONS",
    "SummaryJob",
    "TokenCounter",
    "new_conversation_id",
    "render_prompt",
    "summary_id",
]
