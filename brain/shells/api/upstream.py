"""The chat model the proxy stands in front of: an OpenAI-compatible API reached over HTTP.

A provider in shape: plain arguments (the base URL, the key, one time limit, one size limit), no settings object.
The key is sent as ``Authorization: Bearer`` and appears nowhere else: not in an error, a log line or a ``repr``,
and :meth:`Upstream.redacted` takes it out of what the upstream sends back. Errors are a client's to see, so they
name the setting and not the address (a bound client has no business knowing where the model lives); the address
goes to the ``brain.proxy`` log, for the operator.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from brain.model.errors import UpstreamError, UpstreamTimeout, UpstreamTooLarge, UpstreamUnreachable

__all__ = [
    "Upstream",
    "UpstreamError",
    "UpstreamTimeout",
    "UpstreamTooLarge",
    "UpstreamUnreachable",
    "passed_headers",
]

log = logging.getLogger("brain.proxy")
REDACTED = b"[redacted]"


class Upstream:
    """One connection pool to ``base_url`` (e.g. ``http://127.0.0.1:11434/v1``); ``timeout`` bounds the connect,
    the wait for the answer's head and the wait for each next chunk of a stream; ``max_bytes`` bounds the body of
    one answer (read whole or streamed)."""

    def __init__(self, base_url: str, *, key: str | None = None, timeout: float = 120.0, max_bytes: int = 4_000_000):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_bytes = max_bytes
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._key = key.encode() if key else None
        self._client = httpx.AsyncClient(
            base_url=self.base_url + "/", headers=headers, timeout=httpx.Timeout(timeout), trust_env=False
        )

    def __repr__(self) -> str:
        return f"Upstream({self.base_url!r}, timeout={self.timeout})"

    async def aclose(self) -> None:
        await self._client.aclose()

    def redacted(self, data: bytes) -> bytes:
        """``data`` without the key (an upstream may quote the header it refused)."""
        return data.replace(self._key, REDACTED) if self._key and self._key in data else data

    async def send(self, method: str, path: str, body: bytes | None = None) -> tuple[httpx.Response, bytes]:
        """The upstream's answer to one request and its body (:meth:`read`); its status as it is: the caller passes
        errors on."""
        async with self.open(method, path, body) as response:
            return response, await self.read(response)

    async def read(self, response: httpx.Response) -> bytes:
        """The whole body of ``response``, without the key: at most ``max_bytes`` of it, read no further
        (:class:`UpstreamTooLarge`)."""
        parts, size = [], 0
        with self._reading("finish its answer"):
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise self.too_large()
                parts.append(chunk)
        return self.redacted(b"".join(parts))

    @asynccontextmanager
    async def open(self, method: str, path: str, body: bytes | None = None) -> AsyncIterator[httpx.Response]:
        """The upstream's answer with its head read and its body not yet: for a stream, read with
        :meth:`chunks`. Closing it (leaving the block) closes the upstream connection."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        request = self._client.build_request(method, path.lstrip("/"), content=body, headers=headers)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException:
            raise self._timeout("answer") from None
        except httpx.TransportError as exc:
            log.warning("the chat model at %s could not be reached: %s", self.base_url, type(exc).__name__)
            raise UpstreamUnreachable(
                "the chat model (BRAIN_CHAT_UPSTREAM) could not be reached: "
                f"{type(exc).__name__}; the server's log names its address"
            ) from None
        try:
            yield response
        finally:
            await response.aclose()

    async def chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """The body of ``response`` as it arrives, each piece as soon as the upstream sent it, up to ``max_bytes``
        in all (then :class:`UpstreamTooLarge`)."""
        size = 0
        with self._reading("send the next chunk"):
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if size > self.max_bytes:
                    raise self.too_large()
                yield chunk

    def too_large(self) -> UpstreamTooLarge:
        log.warning("the chat model at %s sent an answer of more than %d bytes", self.base_url, self.max_bytes)
        return UpstreamTooLarge(
            f"the chat model's answer is longer than {self.max_bytes:,} bytes (BRAIN_CHAT_UPSTREAM_MAX_BYTES): "
            "ask for a shorter one (max_tokens), or the operator raises the limit; nothing was recorded"
        )

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        """httpx's failures while an answer's body is read, as brain's: ``what`` the upstream did not do in time."""
        try:
            yield
        except httpx.TimeoutException:
            raise self._timeout(what) from None
        except httpx.TransportError as exc:
            log.warning("the chat model at %s broke off its answer: %s", self.base_url, type(exc).__name__)
            raise UpstreamUnreachable(
                f"the chat model (BRAIN_CHAT_UPSTREAM) broke off its answer: {type(exc).__name__}"
            ) from None

    def _timeout(self, what: str) -> UpstreamTimeout:
        log.warning("the chat model at %s did not %s within %g s", self.base_url, what, self.timeout)
        return UpstreamTimeout(
            f"the chat model (BRAIN_CHAT_UPSTREAM) did not {what} within {self.timeout:g} s "
            "(BRAIN_CHAT_UPSTREAM_TIMEOUT)"
        )


def passed_headers(response: httpx.Response) -> dict[str, Any]:
    """The upstream's headers a client needs to read its answer as the upstream sent it."""
    wanted = ("content-type", "openai-processing-ms", "x-request-id")
    return {name: response.headers[name] for name in wanted if name in response.headers}
