"""ChatMemory: the one object a chat backend holds (the HTTP API is a thin shell over it).

A facade over the parts of :mod:`brain.chat`; it gathers from the store and hands on:

* :meth:`ChatMemory.build_context` — embeds the message once, gathers each section's candidates
  (persona, FAQ, memories, summaries, related and recent turns, each limited by its ``RAG_*``
  setting) and hands them to :func:`~brain.chat.context.assemble_context` (pure: budget and prompt).
* :meth:`ChatMemory.record_exchange` — stores the user and assistant turns in one write, with
  consecutive ``turn_index`` values and who said each (:mod:`brain.chat.speakers`), and queues the
  summaries now due (:mod:`brain.chat.summary_queue`,
  written by :mod:`brain.chat.summaries`).
* :meth:`ChatMemory.remember`, :meth:`ChatMemory.consolidate` (see :mod:`brain.consolidate`) and
  access tracking (:mod:`brain.chat.access`).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from brain.chat.access import ACCESS_FLUSH_SECONDS, AccessTracker
from brain.chat.context import SECTIONS, Context, ContextItem, TokenCounter, assemble_context, explain
from brain.chat.related_turns import RelatedTurns
from brain.chat.speakers import PersonaName, exchange_speakers
from brain.chat.summaries import SummaryWriter
from brain.chat.summary_queue import SummaryQueue, SummarySchedule
from brain.config import Settings
from brain.consolidate import ConsolidationReport, consolidate_memories
from brain.errors import Problem, ValidationError
from brain.results import Hit
from brain.schemas import (
    DocType,
    check_extra_metadata,
    check_k,
    format_timestamp,
    parse_timestamp,
    utc_now,
    valid_conversation_id,
    valid_entity_scope,
)
from brain.summarizers import ExtractiveSummarizer, Summarizer, get_summarizer

if TYPE_CHECKING:
    from brain.store import RagStore

#: persona sections served per call (the whole current version; the cap only bounds a broken file)
PERSONA_MAX_SECTIONS = 1000
_LOCK_STRIPES = 64
# keys record_exchange sets itself; metadata= may not override them
_TURN_KEYS = frozenset({"text", "type", "id", "embedding", "role", "conversation_id", "turn_index",
                        "timestamp", "ts_epoch", "source", "scope", "speaker"})


def new_conversation_id() -> str:
    return f"conv-{uuid.uuid4()}"


@dataclass
class Exchange:
    """What :meth:`ChatMemory.record_exchange` stored; ``summaries_scheduled`` lists the turn ranges
    queued for summarising because of this exchange (e.g. ``["1-10"]``). The id and index of a side
    the exchange did not have (``user_text`` or ``assistant_text`` None) are None."""

    conversation_id: str
    user_turn_id: str | None
    assistant_turn_id: str | None
    user_turn_index: int | None
    assistant_turn_index: int | None
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


class ChatMemory:
    """Context assembly, conversation recording, summaries and memories over one :class:`RagStore`.

    ``settings`` defaults to the store's. ``summarizer`` defaults to the Ollama model of
    ``BRAIN_SUMMARY_MODEL``; ``fallback`` to :class:`ExtractiveSummarizer`. With ``start_worker=False``
    no thread is started: scheduled summaries wait until :meth:`wait_for_summaries` (which then
    runs them in the caller's thread) or :meth:`close` (which writes extractive ones).
    ``unavailable_cooldown``: after a summary needed the fallback, later ones use it at once for this
    many seconds (default ``BRAIN_SUMMARY_COOLDOWN_SECONDS``). ``clock``: the epoch time access tracking
    records a use at. Thread-safe; a context manager (``close`` on exit).

    The parts are public for callers that need one of them: :attr:`summary_writer` (the summariser,
    its retries and health), :attr:`summary_queue` (the worker), :attr:`access` (access tracking).
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
        s = self.settings
        self.summary_writer = SummaryWriter(
            store, s, summarizer if summarizer is not None else get_summarizer(s),
            fallback if fallback is not None else ExtractiveSummarizer(),
            s.summary_cooldown_seconds if unavailable_cooldown is None else unavailable_cooldown,
        )
        self.related_turns = RelatedTurns(store)
        self.persona_name = PersonaName(store)
        self._token_counter: TokenCounter | None = None
        self._stripes = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self._closed = False
        self.access = AccessTracker(store, clock=clock, on_due=lambda: self.summary_queue.wake())
        self.summary_queue = SummaryQueue(self.summary_writer, SummarySchedule(store, s), start_worker=start_worker,
                                          tick=self.access.maybe_flush, tick_seconds=ACCESS_FLUSH_SECONDS)

    @property
    def summarizer(self) -> Summarizer:
        return self.summary_writer.summarizer

    @property
    def fallback(self) -> Summarizer:
        return self.summary_writer.fallback

    def __enter__(self) -> ChatMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- context ---------------------------------------------------------------------------------------
    def build_context(self, conversation_id: str | None, user_message: str, entity: str | None = None) -> Context:
        """What the model should see for ``user_message`` (see :mod:`brain.chat.context` for the budget)."""
        conversation_id = _check_conversation(conversation_id)
        if not isinstance(user_message, str) or not user_message.strip():
            raise ValidationError("user_message must be a non-empty string",
                                  [Problem("user_message", "empty")])
        if entity is not None:
            valid_entity_scope(entity)
        s = self.settings
        if not s.rag_enabled:  # nothing is read: not the store, not the embedder
            return Context(conversation_id=conversation_id, entity=entity, enabled=False)
        relevance: dict[str, dict[str, Any]] = {}
        ranked = self._candidates(conversation_id, user_message, entity, relevance)
        counter = self._tokens() if s.context_max_tokens > 0 else None
        return assemble_context(ranked, conversation_id=conversation_id, entity=entity,
                                max_chars=s.context_max_chars, max_tokens=s.context_max_tokens, counter=counter,
                                relevance=relevance)

    def _candidates(self, conversation_id: str | None, user_message: str, entity: str | None,
                    relevance: dict[str, dict[str, Any]]) -> dict[str, list[ContextItem]]:
        """Each section's candidates, best first (recent turns newest first); the message is embedded once.
        Under the relevance ranking memories are gated by the store (relevance floor and margin), FAQ
        entries and summaries below the embedder's similarity floor are left out; ``relevance`` receives
        what the gate did per section."""
        s, store = self.settings, self.store
        want_summaries = s.enable_summary and conversation_id is not None
        want_related = s.enable_turn and s.enable_related_turns and conversation_id is not None
        vector = None
        if s.enable_persona or s.enable_faq or s.enable_memory or want_summaries or want_related:
            vector = store.embedder.embed_query(user_message)  # once, for every document type
        ranked: dict[str, list[ContextItem]] = {name: [] for name in SECTIONS}
        floor = store.retrieval.similarity_floor() if vector is not None else None
        if s.enable_persona:
            hits = store.retrieve_persona(None, PERSONA_MAX_SECTIONS, query_vector=vector)
            ranked["persona"] = [_similarity_item("persona", h, None) for h in hits]
        if s.enable_faq:
            hits = store.retrieve_faq(None, s.faq_top_k, query_vector=vector)
            ranked["faq"] = _above_floor("faq", hits, floor, relevance)
        if s.enable_memory:
            hits = store.retrieve_memories(user_message, s.memory_top_k, entity, query_vector=vector, relevance=True)
            ranked["memory"] = [_memory_item(h, getattr(hits, "floor", None)) for h in hits]
            if getattr(hits, "floor", None) is not None:
                relevance["memory"] = {**hits.gate(), "shown": len(hits)}
            if s.track_access and hits:
                self.access.note([h.id for h in hits])
        if want_summaries:
            hits = store.retrieve_summaries(None, s.summary_top_k, conversation_id, query_vector=vector)
            ranked["summary"] = _above_floor("summary", hits, floor, relevance)
        if s.enable_turn and conversation_id is not None:
            turns = store.recent_turns(conversation_id, s.turn_top_k)
            ranked["turn"] = [ContextItem(d.id, d.text, d.metadata, why=explain("turn", {}, None))
                              for d in reversed(turns)]
            if want_related:
                ranked["related"] = self._related(conversation_id, user_message, vector, turns, s.related_turn_top_k)
        return ranked

    def related_turns_for(self, conversation_id: str, user_message: str, *, query_vector: Any = None,
                          k: int | None = None) -> list[ContextItem]:
        """The context's ``related`` candidates for ``user_message``, best first, before the budget: the
        ``k`` (default ``RAG_RELATED_TURN_TOP_K``) older turns of the conversation that match it best
        (:mod:`brain.turn_search`), outside the ``RAG_TURN_TOP_K`` recent turns the context shows anyway.
        ``query_vector``: the message embedded by the store's embedder (embedded here when absent)."""
        conversation_id = valid_conversation_id(conversation_id)
        if not isinstance(user_message, str) or not user_message.strip():
            raise ValidationError("user_message must be a non-empty string", [Problem("user_message", "empty")])
        s = self.settings
        k = s.related_turn_top_k if k is None else check_k(k)
        vector = self.store.embedder.embed_query(user_message) if query_vector is None else query_vector
        return self._related(conversation_id, user_message, vector,
                             self.store.recent_turns(conversation_id, s.turn_top_k), k)

    def _related(self, conversation_id: str, user_message: str, vector: Any, recent: Sequence[Any],
                 k: int) -> list[ContextItem]:
        return self.related_turns.find(conversation_id, user_message, vector, {d.id for d in recent}, k)

    def _tokens(self) -> TokenCounter:
        if self._token_counter is None:
            self._token_counter = TokenCounter()
        return self._token_counter

    # ---- recording ---------------------------------------------------------------------------------------
    def record_exchange(
        self,
        conversation_id: str | None,
        user_text: str | None,
        assistant_text: str | None,
        *,
        entity: str | None = None,
        timestamp: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_name: str | None = None,
        assistant_name: str | None = None,
    ) -> Exchange:
        """Store the exchange as two turns (one write: both or neither) with consecutive ``turn_index``
        values; ``conversation_id`` ``None`` starts a new conversation (``conv-<uuid>``). With
        ``entity`` the turns are stored in that entity's scope. Schedules the summaries now due.

        Each turn's ``speaker`` is who said it: ``user_name`` (default: the entity's name) and
        ``assistant_name`` (default: the persona's name, see :mod:`brain.persona`); without a name a
        turn has no speaker. One side may be ``None``: a session the assistant opens, or a message
        left unanswered, is an exchange of one turn."""
        for name, text in (("user_text", user_text), ("assistant_text", assistant_text)):
            if text is not None and (not isinstance(text, str) or not text.strip()):  # the store would say "item 0"
                raise ValidationError.of(name, f"{name} must be a non-empty string, got {text!r} (nothing was written)")
        conversation_id = _check_conversation(conversation_id) or new_conversation_id()
        if user_text is None and assistant_text is None:
            raise ValidationError("an exchange needs user_text, assistant_text or both; both are None",
                                  [Problem("user_text", "missing"), Problem("assistant_text", "missing")])
        extra = dict(metadata or {})
        clashing = sorted(k for k in extra if k in _TURN_KEYS)
        if clashing:
            raise ValidationError(
                f"metadata may not set {clashing}: record_exchange sets them itself"
                + (" (give user_name / assistant_name for speaker)" if "speaker" in clashing else ""),
                [Problem(f"metadata.{k}", "reserved") for k in clashing],
            )
        if entity is not None:
            extra["scope"] = valid_entity_scope(entity)
        user, assistant = exchange_speakers(user_name, assistant_name, entity, self.persona_name)
        if timestamp is None:
            timestamp = utc_now()
        turns = [(role, text, name) for role, text, name in
                 (("user", user_text, user), ("assistant", assistant_text, assistant)) if text is not None]
        docs = [{"text": text, "type": DocType.TURN, "conversation_id": conversation_id, "role": role,
                 "timestamp": timestamp, "source": "chat", **extra, **({"speaker": name} if name else {})}
                for role, text, name in turns]
        with self._stripes[hash(conversation_id) % _LOCK_STRIPES]:
            written = self.store.write_docs(docs)
            ids = dict(zip((role for role, _, _ in turns), written.ids))
            user_id, assistant_id = ids.get("user"), ids.get("assistant")
            positions = {role: written.position(doc_id) for role, doc_id in ids.items()}
            scheduled = self.summary_queue.add(conversation_id, max(positions.values()))
        return Exchange(conversation_id, user_id, assistant_id, positions.get("user"), positions.get("assistant"),
                        [job.turn_range for job in scheduled])

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
            raise ValidationError.of("timestamp", str(exc)) from None
        extra.setdefault("created_at", format_timestamp(when))
        return self.store.upsert_memory(
            text, importance=importance, tags=tags, timestamp=when, source=source,
            entity=entity, conversation_id=conversation_id, **extra,
        )

    def consolidate(self, *, dry_run: bool = False, threshold: float | None = None) -> ConsolidationReport:
        """Merge near-duplicate memories of each scope (see :mod:`brain.consolidate`)."""
        return consolidate_memories(self.store, threshold=threshold, dry_run=dry_run)

    # ---- summaries, access, lifetime -----------------------------------------------------------------------
    def resummarize_fallbacks(self, conversation_id: str | None = None) -> int:
        """Replace extractive fallback summaries with the model's (same id, index and range), in the
        caller's thread; see :meth:`SummaryWriter.resummarize_fallbacks`."""
        return self.summary_writer.resummarize_fallbacks(_check_conversation(conversation_id))

    def pending_summaries(self) -> int:
        """Summaries queued or being written."""
        return self.summary_queue.pending()

    def wait_for_summaries(self, timeout: float | None = None) -> bool:
        """Block until every scheduled summary is stored (True) or ``timeout`` seconds passed (False),
        then persist recorded memory uses. Without a worker thread the queued jobs run here."""
        if not self.summary_queue.wait(timeout):
            return False
        self.flush_access()
        return True

    def health(self, *, probe: bool = False) -> dict[str, Any]:
        """The summariser's status: ``reachable`` (None until known; ``probe=True`` asks it now),
        ``queue_length``, ``last_error``, and counts of summaries written by the model and the fallback."""
        status = self.summary_writer.health(probe=probe)
        fallback_for = status.pop("fallback_for_seconds")
        return {
            **status,
            "queue_length": self.pending_summaries(),
            "worker_running": self.summary_queue.worker_running,
            # seconds during which new summaries go straight to the fallback after a failure
            "fallback_for_seconds": fallback_for,
            "summary_every_n": self.settings.summary_every_n,
        }

    def flush_access(self) -> int:
        """Persist the memory uses recorded since the last flush (``last_used`` in their metadata; see
        :mod:`brain.chat.access` for where it is written); the worker does this about every second.
        Returns how many memories were written."""
        return self.access.flush()

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop the worker (after the summary in progress; a back-off wait is cut short), write
        extractive summaries for the windows still queued — so none is missing; the model can
        replace them later — and persist recorded memory uses. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.summary_queue.close(timeout)
        self.flush_access()


def _similarity_item(section: str, hit: Hit, floor: float | None) -> ContextItem:
    scores = {"similarity": hit.similarity}
    return ContextItem(hit.id, hit.text, hit.metadata, scores, why=explain(section, scores, floor))


def _memory_item(hit: Any, floor: float | None) -> ContextItem:
    scores = {"score": hit.score, "similarity": hit.similarity, "similarity_part": hit.similarity_part,
              "lexical_part": hit.lexical_part, "importance_part": hit.importance_part,
              "recency_part": hit.recency_part}
    return ContextItem(hit.id, hit.text, hit.metadata, scores, why=explain("memory", scores, floor))


def _above_floor(section: str, hits: Sequence[Hit], floor: float | None,
                 relevance: dict[str, dict[str, Any]]) -> list[ContextItem]:
    """The nearest ``hits`` that reach ``floor`` (all without one); records in ``relevance`` how many of
    the nearest were looked at and how many fell below."""
    kept = [h for h in hits if floor is None or h.similarity >= floor]
    if floor is not None:
        relevance[section] = {"floor": floor, "candidates": len(hits), "below_floor": len(hits) - len(kept),
                              "shown": len(kept)}
    return [_similarity_item(section, h, floor) for h in kept]


def _check_conversation(value: Any) -> str | None:
    """A conversation id, or None (none given)."""
    return None if value is None else valid_conversation_id(value)


__all__ = ["PERSONA_MAX_SECTIONS", "ChatMemory", "Exchange", "new_conversation_id"]
