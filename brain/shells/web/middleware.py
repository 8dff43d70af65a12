"""Pure ASGI middleware, in the order a request meets it: identity first (:class:`Authenticate`), then
the body size (:class:`BodyLimit`), so an unauthenticated caller gets 401 and learns nothing else."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from brain.ops import Caller
from brain.shells.web.error_responses import error_response
from brain.shells.web.tokens import TokenTable

#: the memory browser's page and its assets (served by the API, :mod:`brain.shells.api.routes.ui`)
UI_PATH = "/ui"
STATIC_PREFIX = "/ui/static/"


def is_ui_shell(method: str, path: str) -> bool:
    """Whether a request asks for the page or one of its assets: the only data-free requests, which the
    token check lets through. GET and HEAD only, and no ``..`` segment (nothing can climb out)."""
    if method not in ("GET", "HEAD"):
        return False
    if path == UI_PATH:
        return True
    return path.startswith(STATIC_PREFIX) and ".." not in path.split("/") and "\\" not in path


def _local_client(scope: Scope) -> bool:
    """Whether the peer is on this machine: a loopback address, a Unix socket, or an in-process client."""
    client = scope.get("client")
    if not client:
        return True
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return True  # not an IP: an in-process transport, never a network peer
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


class Authenticate:
    """Pure ASGI: who is calling, before the body is read or a route matched. A request without a valid
    bearer token gets 401 (with no token configured, non-loopback clients too); the caller is put in
    ``scope["brain.caller"]`` for the routes. The browser page and its assets (:func:`is_ui_shell`) hold
    no data and pass without a caller: the page asks for the token, then calls the API with it."""

    def __init__(self, app: Any, tokens: TokenTable | None):
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_ui_shell(scope.get("method", ""), scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        if self.tokens is None:
            caller = Caller() if _local_client(scope) else None
            reason = (
                "this server has no token configured and answers loopback clients only: set "
                "BRAIN_API_TOKEN or BRAIN_API_TOKENS_FILE"
            )
        else:
            header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            caller = self.tokens.identify(header)
            reason = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"
        if caller is None:
            response = error_response(401, "unauthorized", reason, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        scope["brain.caller"] = caller
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse bodies over ``limit`` bytes with 413: at once by Content-Length, else by reading the body
    (at most ``limit`` bytes are buffered) before the app sees it. A route of ``streamed`` (``(method,
    path)`` -> its own bound and the message refusing a body over it) reads its body itself, counting it
    against that bound: here only a Content-Length over it is refused, and nothing is buffered."""

    def __init__(self, app: Any, limit: int, streamed: Mapping[tuple[str, str], tuple[int, str]] | None = None):
        self.app = app
        self.limit = limit
        self.streamed = dict(streamed or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        own = self.streamed.get((scope.get("method", ""), scope.get("path", "")))
        if own is not None:
            if declared is not None and declared.isdigit() and int(declared) > own[0]:
                await too_large(own[1])(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        if declared is not None and declared.isdigit():
            if int(declared) > self.limit:
                await self._too_large(scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server stops reading at Content-Length
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, receive, send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await too_large(f"request body is larger than {self.limit} bytes (BRAIN_API_MAX_BODY_BYTES)")(
            scope, receive, send
        )


def too_large(message: str) -> Any:
    """The 413 answer to a body over its bound, ``message`` saying which."""
    return error_response(413, "too_large", message)
