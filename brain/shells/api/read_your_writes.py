"""Read-your-writes across API workers: the change feed's sequence in write responses.

Every successful write request (any method but GET, HEAD and OPTIONS) answers ``X-Brain-Sequence: N``,
and the routes that write carry the same N as ``"sequence"`` in their JSON body: the change feed's
sequence of the latest write the request committed (:func:`request_sequence`). A request that sends
``X-Brain-Min-Sequence: N`` is served once this worker has applied every write up to N, whichever
worker made it (:meth:`brain.store.RagStore.catch_up`): 422 for a value that is not a sequence, 503
when it is not reached in time. Without a Chroma server (the embedded store, one process) there is no
feed: the header is neither sent nor needed, and the body's ``"sequence"`` is null."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from brain.model.errors import StoreUnavailable, ValidationError
from brain.shells.web.error_responses import error_response
from brain.store import Store
from brain.store.events import WriteEvent, WriteSubscriber
from brain.store.follower import check_sequence

MIN_SEQUENCE = b"x-brain-min-sequence"
SEQUENCE = b"x-brain-sequence"
_READS = {"GET", "HEAD", "OPTIONS"}

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


def track_request_writes(store: Store) -> Callable[[], None]:
    """Note the sequences of ``store``'s writes per request, for :func:`request_sequence`; returns
    what stops it (the app calls both around its lifetime)."""
    subscriber = store.events.subscribe(_RequestWrites())
    return lambda: store.events.unsubscribe(subscriber)


def request_sequence(store: Store) -> int | None:
    """What a client waits for to read this request's writes on any worker: the sequence of the latest
    write the request committed, or when it wrote nothing, the latest this worker committed (a read that
    asks for it sees at least what this worker served). None without a change feed."""
    if store.follower is None:
        return None
    written = _written.get()
    return max(written) if written else store.last_sequence


def with_sequence(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """A write route's response ``body`` with its ``"sequence"`` (see :func:`request_sequence`) and its
    ``"mirror_status"``: whether the mirror took the write (``ok``) or Chroma alone has it for now
    (``degraded``: caught up once the mirror can be written; ``broken``), or ``off``."""
    brain = request.app.state.brain
    health = None if brain is None else brain.store.mirror_health
    return {
        **body,
        "sequence": None if brain is None else request_sequence(brain.store),
        "mirror_status": "off" if health is None else health.status,
    }


class ReadYourWrites:
    """Pure ASGI, after authentication (an unauthenticated caller never makes this worker wait)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        brain = getattr(getattr(scope.get("app"), "state", None), "brain", None)
        if scope["type"] != "http" or brain is None or brain.store.follower is None:
            await self.app(scope, receive, send)
            return
        store = brain.store
        wanted = dict(scope.get("headers") or []).get(MIN_SEQUENCE)
        if wanted is not None:
            try:
                text = wanted.decode("latin-1").strip()
                await run_in_threadpool(store.catch_up, check_sequence(int(text) if text.isdigit() else text))
            except ValidationError as exc:
                refused = error_response(
                    422,
                    "validation_error",
                    f"X-Brain-Min-Sequence: {exc}",
                    [{"field": "X-Brain-Min-Sequence", "message": str(exc)}],
                )
                await refused(scope, receive, send)
                return
            except StoreUnavailable as exc:
                await error_response(503, "store_unavailable", str(exc))(scope, receive, send)
                return
        if scope.get("method") in _READS:
            await self.app(scope, receive, send)
            return
        token = _written.set([])

        async def send_with_sequence(message: dict) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                sequence = request_sequence(store)
                if sequence:
                    message = {**message, "headers": [*message.get("headers", []), (SEQUENCE, str(sequence).encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_sequence)
        finally:
            _written.reset(token)


__all__ = ["MIN_SEQUENCE", "SEQUENCE", "ReadYourWrites", "request_sequence", "track_request_writes", "with_sequence"]
