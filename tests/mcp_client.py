"""Driving a real `brain mcp` with the MCP SDK's own client, synchronously, for the tests.

The SDK's client is async; :class:`McpClient` runs one session on an event loop in a thread so that a
module's tests can share it. :func:`stdio` starts ``brain mcp`` as a subprocess on stdin/stdout;
:func:`http` connects to a streamable HTTP endpoint (``brain mcp --http`` or ``brain serve``'s ``/mcp``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import brain
from tests.conftest import NOBODY  # nothing answers there: the summariser falls back at once

SOURCE_ROOT = str(Path(brain.__file__).resolve().parents[1])


def project(workdir: Path) -> Path:
    """``workdir`` as a brain project (nothing is read from the user's config), with the repository's
    specialists; returns it."""
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    (workdir / "config" / "defaults.env").touch()
    specialists = Path(SOURCE_ROOT) / "config" / "specialists.yaml"
    (workdir / "config" / "specialists.yaml").write_text(specialists.read_text(encoding="utf-8"), encoding="utf-8")
    return workdir


def server_env(workdir: Path, **extra: str) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(workdir / "xdg-config"), "XDG_DATA_HOME": str(workdir / "xdg-data"),
            "PYTHONPATH": SOURCE_ROOT,  # the code under test, wherever it is checked out
            "OLLAMA_HOST": NOBODY, "BRAIN_SUMMARY_RETRIES": "0", **extra}


def brain_command(workdir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "brain.shells.cli", "--data-dir", str(workdir / "data"), "mcp", *args]


class McpClient:
    """One SDK client session over ``connect()`` (an async context manager giving the two streams)."""

    def __init__(self, connect: Callable[[], Any], stderr_path: Path | None = None):
        self.connect = connect
        self.stderr_path = stderr_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.session: ClientSession | None = None
        self._ready: Future = Future()
        self._stop: asyncio.Event | None = None

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with self.connect() as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.session = session
                    self._ready.set_result(None)
                    await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def __enter__(self) -> McpClient:
        self.thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self.loop)
        try:
            self._ready.result(timeout=120)
        except Exception as exc:
            log = self.stderr_path.read_text()[-3000:] if self.stderr_path and self.stderr_path.exists() else ""
            self.loop.call_soon_threadsafe(self.loop.stop)
            raise RuntimeError(f"the MCP session did not start ({exc!r}): {log}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._task.result(timeout=60)  # over stdio the SDK closes stdin and waits for the server to exit
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def sync(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def tools(self) -> list[Any]:
        return self.sync(self.session.list_tools()).tools

    def call(self, name: str, **arguments: Any) -> Any:
        """The tool's structured result; AssertionError when the call was a tool error."""
        result = self.sync(self.session.call_tool(name, arguments))
        assert not result.is_error, result.content
        return result.structured_content

    def error(self, name: str, **arguments: Any) -> str:
        """The message of a call that must be a tool error."""
        result = self.sync(self.session.call_tool(name, arguments))
        assert result.is_error, result.structured_content
        return " ".join(c.text for c in result.content)

    def read(self, uri: str) -> str:
        contents = self.sync(self.session.read_resource(uri)).contents
        return "".join(c.text for c in contents)


def stdio(workdir: Path, *args: str) -> McpClient:
    """``brain mcp`` on stdio in ``workdir`` (a project), its stderr in ``workdir/stderr.log``."""
    params = StdioServerParameters(command=sys.executable, args=brain_command(workdir, *args)[1:], cwd=workdir,
                                   env=server_env(workdir))
    stderr_path = workdir / "stderr.log"

    @asynccontextmanager
    async def connect() -> AsyncIterator[Any]:
        with open(stderr_path, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams

    return McpClient(connect, stderr_path)


def http(url: str, token: str | None = None) -> McpClient:
    """An SDK session on the streamable HTTP endpoint ``url``, with ``token`` as the bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else None

    @asynccontextmanager
    async def connect() -> AsyncIterator[Any]:
        async with create_mcp_http_client(headers=headers) as client:
            async with streamable_http_client(url, http_client=client) as streams:
                yield streams

    return McpClient(connect)


class HttpServer:
    """``brain mcp --http`` as a subprocess on a loopback port of ``workdir`` (a project)."""

    def __init__(self, workdir: Path, port: int, *args: str, env: dict[str, str] | None = None):
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.log = workdir / "http-stderr.log"
        self.command = brain_command(workdir, "--http", "--port", str(port), *args)
        self.env = server_env(workdir, **(env or {}))
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> HttpServer:
        with open(self.log, "w") as errlog:
            self.proc = subprocess.Popen(self.command, cwd=self.workdir, env=self.env, stdout=subprocess.DEVNULL,
                                         stderr=errlog)
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"brain mcp --http exited: {self.log.read_text()[-3000:]}")
            try:
                httpx.get(self.url, timeout=2)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"brain mcp --http did not start: {self.log.read_text()[-3000:]}") from None
                time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
