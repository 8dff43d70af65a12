"""Read-your-writes across workers on one Chroma server: the change feed's sequence of what a request wrote,
and waiting for a sequence another worker wrote. The HTTP shell carries these in headers
(:mod:`brain.shells.api.read_your_writes`); without a Chroma server there is no feed and nothing to wait for."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from brain.app.core import Brain
from brain.store.events import WriteEvent, WriteSubscriber
from brain.store.follower import catch_up, check_sequence, last_sequence

# the sequences of the writes committed while serving the current request (None outside one); the
# route's thread runs in a copy of the request's context, so it appends to the request's own list
_written: ContextVar[list[int] | None] = ContextVar("brain_request_writes", default=None)


class _RequestWrites(WriteSubscriber):
    """Notes each committed write's sequence in the request that made it (none outside a request:
    the summary worker's and the follower's threads do not carry one)."""

    def commit(self, event: WriteEvent) -> None:
        written = _written.get()
        if written is not None:
            written.append(event.sequence)


def track_request_writes(brain: Brain) -> Callable[[], None]:
    """Note the sequences of the store's writes per request, for :func:`request_sequence`; returns what stops it
    (the app calls both around its lifetime)."""
    store = brain.store
    subscriber = store.events.subscribe(_RequestWrites())
    return lambda: store.events.unsubscribe(subscriber)


@contextmanager
def request_writes() -> Iterator[None]:
    """The writes made inside this block are the request's own (see :func:`request_sequence`)."""
    token = _written.set([])
    try:
        yield
    finally:
        _written.reset(token)


def has_feed(brain: Brain) -> bool:
    """Whether writes are numbered across processes (a Chroma server's change feed)."""
    return brain.store.follower is not None


def request_sequence(brain: Brain) -> int | None:
    """What a client waits for to read this request's writes on any worker: the sequence of the latest
    write the request committed, or when it wrote nothing, the latest this worker committed (a read that
    asks for it sees at least what this worker served). None without a change feed."""
    store = brain.store
    if store.follower is None:
        return None
    written = _written.get()
    return max(written) if written else last_sequence(store)


def wait_for_sequence(brain: Brain, value: int | str) -> None:
    """Return once this worker has applied every write up to ``value``, a sequence as a client sent it
    (:class:`~brain.model.errors.ValidationError` when it is not one; :class:`~brain.model.errors.StoreUnavailable`
    when it is not reached in time)."""
    catch_up(brain.store, check_sequence(value))


def mirror_status(brain: Brain | None) -> str:
    """Whether the mirror took the latest writes (``ok``), Chroma alone has them for now (``degraded``,
    ``broken``), or there is no mirror (``off``)."""
    health = None if brain is None else brain.store.mirror_health
    return "off" if health is None else str(health.status)


__all__ = [
    "has_feed",
    "mirror_status",
    "request_sequence",
    "request_writes",
    "track_request_writes",
    "wait_for_sequence",
]
