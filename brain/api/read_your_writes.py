"""Read-your-writes across API workers: the change feed's sequence in HTTP headers.

Every successful write request (any method but GET, HEAD and OPTIONS) answers ``X-Brain-Sequence: N``,
the change feed's sequence of the latest write this worker committed, which includes the request's own.
A request that sends ``X-Brain-Min-Sequence: N`` is served once this worker has applied every write up
to N, whichever worker made it (:meth:`brain.store.RagStore.catch_up`): 422 for a value that is not a
sequence, 503 when it is not reached in time. Without a Chroma server (the embedded store, one process)
there is no feed: the headers are neither sent nor needed."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool

from brain.api.error_responses import error_response
from brain.errors import StoreUnavailable, ValidationError
from brain.store.follower import check_sequence

MIN_SEQUENCE = b"x-brain-min-sequence"
SEQUENCE = b"x-brain-sequence"
_READS = {"GET", "HEAD", "OPTIONS"}


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
                refused = error_response(422, "validation_error", f"X-Brain-Min-Sequence: {exc}",
                                         [{"field": "X-Brain-Min-Sequence", "message": str(exc)}])
                await refused(scope, receive, send)
                return
            except StoreUnavailable as exc:
                await error_response(503, "store_unavailable", str(exc))(scope, receive, send)
                return
        if scope.get("method") in _READS:
            await self.app(scope, receive, send)
            return

        async def send_with_sequence(message: dict) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400 and store.last_sequence:
                message = {**message, "headers": [*message.get("headers", []),
                                                  (SEQUENCE, str(store.last_sequence).encode())]}
            await send(message)

        await self.app(scope, receive, send_with_sequence)


__all__ = ["MIN_SEQUENCE", "SEQUENCE", "ReadYourWrites"]
