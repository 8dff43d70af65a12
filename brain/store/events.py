"""Write events: what every committed write of the store tells the parts that follow it.

Each write (an upsert, a delete, a metadata change) becomes one :class:`WriteEvent` with a
``sequence`` number from one counter per store, increasing with every write. The event carries what
a follower needs to apply the write without reading Chroma back (texts, metadata and vectors of an
upsert), so that it can later be persisted as a change feed that other processes tail.

Delivery has two phases, so that a follower can keep a transactional guarantee with Chroma:

1. ``stage(event)`` before the Chroma call (the mirror writes its rows in an open SQLite transaction);
2. ``commit(event)`` once Chroma took the whole write, or ``abort(event)`` when it failed (the
   mirror then rolls its transaction back, and is left as it was).

Followers that only care about committed writes (the in-process indexes, the turn cache) implement
:meth:`WriteSubscriber.commit` alone. A write whose Chroma call failed is never committed: its
sequence number is not reused, so committed sequences increase but may skip.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import numpy as np

Op = Literal["upsert", "delete", "metadata"]


@dataclass(frozen=True, slots=True)
class WriteEvent:
    """One write. ``metadatas`` are as Chroma stores them (flat); for ``metadata`` events only the
    keys that changed (merged into what is stored). ``texts`` and ``vectors`` are set for upserts.
    ``restored``: the event re-states what Chroma holds after an unfinished write was rolled back."""

    sequence: int
    op: Op
    ids: tuple[str, ...]
    texts: tuple[str, ...] | None = None
    metadatas: tuple[dict[str, Any], ...] | None = None
    vectors: np.ndarray | None = None
    restored: bool = False


class WriteSubscriber:
    """A follower of the store's writes. Override what you need: ``stage`` and ``abort`` default to
    doing nothing, so a follower of committed writes implements ``commit`` only.

    ``cache``: the subscriber keeps an in-process copy of what the store holds, so it is also told
    (``commit`` only) what other processes wrote, as the change feed reports it
    (:mod:`brain.store.follower`)."""

    cache: bool = False

    def stage(self, event: WriteEvent) -> None:
        """Before Chroma is called; raising here fails the write before anything is stored."""

    def commit(self, event: WriteEvent) -> None:
        """After Chroma took the write."""

    def abort(self, event: WriteEvent) -> None:
        """After Chroma refused the write (it was undone there); undo what ``stage`` did."""


class Sequencer(Protocol):
    """Numbers writes across processes (:class:`brain.store.feed.FeedWriter`)."""

    def claim(self, op: Op, ids: Sequence[str]) -> int: ...


#: a subscriber handed back as the type it was given
S = TypeVar("S", bound=WriteSubscriber)


class WriteEvents:
    """The subscribers of one store and its sequence counter. ``muted(subscriber)`` keeps events
    from one subscriber for a block (e.g. the mirror while the store is restored from it).

    ``start`` is the first sequence number: a persisted change feed resumes after its last one."""

    def __init__(self, start: int = 1) -> None:
        self._subscribers: list[WriteSubscriber] = []
        self._muted: set[int] = set()
        self._counter = itertools.count(start)
        self._sequencer: Sequencer | None = None
        self._lock = threading.Lock()

    def subscribe(self, subscriber: S) -> S:
        with self._lock:
            self._subscribers.append(subscriber)
        return subscriber

    def replace(self, old: WriteSubscriber, new: WriteSubscriber) -> None:
        """Put ``new`` where ``old`` was in the order of delivery (a store moving to another collection)."""
        with self._lock:
            self._subscribers = [new if s is old else s for s in self._subscribers]

    def unsubscribe(self, subscriber: WriteSubscriber) -> None:
        with self._lock:
            self._subscribers = [s for s in self._subscribers if s is not subscriber]

    @property
    def all_listening(self) -> bool:
        """Whether every subscriber gets the events now (none muted)."""
        return not self._muted

    @contextmanager
    def muted(self, subscriber: object) -> Iterator[None]:
        """Inside the block, ``subscriber`` (known by identity) gets no events."""
        key = id(subscriber)
        already = key in self._muted
        self._muted.add(key)
        try:
            yield
        finally:
            if not already:
                self._muted.discard(key)

    def use_sequencer(self, sequencer: Sequencer) -> None:
        """Number writes with ``sequencer`` (the change feed, which orders writes across processes)
        instead of this store's own counter."""
        self._sequencer = sequencer

    def next_sequence(self, op: Op = "upsert", ids: Sequence[str] = ()) -> int:
        """The sequence number of the next write, of ``op`` on ``ids`` (a sequencer records them)."""
        if self._sequencer is not None:
            return self._sequencer.claim(op, ids)
        with self._lock:
            return next(self._counter)

    def publish_to_caches(self, event: WriteEvent) -> None:
        """Tell the in-process caches (subscribers with ``cache = True``) about ``event``: what Chroma
        holds now after another process wrote. The others (the mirror) follow this process's writes only."""
        self.commit(event, [s for s in self._subscribers if s.cache])

    def _listening(self) -> list[WriteSubscriber]:
        return [s for s in self._subscribers if id(s) not in self._muted]

    def stage(self, event: WriteEvent) -> list[WriteSubscriber]:
        """Stage ``event`` with every listening subscriber; returns them (pass them to commit/abort).
        When one refuses, those staged already are aborted and its error raised."""
        staged: list[WriteSubscriber] = []
        for subscriber in self._listening():
            try:
                subscriber.stage(event)
            except BaseException:
                for done in reversed(staged):
                    done.abort(event)
                subscriber.abort(event)
                raise
            staged.append(subscriber)
        return staged

    def commit(self, event: WriteEvent, staged: list[WriteSubscriber]) -> None:
        """Commit ``event`` with every subscriber that staged it; each is told even when one fails,
        and the first failure is raised afterwards."""
        first: BaseException | None = None
        for subscriber in staged:
            try:
                subscriber.commit(event)
            except BaseException as exc:  # noqa: BLE001 - the others still follow the write Chroma holds; raised below
                first = first or exc
        if first is not None:
            raise first

    def abort(self, event: WriteEvent, staged: list[WriteSubscriber]) -> None:
        for subscriber in reversed(staged):
            subscriber.abort(event)

    def publish(self, event: WriteEvent) -> None:
        """Stage and commit at once: for writes Chroma holds already (a rollback's restored state)."""
        self.commit(event, self.stage(event))


__all__ = ["Op", "Sequencer", "WriteEvent", "WriteEvents", "WriteSubscriber"]
