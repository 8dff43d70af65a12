"""Writing one conversation summary: the model first, with retries inside one deadline, then the
extractive fallback; and the summariser's health.

A window of turns (:class:`SummaryJob`) is summarised by the model summariser (Ollama), retried
``BRAIN_SUMMARY_RETRIES`` times with doubling back-off, all within ``BRAIN_SUMMARY_DEADLINE_SECONDS``.
When that fails, the deterministic extractive fallback writes it, marked ``fallback: true`` (with a
``fallback_reason``); for ``unavailable_cooldown`` seconds after such a failure, later windows go
straight to the fallback instead of waiting through the retries again (a queue would otherwise pile
up while Ollama is down). :meth:`SummaryWriter.resummarize_fallbacks` upgrades fallbacks later.

Summaries have stable ids (:func:`summary_id`), so writing a window twice (a retry, a second
process) replaces it. When to summarise and on which thread is :mod:`brain.features.chat.summary_queue`'s job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brain.config.fields import SummaryFields
from brain.model.errors import Backoff, retry
from brain.model.ids import derived_id
from brain.model.results import Document
from brain.model.schemas import (
    GLOBAL_SCOPE,
    DocType,
    format_timestamp,
    format_turn_range,
    parse_turn_range,
    utc_now,
    valid_conversation_id,
)
from brain.providers.summarizers import Summarizer, SummarizerError, SummarizerUnavailable, TurnText

if TYPE_CHECKING:
    from brain.store import Store

log = logging.getLogger(__name__)

#: seconds after which health asks the summariser itself, when no summary or probe has said how it is since
HEALTH_PROBE_SECONDS = 30.0


def summary_backoff(settings: SummaryFields) -> Backoff:
    """How a failed summary (the model's answer, or storing it) is tried again: BRAIN_SUMMARY_RETRIES
    times, the first after BRAIN_SUMMARY_BACKOFF_SECONDS, each next wait twice the last."""
    return Backoff(first=settings.summary_backoff_seconds, retries=settings.summary_retries)


@dataclass(frozen=True)
class SummaryJob:
    """One window of turns to summarise, ``start``..``end`` inclusive, as summary ``summary_index``; then
    (or, ``formation_only``, instead) the memory formation of the window."""

    conversation_id: str
    start: int
    end: int
    summary_index: int
    attempt: int = 0  # failed store writes so far
    formation_only: bool = False  # summarised already: only its memory formation is to run

    @property
    def turn_range(self) -> str:
        return format_turn_range(self.start, self.end)


def summary_id(conversation_id: str, summary_index: int) -> str:
    """Summaries have stable ids, so writing a window twice (a retry, a second process) replaces it."""
    return derived_id("summary", conversation_id, str(summary_index))


class SummaryWriter:
    """Summarises windows of turns and stores the summaries; keeps the summariser's health.

    Thread-safe for one worker thread plus callers of :meth:`health` and :meth:`resummarize_fallbacks`."""

    def __init__(
        self,
        store: Store,
        settings: SummaryFields,
        summarizer: Summarizer,
        fallback: Summarizer,
        unavailable_cooldown: float,
    ):
        self.store = store
        self.settings = settings
        self.summarizer = summarizer
        self.fallback = fallback
        self.unavailable_cooldown = unavailable_cooldown
        self._down_until = 0.0  # monotonic time until which the model summariser is skipped
        self._status: dict[str, Any] = {
            "reachable": None,
            "last_error": None,
            "last_error_at": None,
            "last_success_at": None,
            "model_summaries": 0,
            "fallback_summaries": 0,
        }
        self._known_at: float | None = None  # monotonic time "reachable" was last learnt
        self._probing = threading.Lock()  # one probe at a time; concurrent health calls use what is known
        #: whether new summaries are written with memory formation ``pending`` (formation is on)
        self.formation = False

    # ---- one window ------------------------------------------------------------------------------------
    def read_window(self, job: SummaryJob) -> tuple[list[TurnText], list[Document]]:
        """The window's turns, in order: as the summariser reads them, and as stored (:func:`window_turns`)."""
        docs = window_turns(self.store, job.conversation_id, job.start, job.end)
        turns = [TurnText(int(d.metadata["turn_index"]), str(d.metadata.get("role", "user")), d.text) for d in docs]
        return turns, docs

    def summarize(
        self, turns: list[TurnText], job: SummaryJob, *, use_model: bool = True, stop: threading.Event | None = None
    ) -> tuple[str, str, str | None]:
        """(text, summariser name, fallback reason or None). ``use_model=False``: the fallback at once;
        ``stop`` set cuts a back-off wait short."""
        reason = None
        if not use_model:
            reason = "the summary queue was closed before the model ran"
        elif time.monotonic() < self._down_until:
            reason = f"the model summariser failed recently ({self._status['last_error']})"
        else:
            try:
                return self.model_summary(turns, stop=stop), self.summarizer.name, None
            except SummarizerError as exc:
                reason = _one_line(str(exc))
                self._down_until = time.monotonic() + self.unavailable_cooldown
        log.warning(
            "summary of %s turns %s written by the extractive fallback: %s", job.conversation_id, job.turn_range, reason
        )
        return self.fallback.summarize(turns), self.fallback.name, reason

    def model_summary(self, turns: list[TurnText], *, stop: threading.Event | None = None) -> str:
        """The model's summary, retried BRAIN_SUMMARY_RETRIES times with doubling back-off, all of it within
        BRAIN_SUMMARY_DEADLINE_SECONDS (each attempt gets at most the time left); raises the last error.
        ``stop`` set during a back-off wait raises at once (closing: do not keep the caller waiting).

        A hung server (it accepts the connection and never answers) costs one deadline, not a timeout per
        attempt: the first timeout marks it unreachable in :meth:`health`, and no attempt outlives the deadline."""
        budget = self.settings.summary_deadline_seconds
        deadline = time.monotonic() + budget

        def attempt() -> str:
            try:
                left = deadline - time.monotonic()
                return self.summarizer.summarize(turns, timeout=min(self.settings.summary_timeout, max(left, 0.001)))
            except SummarizerError as exc:
                self._status.update(
                    reachable=not isinstance(exc, SummarizerUnavailable),
                    last_error=_one_line(str(exc)),
                    last_error_at=_now_iso(),
                )
                self._known_at = time.monotonic()
                raise

        def within_deadline(exc: BaseException, n: int, delay: float) -> None:
            if time.monotonic() + delay >= deadline:
                raise type(exc)(  # the same kind of failure, said to have run out of time
                    f"no model summary within BRAIN_SUMMARY_DEADLINE_SECONDS={budget:g} after {n + 1} "
                    f"attempt{'s' if n else ''}; the last: {_one_line(str(exc))}"
                ) from None

        text = retry(
            attempt,
            summary_backoff(self.settings),
            on=SummarizerError,
            before_wait=within_deadline,
            sleep=time.sleep if stop is None else stop.wait,
        )
        self._status.update(reachable=True, last_success_at=_now_iso())
        self._known_at = time.monotonic()
        self._down_until = 0.0
        return text

    def write_summary(
        self,
        job: SummaryJob,
        text: str,
        name: str,
        reason: str | None,
        docs: list[Document],
        *,
        doc_id: str | None = None,
        timestamp: Any = None,
    ) -> None:
        """Store the window's summary (in the scope of its last turn), written by ``name``; ``reason``
        not None marks it a fallback. ``doc_id``/``timestamp``: replace an existing summary in place.

        The summary records where the memory formation of its window stands (``formation`` and the
        ``formation_*`` counters, see :mod:`brain.features.chat.formation`): a summary written again keeps
        what the stored one says; a new one is ``pending`` when formation is on (:attr:`formation`)."""
        last = docs[-1].metadata
        doc_id = doc_id or summary_id(job.conversation_id, job.summary_index)
        meta: dict[str, object] = {"summarizer": name, "fallback": reason is not None}
        if reason is not None:
            meta["fallback_reason"] = reason[:500]
        stored = self.store.get([doc_id], type=DocType.SUMMARY)
        meta.update(formation_state(stored[0].metadata) if stored else {})
        if "formation" not in meta and self.formation:
            meta["formation"] = "pending"
        scope = last.get("scope")
        if scope and scope != GLOBAL_SCOPE:
            meta["scope"] = scope
        self.store.upsert_summary(
            job.conversation_id,
            text,
            turn_range=job.turn_range,
            summary_index=job.summary_index,
            timestamp=timestamp or last.get("timestamp"),
            source="system",
            id=doc_id,
            **meta,
        )
        self._status["fallback_summaries" if reason is not None else "model_summaries"] += 1

    def _probe(self) -> None:
        if not self._probing.acquire(blocking=False):
            return  # another caller is asking it now
        try:
            self.summarizer.ping()
            self._status.update(reachable=True)
        except SummarizerError as exc:
            self._status.update(reachable=False, last_error=_one_line(str(exc)), last_error_at=_now_iso())
        finally:
            self._known_at = time.monotonic()
            self._probing.release()

    # ---- later ------------------------------------------------------------------------------------------
    def resummarize_fallbacks(self, conversation_id: str | None = None) -> int:
        """Replace extractive fallback summaries with the model's (same id, index and range), in the
        caller's thread. Returns how many were replaced. Raises :class:`SummarizerUnavailable` if the
        model cannot be reached (the ones replaced before that stay replaced); a summary the model
        answers garbage for is left as it is, with a warning."""
        where: dict[str, object] = {"fallback": True}
        if conversation_id is not None:
            where["conversation_id"] = valid_conversation_id(conversation_id)
        docs = self.store.get(where=where, type=DocType.SUMMARY)
        docs.sort(key=lambda d: (d.metadata["conversation_id"], int(d.metadata.get("summary_index") or 0)))
        replaced = 0
        for doc in docs:
            try:
                start, end = parse_turn_range(doc.metadata.get("turn_range"))
            except ValueError:
                continue
            job = SummaryJob(doc.metadata["conversation_id"], start, end, int(doc.metadata["summary_index"]))
            turns, turn_docs = self.read_window(job)
            if not turns:
                continue
            try:
                text = self.model_summary(turns)
            except SummarizerUnavailable as exc:
                raise SummarizerUnavailable(
                    f"{exc} (replaced {replaced} of {len(docs)} fallback summaries; run again when it is up)"
                ) from None
            except SummarizerError as exc:
                log.warning("kept the fallback summary %s: %s", doc.id, _one_line(str(exc)))
                continue
            self.write_summary(
                job, text, self.summarizer.name, None, turn_docs, doc_id=doc.id, timestamp=doc.metadata.get("timestamp")
            )
            replaced += 1
        return replaced

    def health(self, *, probe: bool | None = False) -> dict[str, object]:
        """``summarizer``, ``fallback``, ``reachable`` (None until known; ``probe=True`` asks it now,
        ``probe=None`` asks it when nothing said how it is for :data:`HEALTH_PROBE_SECONDS`),
        ``last_error`` (and when), ``last_success_at``, counts of summaries written by the model and the
        fallback, and ``fallback_for_seconds``: how long new summaries still go straight to the fallback."""
        stale = self._known_at is None or time.monotonic() - self._known_at >= HEALTH_PROBE_SECONDS
        if probe or (probe is None and stale):
            self._probe()
        return {
            "summarizer": self.summarizer.name,
            "fallback": self.fallback.name,
            **self._status,
            "fallback_for_seconds": round(max(0.0, self._down_until - time.monotonic()), 1),
        }


def window_turns(store: Store, conversation_id: str, start: int, end: int) -> list[Document]:
    """The turns ``start``..``end`` of a conversation as stored, in order. Only the turns in the scope of
    its last one, the scope its summary (and what is formed from it) is stored in: a summary never holds
    the words of another scope's turns (copies written with their positions under the same conversation id)."""
    docs = store.get(
        where={"conversation_id": conversation_id, "turn_index": {"$gte": start, "$lte": end}}, type=DocType.TURN
    )
    docs.sort(key=lambda d: int(d.metadata.get("turn_index") or 0))
    if docs:
        scope = docs[-1].metadata.get("scope", GLOBAL_SCOPE)
        docs = [d for d in docs if d.metadata.get("scope", GLOBAL_SCOPE) == scope]
    return docs


def formation_state(meta: Mapping[str, object]) -> dict[str, object]:
    """The memory formation keys of a summary's metadata (``formation`` and ``formation_*``)."""
    return {k: v for k, v in meta.items() if k == "formation" or k.startswith("formation_")}


def _one_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _now_iso() -> str:
    return format_timestamp(utc_now())


__all__ = ["SummaryJob", "SummaryWriter", "formation_state", "summary_id", "window_turns"]
