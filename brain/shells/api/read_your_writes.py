"""Read-your-writes across API workers: the change feed's sequence in write responses.

Every successful write request (any method but GET, HEAD and OPTIONS) answers ``X-Brain-Sequence: N``,
and the routes that write carry the same N as ``"sequence"`` in their JSON body: the change feed's
sequence of the latest write the request committed (:func:`request_sequence`). A request that sends
``X-Brain-Min-Sequence: N`` is served once this worker has applied every write up to N, whichever
worker made it (:func:`brain.store.follower.catch_up`): 422 for a value that is not a sequence, 503
when it is not reached in time. Without a Chroma server (the embedded store, one process) there is no
feed: the header is neither sent nor needed, and the body's ``"sequence"`` is null."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.types import Message, Receive, Scope, Send

from brain.model.errors import StoreUnavailable, ValidationError
from brain.ops.consistency import has_feed, mirror_status, request_sequence, request_writes, wait_for_sequence
from brain.shells.web.error_responses import brain_error_response

MIN_SEQUENCE = b"x-brain-min-sequence"
SEQUENCE = b"x-brain-sequence"
_READS = {"GET", "HEAD", "OPTIONS"}


def with_sequence(request: Request, body: Mapping[str, object]) -> dict[str, object]:
    """A write route's response ``body`` with its ``"sequence"`` (see :func:`request_sequence`) and its
    ``"mirror_status"``: whether the mirror took the write (``ok``) or Chroma alone has it for now
    (``degraded``: caught up once the mirror can be written; ``broken``), or ``off``."""
    brain = request.app.state.brain
    return {
        **body,
        "sequence": None if brain is None else request_sequence(brain),
        "mirror_status": mirror_status(brain),
    }


class ReadYourWrites:
    """Pure ASGI, after authentication (an unauthenticated caller never makes this worker wait)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        brain = getattr(getattr(scope.get("app"), "state", None), "brain", None)
        if scope["type"] != "http" or brain is None or not has_feed(brain):
            await self.app(scope, receive, send)
            return
        wanted = dict(scope.get("headers") or []).get(MIN_SEQUENCE)
        if wanted is not None:
            try:
                text = wanted.decode("latin-1").strip()
                await run_in_threadpool(wait_for_sequence, brain, int(text) if text.isdigit() else text)
            except ValidationError as exc:
                message = f"X-Brain-Min-Sequence: {exc}"
                refused = ValidationError.of("X-Brain-Min-Sequence", message)
                await brain_error_response(refused)(scope, receive, send)
                return
            except StoreUnavailable as exc:
                await brain_error_response(exc)(scope, receive, send)
                return
        if scope.get("method") in _READS:
            await self.app(scope, receive, send)
            return

        async def send_with_sequence(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                sequence = request_sequence(brain)
                if sequence:
                    message = {**message, "headers": [*message.get("headers", []), (SEQUENCE, str(sequence).encode())]}
            await send(message)

        with request_writes():
            await self.app(scope, receive, send_with_sequence)


__all__ = ["MIN_SEQUENCE", "SEQUENCE", "ReadYourWrites", "with_sequence"]
