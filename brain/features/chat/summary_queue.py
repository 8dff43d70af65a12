"""When summaries are due, and the one background thread that writes them.

Every ``RAG_SUMMARY_EVERY_N`` exchanges a window of ``2 * RAG_SUMMARY_EVERY_N`` turns is due
(:class:`SummarySchedule`, which learns a conversation's position from its stored summaries, so a
restart keeps the cadence). Due windows go on a queue; one worker thread takes them in order and hands
each to the :class:`~brain.features.chat.summaries.SummaryWriter`. A chat request never waits for a summariser.

A window whose summary could not be stored (the store failed) is tried again first in line — so the
windows stay in order — up to ``BRAIN_SUMMARY_RETRIES`` times with doubling back-off; after that its
conversation's position is forgotten and the window is due again on the next exchange. An unexpected
error is logged and does not stop the worker. Without a worker thread (``start_worker=False``) the
queue runs in the thread that calls :meth:`SummaryQueue.wait`; :meth:`SummaryQueue.close` writes
extractive summaries for whatever is still queued, so no window is left unsummarised.

With memory formation on, the worker runs a window's formation (:mod:`brain.features.chat.formation`) after
its summary is stored, and takes up windows whose summary still says ``pending`` (queued with
:meth:`SummaryQueue.add_formation`); closing leaves a window's formation pending for the next start. Windows
left pending because the model could not be reached are queued again after the next window it forms.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from brain.config.fields import SummaryFields
from brain.features.chat.formation import Formation, FormationStopped
from brain.features.chat.summaries import SummaryJob, SummaryWriter, summary_backoff
from brain.model.errors import BrainError
from brain.model.schemas import DocType, parse_turn_range
from brain.providers.cache import LRUCache

if TYPE_CHECKING:
    from brain.store import Store

log = logging.getLogger(__name__)

#: conversations whose summary position is kept in process
_STATES_CACHED = 4096


@dataclass
class _Position:
    covered: int  # last turn index summarised or queued
    next_index: int  # summary_index of the next summary


class SummarySchedule:
    """Which windows of a conversation are due for a summary. Callers serialise calls per conversation."""

    def __init__(self, store: Store, settings: SummaryFields):
        self.store = store
        self.settings = settings
        self._positions: LRUCache[str, _Position] = LRUCache(_STATES_CACHED)

    def due(self, conversation_id: str, last_turn: int) -> list[SummaryJob]:
        """A job for each full window of ``2 * RAG_SUMMARY_EVERY_N`` turns up to ``last_turn`` not yet
        summarised or queued; the windows are then counted as queued."""
        window = 2 * self.settings.summary_every_n
        position = self._position(conversation_id)
        jobs = []
        while last_turn - position.covered >= window:
            jobs.append(
                SummaryJob(conversation_id, position.covered + 1, position.covered + window, position.next_index)
            )
            position.covered += window
            position.next_index += 1
        return jobs

    def forget(self, conversation_id: str) -> None:
        """Read the position from the store again next time (a queued window was not written)."""
        self._positions.pop(conversation_id)

    def _position(self, conversation_id: str) -> _Position:
        position = self._positions.get(conversation_id)
        if position is not None:
            return position
        covered, index = 0, 0
        for doc in self.store.get(where={"conversation_id": conversation_id}, type=DocType.SUMMARY):
            index = max(index, int(doc.metadata.get("summary_index") or 0))
            try:
                covered = max(covered, parse_turn_range(doc.metadata.get("turn_range"))[1])
            except ValueError:  # no range (written around the schema): covers nothing we can tell
                pass
        position = _Position(covered=covered, next_index=index + 1)
        self._positions.put(conversation_id, position)
        return position


class SummaryQueue:
    """The queue of due windows and its worker thread (see the module docstring). Thread-safe.

    ``tick``: called by the worker whenever it wakes, at least every ``tick_seconds`` (the chat layer
    persists recorded memory uses there); :meth:`wake` wakes it early."""

    def __init__(
        self,
        writer: SummaryWriter,
        schedule: SummarySchedule,
        *,
        start_worker: bool = True,
        tick: Callable[[], object] | None = None,
        tick_seconds: float = 1.0,
        formation: Formation | None = None,
    ):
        self.writer = writer
        self.schedule = schedule
        self.formation = formation  # runs each window's memory formation after its summary, when given
        self._tick = tick
        self._tick_seconds = tick_seconds
        self._cond = threading.Condition()
        self._jobs: deque[SummaryJob] = deque()
        self._running: SummaryJob | None = None
        self._stop = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        if start_worker:
            self._thread = threading.Thread(target=self._work, name="brain-summaries", daemon=True)
            self._thread.start()

    @property
    def worker_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def add(self, conversation_id: str, last_turn: int) -> list[SummaryJob]:
        """Queue the windows of ``conversation_id`` due now that its last turn is ``last_turn``."""
        jobs = self.schedule.due(conversation_id, last_turn)
        self._enqueue(jobs)
        return jobs

    def add_formation(self, windows: Iterable[tuple[str, str]]) -> int:
        """Queue the memory formation of summarised windows ``(conversation id, turn range)``, in order
        (those whose summary still says ``pending`` when their turn comes are run). Returns how many."""
        jobs = [
            SummaryJob(conversation_id, *parse_turn_range(turn_range), 0, formation_only=True)
            for conversation_id, turn_range in windows
        ]
        self._enqueue(jobs)
        return len(jobs)

    def _enqueue(self, jobs: list[SummaryJob]) -> None:
        if jobs:
            with self._cond:
                self._jobs.extend(jobs)
                self._cond.notify_all()

    def pending(self) -> int:
        """Summaries queued or being written."""
        with self._cond:
            return len(self._jobs) + (self._running is not None)

    def wake(self) -> None:
        """Have the worker run its ``tick`` now rather than at the next interval."""
        if self._thread is not None:
            with self._cond:
                self._cond.notify_all()

    def run(self, job: SummaryJob, *, use_model: bool = True) -> None:
        """Summarise one window and store it. A failed store write puts the window back first in line
        (after a back-off) until the retries are spent; a summariser failure is the fallback's to
        cover. Raises only what is not one of brain's errors."""
        writer = self.writer
        if job.formation_only:
            if use_model:
                self._form(job)
            return
        try:
            turns, docs = writer.read_window(job)
            if not turns:
                log.warning("no turns %s in %s to summarise (deleted?); skipped", job.turn_range, job.conversation_id)
                return
            text, name, reason = writer.summarize(turns, job, use_model=use_model, stop=self._stop)
            writer.write_summary(job, text, name, reason, docs)
        except BrainError as exc:
            self._store_failed(job, exc)
            return
        if use_model:  # closing: the window's formation stays pending, for the next start
            self._form(job)

    def _form(self, job: SummaryJob) -> None:
        """The window's memory formation, when formation is on and its summary says pending. A failure to
        store it leaves it pending: it is queued again at the next start, or run by extract_memories."""
        if self.formation is None or not self.formation.enabled:
            return
        try:
            batch = self.formation.run_if_pending(job.conversation_id, job.turn_range, stop=self._stop)
            if batch is not None and batch.status == "done":  # the model answers again: what waited for it runs
                self.add_formation(self.formation.take_waiting())
        except FormationStopped:
            pass
        except BrainError as exc:
            log.error(
                "memory formation of %s turns %s could not run (%s); it stays pending",
                job.conversation_id,
                job.turn_range,
                exc,
            )

    def _store_failed(self, job: SummaryJob, exc: BrainError) -> None:
        """The store failed to take the window's summary: try the same window again, then give up on it for now."""
        schedule = summary_backoff(self.writer.settings)
        more = schedule.retries is None or job.attempt < schedule.retries
        if more and not self._stop.is_set():
            delay = schedule.wait(job.attempt)
            log.warning(
                "could not store the summary of %s turns %s (%s); retrying in %.1f s",
                job.conversation_id,
                job.turn_range,
                exc,
                delay,
            )
            self._stop.wait(delay)
            with self._cond:  # first in line again, so the windows stay in order
                self._jobs.appendleft(replace(job, attempt=job.attempt + 1))
                self._cond.notify_all()
            return
        log.error(
            "could not store the summary of %s turns %s: %s; it is scheduled again on the next exchange",
            job.conversation_id,
            job.turn_range,
            exc,
        )
        self.schedule.forget(job.conversation_id)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued summary is stored (True) or ``timeout`` seconds passed (False).
        Without a worker thread the queued jobs run here, in the caller's thread."""
        if self._thread is None:
            self._drain(use_model=True)
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._running is not None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop the worker (after the summary in progress; a back-off wait is cut short) and write
        extractive summaries for the windows still queued. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        self._drain(use_model=False)

    def _drain(self, *, use_model: bool) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    return
                job = self._jobs.popleft()
            self.run(job, use_model=use_model)

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._jobs and not self._stop.is_set():
                    self._cond.wait(timeout=self._tick_seconds)
                if self._stop.is_set():
                    return
                job = self._jobs.popleft() if self._jobs else None
                self._running = job
            if self._tick is not None:
                try:
                    self._tick()
                except Exception:  # the tick keeps its own state for the next try; the worker goes on
                    log.exception("the summary worker's periodic task failed")
            if job is None:
                continue
            try:
                self.run(job)
            except Exception:  # not one of ours (e.g. a raw Chroma error): log it, keep the worker alive
                log.exception("summary of %s turns %s failed", job.conversation_id, job.turn_range)
                self.schedule.forget(job.conversation_id)  # the window is scheduled again later
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()


__all__ = ["SummaryQueue", "SummarySchedule"]
