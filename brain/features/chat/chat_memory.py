"""ChatMemory: the one object a chat backend holds (the HTTP API is a thin shell over it).

A facade over the parts of :mod:`brain.features.chat`; it gathers from the store and hands on:

* :meth:`ChatMemory.build_context` — embeds the message once, gathers each section's candidates
  (persona, FAQ, memories, summaries, related and recent turns, each limited by its ``RAG_*``
  setting) and hands them to :func:`~brain.features.chat.context.assemble_context` (pure: budget and prompt).
* :meth:`ChatMemory.record_exchange` — stores the user and assistant turns in one write, with
  consecutive ``turn_index`` values and who said each (:mod:`brain.features.chat.speakers`), and queues the
  summaries now due (:mod:`brain.features.chat.summary_queue`,
  written by :mod:`brain.features.chat.summaries`).
* :meth:`ChatMemory.extract_memories` — memory formation (:mod:`brain.features.chat.formation`), which the
  summary worker runs after each window's summary.
* :meth:`ChatMemory.remember`, :meth:`ChatMemory.consolidate` (see :mod:`brain.features.consolidate`) and
  access tracking (:mod:`brain.features.chat.last_used`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from brain.config import Settings
from brain.features.chat.context import Context, TokenCounter, assemble_context
from brain.features.chat.exchanges import (
    Exchange,
    check_conversation,
    checked_exchange,
    idempotent_conversation_id,
    idempotent_turn_id,
    new_conversation_id,
    replayed_exchange,
)
from brain.features.chat.formation import Formation, FormationBatch, FormationReport
from brain.features.chat.last_used import ACCESS_FLUSH_SECONDS, AccessTracker
from brain.features.chat.layout import (
    PART_SECTIONS,
    SHOWN_KEY,
    Layout,
    parse_shown,
    parts_from_shown,
    render_part,
    render_stable,
    user_content,
    window_start,
)
from brain.features.chat.prompt import SECTIONS, ContextItem, explain, render_line
from brain.features.chat.related_turns import RelatedTurns
from brain.features.chat.speakers import PersonaName, exchange_speakers
from brain.features.chat.summaries import SummaryWriter
from brain.features.chat.summary_queue import SummaryQueue, SummarySchedule
from brain.features.consolidate import ConsolidationReport, consolidate_memories
from brain.model.errors import Problem, ValidationError
from brain.model.ids import check_idempotency_key
from brain.model.results import GatedHits, Hit
from brain.model.schemas import (
    GLOBAL_SCOPE,
    DocType,
    check_extra_metadata,
    check_k,
    format_timestamp,
    is_inactive,
    is_part,
    parse_timestamp,
    parse_turn_range,
    utc_now,
    valid_conversation_id,
    valid_entity_scope,
    valid_name,
)
from brain.providers.summarizers import ExtractiveSummarizer, Summarizer
from brain.rules.memories import may_read
from brain.store.retrieval import core_memories
from brain.wiring import get_extractor, get_summarizer

if TYPE_CHECKING:
    from brain.providers.extractors import Extractor
    from brain.store import Store

#: the always-kept facts the stable message chooses from (importance first, then the newest)
STABLE_CORE_POOL = 20
#: persona sections served per call (the whole current version; the cap only bounds a broken file)
PERSONA_MAX_SECTIONS = 1000
_LOCK_STRIPES = 64


# keys record_exchange sets itself; metadata= may not override them
class ChatMemory:
    """Context assembly, conversation recording, summaries and memories over one :class:`RagStore`.

    ``settings`` defaults to the store's. ``summarizer`` defaults to the Ollama model of
    ``BRAIN_SUMMARY_MODEL``; ``fallback`` to :class:`ExtractiveSummarizer`. With ``start_worker=False``
    no thread is started: scheduled summaries wait until :meth:`wait_for_summaries` (which then
    runs them in the caller's thread) or :meth:`close` (which writes extractive ones).
    ``unavailable_cooldown``: after a summary needed the fallback, later ones use it at once for this
    many seconds (default ``BRAIN_SUMMARY_COOLDOWN_SECONDS``). ``clock``: the epoch time access tracking
    records a use at. Thread-safe; a context manager (``close`` on exit).

    ``extractor``: memory formation's model (default: ``get_extractor(settings)``, None when formation is off;
    see :meth:`extract_memories`).

    The parts are public for callers that need one of them: :attr:`summary_writer` (the summariser,
    its retries and health), :attr:`summary_queue` (the worker), :attr:`formation` (memory formation),
    :attr:`access` (access tracking).
    """

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        summarizer: Summarizer | None = None,
        fallback: Summarizer | None = None,
        start_worker: bool = True,
        unavailable_cooldown: float | None = None,
        clock: Callable[[], float] = time.time,
        extractor: Extractor | None = None,
    ):
        self.store = store
        self.settings = settings if settings is not None else store.settings
        s = self.settings
        self.summary_writer = SummaryWriter(
            store,
            s,
            summarizer if summarizer is not None else get_summarizer(s),
            fallback if fallback is not None else ExtractiveSummarizer(),
            s.summary_cooldown_seconds if unavailable_cooldown is None else unavailable_cooldown,
        )
        self.formation = Formation(store, s, extractor if extractor is not None else get_extractor(s))
        self.summary_writer.formation = self.formation.enabled
        self.related_turns = RelatedTurns(store)
        self.persona_name = PersonaName(store)
        self._token_counter: TokenCounter | None = None
        self._direction: list[float] | None = None
        self._stripes = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self._key_stripes = [threading.Lock() for _ in range(_LOCK_STRIPES)]  # taken before _stripes
        self._closed = False
        self.access = AccessTracker(store, clock=clock, on_due=lambda: self.summary_queue.wake())
        self.summary_queue = SummaryQueue(
            self.summary_writer,
            SummarySchedule(store, s),
            start_worker=start_worker,
            tick=self.access.maybe_flush,
            tick_seconds=ACCESS_FLUSH_SECONDS,
            formation=self.formation,
        )
        if start_worker and self.formation.enabled:  # windows a stopped (or killed) process left pending
            self.summary_queue.add_formation(
                (b.conversation_id, b.turn_range) for b in self.formation.batches(status="pending")
            )

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
        """What the model should see for ``user_message`` (see :mod:`brain.features.chat.context` for the budget).

        ``conversation_id`` may name a conversation not yet recorded (a chat backend asks for the context
        of its first message before recording the exchange): its context is that of an empty conversation,
        persona, knowledge and memories without turns or summaries. With ``entity``, another entity's
        conversation reads the same way, so a context never shows what another entity said."""
        conversation_id = check_conversation(conversation_id)
        if not isinstance(user_message, str) or not user_message.strip():
            raise ValidationError("user_message must be a non-empty string", [Problem("user_message", "empty")])
        if entity is not None:
            entity = valid_name(entity)  # one canonical form: "Alice" is "alice"
        s = self.settings
        if not s.rag_enabled:  # nothing is read: not the store, not the embedder
            return Context(conversation_id=conversation_id, entity=entity, enabled=False)
        relevance: dict[str, dict[str, object]] = {}
        shown = conversation_id
        if shown is not None and not self._shows_conversation(shown, entity):
            shown = None  # read as a conversation not yet recorded: nothing of it is shown
        ranked = self._candidates(shown, user_message, entity, relevance)
        counter = self._tokens() if s.context_max_tokens > 0 else None
        context = assemble_context(
            ranked,
            conversation_id=conversation_id,
            entity=entity,
            max_chars=s.context_max_chars,
            max_tokens=s.context_max_tokens,
            counter=counter,
            relevance=relevance,
        )
        context.layout = self._layout(context, shown, entity)
        return context

    def _layout(self, context: Context, conversation_id: str | None, entity: str | None) -> Layout:
        """``context`` in cache order (:mod:`brain.features.chat.layout`): the stable system message, the
        conversation's window as messages with the parts they were sent with, and this message's part."""
        s, store = self.settings, self.store
        turns = (
            store.conversation_turns(conversation_id, entity=entity)
            if conversation_id is not None and s.enable_turn
            else []
        )
        core = self._stable_core(entity) if entity is not None and s.enable_memory and s.core_top_k > 0 else []
        # the window and the stable part share the budget (the summaries of a long conversation aside, so that
        # where the window starts does not depend on which summaries it leaves out)
        stride = 2 * s.summary_every_n
        budget = s.context_max_chars - len(render_stable({"persona": context.persona, "core": core}))
        # the texts alone are a lower bound of each turn's size: the window starts no earlier than they say,
        # so only the parts from there on are read
        start = window_start([len(d.text) for d in turns], stride, budget)
        parts = self._recorded_parts(turns[start:], turns, conversation_id, entity)
        contents = [
            user_content(parts[d.id][0], d.text) if d.id in parts and d.metadata.get("role") == "user" else d.text
            for d in turns[start:]
        ]
        moved = window_start([len(c) for c in contents], stride, budget)
        window, contents = turns[start + moved :], contents[moved:]
        summaries = self._summaries_before(window[0], conversation_id, entity) if window and start + moved else []
        stable = render_stable({"persona": context.persona, "core": core, "summary": summaries})
        # what the prompt already holds is not shown again: the stable part's facts, the window's turns and
        # what the parts of the window's messages showed
        held = {i.id for i in core} | {d.id for d in window}
        held |= {doc_id for d in window if d.id in parts for doc_id in parts[d.id][1]}
        sections = {name: [i for i in getattr(context, name) if i.id not in held] for name in PART_SECTIONS}
        return Layout(
            stable=stable,
            conversation=[
                {"role": str(d.metadata.get("role")), "content": c}
                for d, c in zip(window, contents)
                if d.metadata.get("role") in ("user", "assistant")
            ],
            part=render_part(sections),
            shown=[(name, i.id) for name in PART_SECTIONS for i in sections[name]],
            window_start=int(window[0].metadata.get("turn_index") or 0) if window else None,
        )

    def _recorded_parts(
        self, turns: Sequence[Any], conversation: Sequence[Any], conversation_id: str | None, entity: str | None
    ) -> dict[str, tuple[str, set[str]]]:
        """Turn id -> the part its user message (among ``turns``) was sent with, re-rendered from what its
        documents say now, and the ids it shows. Related turns come from the ``conversation``'s turns at hand,
        the rest from the in-process indexes (Chroma only for what they do not hold)."""
        recorded = {d.id: parse_shown(d.metadata.get(SHOWN_KEY)) for d in turns if d.metadata.get("role") == "user"}
        if conversation_id is None or not any(recorded.values()):
            return {}
        documents = {d.id: d for d in conversation}
        wanted = [doc_id for shown in recorded.values() for _, doc_id in shown if doc_id not in documents]
        if wanted:
            documents.update((d.id, d) for d in self.store.get_by_ids(wanted, entity=entity))
        parts = {}
        for turn_id, shown in recorded.items():
            sections = parts_from_shown(shown, documents, conversation_id=conversation_id, usable=_usable_memory)
            part = render_part(sections)
            if part:
                parts[turn_id] = (part, {i.id for items in sections.values() for i in items})
        return parts

    def _stable_core(self, entity: str) -> list[ContextItem]:
        """The facts about ``entity`` the stable message keeps in mind: as :meth:`_core`, but chosen by
        importance, then the newest, never by the message, so that the message does not change them."""
        s = self.settings
        pool = core_memories(self.store, entity, STABLE_CORE_POOL, query_vector=self._fixed_direction())
        pool.sort(
            key=lambda h: (-int(h.metadata.get("importance") or 0), -float(h.metadata.get("ts_epoch") or 0), h.id)
        )
        return self._fitting_core(pool[: s.core_top_k], with_similarity=False)

    def _fixed_direction(self) -> Any:
        """A query vector that is the same for every message (the ranking needs one; its similarity part is
        then the same for every search and orders nothing that importance and age do not)."""
        if self._direction is None:
            direction = [0.0] * self.store.dimension
            direction[0] = 1.0
            self._direction = direction
        return self._direction

    def _summaries_before(self, first: Any, conversation_id: str | None, entity: str | None) -> list[ContextItem]:
        """The latest ``RAG_SUMMARY_TOP_K`` summaries of the turns before the window's ``first`` turn."""
        s = self.settings
        if conversation_id is None or not s.enable_summary:
            return []
        first_index = int(first.metadata.get("turn_index") or 0)
        before = []
        for doc in self.store.conversation_summaries(conversation_id, entity=entity):
            try:
                _, end = parse_turn_range(doc.metadata.get("turn_range"))
            except ValueError:
                continue
            if end < first_index:
                before.append(ContextItem(doc.id, doc.text, dict(doc.metadata)))
        return before[-s.summary_top_k :]

    def _candidates(
        self,
        conversation_id: str | None,
        user_message: str,
        entity: str | None,
        relevance: dict[str, dict[str, object]],
    ) -> dict[str, list[ContextItem]]:
        """Each section's candidates, best first (recent turns newest first); the message is embedded once.
        Under the relevance ranking memories are gated by the store (relevance floor and margin), FAQ
        entries and summaries below the embedder's similarity floor are left out, and related turns are
        shown only when the closest one reaches a floor of their own; ``relevance`` receives what the gate
        did per section."""
        s, store = self.settings, self.store
        want_summaries = s.enable_summary and conversation_id is not None
        want_related = s.enable_turn and s.enable_related_turns and conversation_id is not None
        vector = None
        if s.enable_persona or s.enable_faq or s.enable_memory or want_summaries or want_related:
            vector = store.embedder.embed_query(user_message)  # once, for every document type
        ranked: dict[str, list[ContextItem]] = {name: [] for name in SECTIONS}
        floor = store.retrieval.similarity_floor() if vector is not None else None
        if s.enable_persona:
            hits = store.retrieve_persona(None, PERSONA_MAX_SECTIONS, query_vector=vector, entity=entity)
            ranked["persona"] = [_similarity_item("persona", h, None) for h in hits]
        if s.enable_faq:
            hits = store.retrieve_faq(None, s.faq_top_k, query_vector=vector, entity=entity)
            ranked["faq"] = _above_floor("faq", hits, floor, relevance)
        turns = store.recent_turns(conversation_id, s.turn_top_k, entity=entity) if conversation_id is not None else []
        if s.enable_memory:
            # a critical memory sharing words with the message or with the latest turns gets a lower floor
            memory_hits = store.retrieve_memories(
                user_message,
                s.memory_top_k,
                entity,
                query_vector=vector,
                relevance=True,
                topic_texts=[d.text for d in turns],
            )
            gated = memory_hits if isinstance(memory_hits, GatedHits) else None
            floor_shown = gated.floor if gated is not None else None
            ranked["memory"] = [_memory_item(h, floor_shown) for h in memory_hits]
            if gated is not None and gated.floor is not None:
                relevance["memory"] = {**gated.gate(), "shown": len(gated)}
            # the person's most important facts the relevant ones do not already show
            if entity is not None and s.core_top_k > 0:
                ranked["core"] = self._core(entity, vector, {h.id for h in memory_hits})
            if s.track_access and memory_hits:
                self.access.note([h.id for h in memory_hits])
        if want_summaries:
            # the conversation's own documents: acting for an entity, those it may see; unrestricted, all
            # of them, as its turns are
            hits = store.retrieve_summaries(
                None, s.summary_top_k, conversation_id, query_vector=vector, entity=entity, all_scopes=entity is None
            )
            ranked["summary"] = _above_floor("summary", hits, floor, relevance)
        if s.enable_turn and conversation_id is not None:
            ranked["turn"] = [
                ContextItem(d.id, d.text, d.metadata, why=explain("turn", {}, None)) for d in reversed(turns)
            ]
            if want_related:
                ranked["related"] = self._related(
                    conversation_id,
                    user_message,
                    vector,
                    turns,
                    s.related_turn_top_k,
                    entity,
                    self.related_turns.floor(),
                    relevance,
                )
        return ranked

    def _core(self, entity: str, vector: Any, shown: set[str]) -> list[ContextItem]:
        """The facts about ``entity`` every context shows (``RAG_CORE_*``): its most important memories
        (those the memory section already ``shown`` stay there), as many as fit ``RAG_CORE_MAX_CHARS``.
        They are the ones whose absence costs most (an allergy when asked for a recipe), and a message can
        need one without sharing a word or much meaning with it."""
        hits = core_memories(self.store, entity, self.settings.core_top_k, query_vector=vector)
        return self._fitting_core([h for h in hits if h.id not in shown], with_similarity=True)

    def _fitting_core(self, hits: Sequence[Any], *, with_similarity: bool) -> list[ContextItem]:
        """``hits`` as kept-in-mind items, in order, as many as fit ``RAG_CORE_MAX_CHARS`` (one that does not fit
        is skipped, a shorter one after it may still fit)."""
        items, used = [], 0
        for hit in hits:
            scores = {"importance": float(hit.metadata.get("importance") or 0)}
            if with_similarity:
                scores["similarity"] = hit.similarity
            item = ContextItem(hit.id, hit.text, hit.metadata, scores, why=explain("core", scores, None))
            size = len(render_line("core", item)) + 1
            if used + size <= self.settings.core_max_chars:
                items.append(item)
                used += size
        return items

    def _shows_conversation(self, conversation_id: str, entity: str | None) -> bool:
        """Whether a context for ``entity`` shows the conversation's turns and summaries: with no entity,
        any conversation's; for an entity, one whose turns (or, without turns, summaries) are all in scopes
        it reads, its own and the global one (:func:`brain.rules.memories.may_read`, the rule of memories).
        Another entity's conversation then reads exactly as one not yet recorded: empty."""
        if entity is None:
            return True
        docs = self.store.conversation_turns(conversation_id) or self.store.conversation_summaries(conversation_id)
        return all(may_read(str(d.metadata.get("scope", GLOBAL_SCOPE)), entity) for d in docs)

    def related_turns_for(
        self,
        conversation_id: str,
        user_message: str,
        *,
        query_vector: Any = None,
        k: int | None = None,
        entity: str | None = None,
    ) -> list[ContextItem]:
        """The context's ``related`` candidates for ``user_message``, best first, before the budget: the
        ``k`` (default ``RAG_RELATED_TURN_TOP_K``) older turns of the conversation that match it best
        (:mod:`brain.rules.turn_search`), outside the ``RAG_TURN_TOP_K`` recent turns the context shows anyway;
        none when the closest of those turns is below the embedder's similarity floor (under the relevance
        ranking; :data:`~brain.features.chat.related_turns.RELATED_TURN_FLOOR_Z`). ``query_vector``: the message
        embedded by the store's embedder (embedded here when absent)."""
        conversation_id = valid_conversation_id(conversation_id)
        if not isinstance(user_message, str) or not user_message.strip():
            raise ValidationError("user_message must be a non-empty string", [Problem("user_message", "empty")])
        s = self.settings
        k = s.related_turn_top_k if k is None else check_k(k)
        if entity is not None:
            entity = valid_name(entity)
        vector = self.store.embedder.embed_query(user_message) if query_vector is None else query_vector
        return self._related(
            conversation_id,
            user_message,
            vector,
            self.store.recent_turns(conversation_id, s.turn_top_k, entity=entity),
            k,
            entity,
            self.related_turns.floor(),
        )

    def _related(
        self,
        conversation_id: str,
        user_message: str,
        vector: Any,
        recent: Sequence[Any],
        k: int,
        entity: str | None = None,
        floor: float | None = None,
        relevance: dict[str, dict[str, object]] | None = None,
    ) -> list[ContextItem]:
        return self.related_turns.find(
            conversation_id, user_message, vector, {d.id for d in recent}, k, entity, floor=floor, relevance=relevance
        )

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
        metadata: Mapping[str, object] | None = None,
        user_name: str | None = None,
        assistant_name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Exchange:
        """Store the exchange as two turns (one write: both or neither) with consecutive ``turn_index``
        values; ``conversation_id`` ``None`` starts a new conversation (``conv-<uuid>``). With
        ``entity`` the turns are stored in that entity's scope; without, in the scope the conversation
        started in (a conversation belongs to one scope: another entity's turns are refused with
        :class:`~brain.model.errors.ConversationOwned`). Schedules the summaries now due.

        ``idempotency_key`` (1..255 printable ASCII characters) makes a retry safe: the turn ids (and a
        new conversation's id) are derived from it and the scope, so the same exchange sent again, by
        this process or another on the same store, finds its turns and returns the first answer
        without writing anything; the key sent with other texts or another conversation is a
        :class:`ValidationError`. Without a key every call stores new turns.

        Each turn's ``speaker`` is who said it: ``user_name`` (default: the entity's name) and
        ``assistant_name`` (default: the persona's name, see :mod:`brain.features.persona`); without a name a
        turn has no speaker. One side may be ``None``: a session the assistant opens, or a message
        left unanswered, is an exchange of one turn."""
        key, conversation_id, extra = checked_exchange(
            user_text, assistant_text, idempotency_key, conversation_id, metadata
        )
        if entity is not None:
            extra["scope"] = valid_entity_scope(entity)
        elif conversation_id is not None:  # no entity named: the exchange goes on in the conversation's scope
            started = self.store.conversation_turns(conversation_id)
            if started:
                extra["scope"] = str(started[0].metadata.get("scope") or GLOBAL_SCOPE)
        scope = extra.get("scope", GLOBAL_SCOPE)
        if key is None:
            conversation_id = conversation_id or new_conversation_id()
        user, assistant = exchange_speakers(user_name, assistant_name, entity, self.persona_name)
        if timestamp is None:
            timestamp = utc_now()
        turns = [
            (role, text, name)
            for role, text, name in (("user", user_text, user), ("assistant", assistant_text, assistant))
            if text is not None
        ]
        if key is None:
            assert conversation_id is not None  # given, or made above when there is no key
            return self._record(conversation_id, turns, timestamp, extra)
        with self._key_stripes[hash((scope, key)) % _LOCK_STRIPES]:  # the same key twice at once: one writes
            replay = replayed_exchange(self.store, key, scope, conversation_id, turns, self.settings.summary_every_n)
            if replay is not None:
                return replay
            conversation_id = conversation_id or idempotent_conversation_id(key, scope)
            return self._record(conversation_id, turns, timestamp, extra, key=key)

    def _record(
        self,
        conversation_id: str,
        turns: list[tuple[str, str, str | None]],
        timestamp: object,
        extra: dict[str, Any],
        *,
        key: str | None = None,
    ) -> Exchange:
        # embedded here rather than by the store, so that the related-turn search gets the new turns' vectors
        # from this write instead of reading them back from Chroma on the next message
        vectors = self.store.embedder.embed_documents([text for _, text, _ in turns])
        docs = [
            {
                "text": text,
                "embedding": vector,
                "type": DocType.TURN,
                "conversation_id": conversation_id,
                "role": role,
                "timestamp": timestamp,
                "source": "chat",
                **extra,
                **({"speaker": name} if name else {}),
                **({"id": idempotent_turn_id(key, extra.get("scope", GLOBAL_SCOPE), role)} if key else {}),
            }
            for (role, text, name), vector in zip(turns, vectors)
        ]
        with self._stripes[hash(conversation_id) % _LOCK_STRIPES]:
            written = self.store.write_docs(docs)
            self.related_turns.note_vectors(conversation_id, dict(zip(written.ids, vectors)))
            ids = dict(zip((role for role, _, _ in turns), written.ids))
            user_id, assistant_id = ids.get("user"), ids.get("assistant")
            positions = {role: written.position(doc_id) for role, doc_id in ids.items()}
            scheduled = self.summary_queue.add(conversation_id, max(positions.values()))
        self.related_turns.refresh(conversation_id)
        return Exchange(
            conversation_id,
            user_id,
            assistant_id,
            positions.get("user"),
            positions.get("assistant"),
            [job.turn_range for job in scheduled],
        )

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
        metadata: Mapping[str, object] | None = None,
        expires_at: datetime | str | None = None,
    ) -> str:
        """Store an explicit memory (in ``entity``'s scope, else global); returns its id. The same text
        in the same scope updates the existing memory. ``created_at`` records the first write.
        ``expires_at``: when it stops being ranked (e.g. "the exam is tomorrow"); kept afterwards."""
        extra = check_extra_metadata(
            metadata, ("importance", "tags", "entity", "conversation_id", "expires_at"), call="remember"
        )
        if expires_at is not None:
            extra["expires_at"] = expires_at
        try:
            when = parse_timestamp(timestamp if timestamp is not None else utc_now())
        except ValueError as exc:
            raise ValidationError.of("timestamp", str(exc)) from None
        extra.setdefault("created_at", format_timestamp(when))
        return self.store.upsert_memory(
            text,
            importance=importance,
            tags=tags,
            timestamp=when,
            source=source,
            entity=entity,
            conversation_id=conversation_id,
            **extra,
        )

    def consolidate(self, *, dry_run: bool = False, threshold: float | None = None) -> ConsolidationReport:
        """Merge near-duplicate memories of each scope (see :mod:`brain.features.consolidate`)."""
        return consolidate_memories(self.store, threshold=threshold, dry_run=dry_run)

    # ---- summaries, access, lifetime -----------------------------------------------------------------------
    def resummarize_fallbacks(self, conversation_id: str | None = None) -> int:
        """Replace extractive fallback summaries with the model's (same id, index and range), in the
        caller's thread; see :meth:`SummaryWriter.resummarize_fallbacks`."""
        return self.summary_writer.resummarize_fallbacks(check_conversation(conversation_id))

    # ---- memory formation ---------------------------------------------------------------------------------
    def extract_memories(self, conversation_id: str | None = None, *, again: bool = False) -> FormationReport:
        """Form memories now, in the caller's thread, from the summarised windows of ``conversation_id`` (all
        conversations when None) whose formation is pending or failed, or was never scheduled; ``again``:
        the done ones too (a batch applied again converges: what is known already merges). See
        :mod:`brain.features.chat.formation`. Raises :class:`~brain.model.errors.ConfigError` when formation
        is off (``BRAIN_FORMATION``, or no model: ``BRAIN_SUMMARIZER=extractive``)."""
        return self.formation.extract(check_conversation(conversation_id), again=again)

    def formation_batches(
        self, conversation_id: str | None = None, status: str | Sequence[str] | None = None
    ) -> list[FormationBatch]:
        """The windows memory formation was scheduled for, as their summaries record them (of one
        conversation, or all; ``status``: ``pending``, ``done``, ``failed`` or several), in order."""
        return self.formation.batches(check_conversation(conversation_id), status)

    def pending_summaries(self) -> int:
        """Summaries queued or being written (and, with formation on, windows whose formation is queued)."""
        return self.summary_queue.pending()

    def wait_for_summaries(self, timeout: float | None = None) -> bool:
        """Block until every scheduled summary is stored, and with formation on its window's memories formed
        (True), or ``timeout`` seconds passed (False), then persist recorded memory uses. Without a worker
        thread the queued jobs run here."""
        if not self.summary_queue.wait(timeout):
            return False
        self.flush_access()
        return True

    def health(self, *, probe: bool | None = False) -> dict[str, Any]:
        """The summariser's status: ``reachable`` (None until known; ``probe=True`` asks it now, ``None``
        when nothing said how it is for a while, see :meth:`SummaryWriter.health`),
        ``queue_length``, ``last_error``, counts of summaries written by the model and the fallback, and
        ``formation``: memory formation's state (:meth:`Formation.health`: on or why off, batches pending,
        failed and done, tokens and seconds)."""
        status = self.summary_writer.health(probe=probe)
        fallback_for = status.pop("fallback_for_seconds")
        return {
            **status,
            "queue_length": self.pending_summaries(),
            "worker_running": self.summary_queue.worker_running,
            # seconds during which new summaries go straight to the fallback after a failure
            "fallback_for_seconds": fallback_for,
            "summary_every_n": self.settings.summary_every_n,
            "formation": self.formation.health(),
        }

    def flush_access(self) -> int:
        """Persist the memory uses recorded since the last flush (``last_used`` in their metadata; see
        :mod:`brain.features.chat.last_used` for where it is written); the worker does this about every second.
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


def _usable_memory(metadata: Mapping[str, object]) -> bool:
    """Whether a memory a recorded part named is shown again: one retired or made a part of another since is not."""
    return not is_inactive(metadata) and not is_part(metadata)


def _similarity_item(section: str, hit: Hit, floor: float | None) -> ContextItem:
    scores = {"similarity": hit.similarity}
    return ContextItem(hit.id, hit.text, hit.metadata, scores, why=explain(section, scores, floor))


def _memory_item(hit: Any, floor: float | None) -> ContextItem:
    own = getattr(hit, "floor", None)  # the floor this memory had to reach: lower for an important one
    floor = floor if own is None else own
    scores = {
        "score": hit.score,
        "similarity": hit.similarity,
        "similarity_part": hit.similarity_part,
        "lexical_part": hit.lexical_part,
        "importance_part": hit.importance_part,
        "recency_part": hit.recency_part,
    }
    return ContextItem(hit.id, hit.text, hit.metadata, scores, why=explain("memory", scores, floor))


def _above_floor(
    section: str, hits: Sequence[Hit], floor: float | None, relevance: dict[str, dict[str, object]]
) -> list[ContextItem]:
    """The nearest ``hits`` that reach ``floor`` (all without one); records in ``relevance`` how many of
    the nearest were looked at and how many fell below."""
    kept = [h for h in hits if floor is None or h.similarity >= floor]
    if floor is not None:
        relevance[section] = {
            "floor": floor,
            "candidates": len(hits),
            "below_floor": len(hits) - len(kept),
            "shown": len(kept),
        }
    return [_similarity_item(section, h, floor) for h in kept]


__all__ = [
    "PERSONA_MAX_SECTIONS",
    "ChatMemory",
    "Exchange",
    "check_idempotency_key",
    "idempotent_turn_id",
    "new_conversation_id",
]
