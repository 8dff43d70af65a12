"""The chat model the proxy stands in front of: an OpenAI-compatible API reached over HTTP.

A provider in shape: plain arguments (the base URL, the key, one time limit), no settings object. The key is
sent as ``Authorization: Bearer`` and appears nowhere else: not in an error, a log line or a ``repr``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from brain.model.errors import UpstreamError, UpstreamTimeout, UpstreamUnreachable

__all__ = ["Upstream", "UpstreamError", "UpstreamTimeout", "UpstreamUnreachable", "passed_headers"]


class Upstream:
    """One connection pool to ``base_url`` (e.g. ``http://127.0.0.1:11434/v1``); ``timeout`` bounds the connect,
    the wait for the answer's head and the wait for each next chunk of a stream."""

    def __init__(self, base_url: str, *, key: str | None = None, timeout: float = 120.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url + "/", headers=headers, timeout=httpx.Timeout(timeout), trust_env=False
        )

    def __repr__(self) -> str:
        return f"Upstream({self.base_url!r}, timeout={self.timeout})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def send(self, method: str, path: str, body: bytes | None = None) -> httpx.Response:
        """The upstream's whole answer to one request (its status as it is: the caller passes errors on)."""
        async with self.open(method, path, body) as response:
            await self._read(response)
            return response

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
            raise UpstreamUnreachable(
                f"the chat model at {self.base_url} (BRAIN_CHAT_UPSTREAM) could not be reached: "
                f"{type(exc).__name__}; is it running?"
            ) from None
        try:
            yield response
        finally:
            await response.aclose()

    async def chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """The body of ``response`` as it arrives, each piece as soon as the upstream sent it."""
        with self._reading("send the next chunk"):
            async for chunk in response.aiter_raw():
                yield chunk

    async def _read(self, response: httpx.Response) -> None:
        with self._reading("finish its answer"):
            await response.aread()

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        """httpx's failures while an answer's body is read, as brain's: ``what`` the upstream did not do in time."""
        try:
            yield
        except httpx.TimeoutException:
            raise self._timeout(what) from None
        except httpx.TransportError as exc:
            raise UpstreamUnreachable(
                f"the chat model at {self.base_url} broke off its answer: {type(exc).__name__}"
            ) from None

    def _timeout(self, what: str) -> UpstreamTimeout:
        return UpstreamTimeout(
            f"the chat model at {self.base_url} did not {what} within {self.timeout:g} s (BRAIN_CHAT_UPSTREAM_TIMEOUT)"
        )


def passed_headers(response: httpx.Response) -> dict[str, Any]:
    """The upstream's headers a client needs to read its answer as the upstream sent it."""
    wanted = ("content-type", "openai-processing-ms", "x-request-id")
    return {name: response.headers[name] for name in wanted if name in response.headers}
