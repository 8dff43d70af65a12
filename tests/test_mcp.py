"""`brain mcp` end to end: the real command as a subprocess over stdio, driven by the MCP SDK's own client.

Two servers for the module (each start loads the model): one unbound, one bound with ``--entity alice``
to a store seeded through the library with alice's, bob's and a global memory.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import brain
from brain.config import Settings

TOOLS = {"remember", "recall", "update_memory", "forget", "list_memories", "search_knowledge", "get_context",
         "record_exchange", "find_specialists"}
SOURCE_ROOT = str(Path(brain.__file__).resolve().parents[1])


class McpClient:
    """One `brain mcp` subprocess and an SDK client session, run on an event loop in a thread, so that
    the module's tests share it and call it synchronously."""

    def __init__(self, workdir: Path, *args: str):
        (workdir / "config").mkdir(parents=True, exist_ok=True)
        (workdir / "config" / "defaults.env").touch()  # a project: nothing is read from the user's config
        self.params = StdioServerParameters(
            command=sys.executable, args=["-m", "brain.cli", "--data-dir", str(workdir / "data"), "mcp", *args],
            cwd=workdir, env={"XDG_CONFIG_HOME": str(workdir / "xdg-config"),
                              "XDG_DATA_HOME": str(workdir / "xdg-data"),
                              "PYTHONPATH": SOURCE_ROOT},  # the code under test, wherever it is checked out
        )
        self.stderr_path = workdir / "stderr.log"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.session: ClientSession | None = None
        self._ready: Future = Future()
        self._stop: asyncio.Event | None = None

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        with open(self.stderr_path, "w") as errlog:
            try:
                async with stdio_client(self.params, errlog=errlog) as (read, write):
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
        except Exception:
            raise RuntimeError(f"brain mcp did not start: {self.stderr_path.read_text()[-3000:]}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._task.result(timeout=60)  # the SDK closes stdin and waits for the server to exit
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def _sync(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def tools(self) -> list[Any]:
        return self._sync(self.session.list_tools()).tools

    def call(self, name: str, **arguments: Any) -> Any:
        """The tool's structured result; AssertionError when the call was a tool error."""
        result = self._sync(self.session.call_tool(name, arguments))
        assert not result.is_error, result.content
        return result.structured_content

    def error(self, name: str, **arguments: Any) -> str:
        """The message of a call that must be a tool error."""
        result = self._sync(self.session.call_tool(name, arguments))
        assert result.is_error, result.structured_content
        return " ".join(c.text for c in result.content)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with McpClient(tmp_path_factory.mktemp("mcp")) as client:
        yield client


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, local_embedder):
    """A store holding a memory of alice's, one of bob's and a global one (ids by owner)."""
    workdir = tmp_path_factory.mktemp("mcp-alice")
    with brain.open(Settings(data_dir=workdir / "data"), embedder=local_embedder, start_worker=False) as b:
        ids = {
            "alice": b.chat.remember("Alice is allergic to peanuts", importance=5, entity="alice"),
            "bob": b.chat.remember("Bob is allergic to shellfish", importance=5, entity="bob"),
            "global": b.chat.remember("The household shops on Saturdays", importance=3),
        }
    return workdir, ids


@pytest.fixture(scope="module")
def alice_server(seeded):
    workdir, _ = seeded
    with McpClient(workdir, "--entity", "alice") as client:
        yield client


# ---- the unbound server ----------------------------------------------------------------------------

def test_lists_the_tools_with_described_arguments(server):
    tools = {t.name: t for t in server.tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
    assert tools["remember"].input_schema["required"] == ["text"]
    assert tools["recall"].input_schema["required"] == ["query"]


def test_remember_then_recall_finds_it_first(server):
    stored = server.call("remember", text="Carol prefers green tea to coffee", importance=4, tags=["drinks"],
                         entity="carol")
    assert stored["metadata"]["scope"] == "entity:carol"
    assert stored["metadata"]["importance"] == 4
    server.call("remember", text="Carol's bicycle is red", entity="carol")
    server.call("remember", text="The boiler is serviced every October")

    found = server.call("recall", query="What does Carol like to drink?", entity="carol")
    assert found["entity"] == "carol"
    first = found["results"][0]
    assert first["id"] == stored["id"]
    assert first["score"] == pytest.approx(first["similarity_part"] + first["importance_part"]
                                           + first["recency_part"])
    # without an entity only global memories are ranked
    assert stored["id"] not in {r["id"] for r in server.call("recall", query="green tea")["results"]}
    tagged = server.call("list_memories", entity="carol", tags=["drinks"])["memories"]
    assert [m["id"] for m in tagged] == [stored["id"]]


def test_forget_deletes_and_a_second_forget_is_an_error(server):
    doc = server.call("remember", text="Dave's locker code is 4711", entity="dave")
    assert server.call("forget", id=doc["id"], entity="dave") == {"deleted": [doc["id"]]}
    assert doc["id"] not in {m["id"] for m in server.call("list_memories", entity="dave")["memories"]}
    assert f"no memory with id {doc['id']!r}" in server.error("forget", id=doc["id"], entity="dave")


def test_bad_arguments_are_tool_errors_naming_the_rule(server):
    assert "importance must be between 1 and 5" in server.error("remember", text="x", importance=9)
    assert "k must be an integer between 1 and" in server.error("recall", query="tea", k=0)
    assert "give either id" in server.error("forget")
    assert "entity" in server.error("recall", query="tea", entity=" padded ")
    assert "limit" in server.error("list_memories", limit=0)  # the schema's range, checked by the SDK
    # the server is still serving
    assert {t.name for t in server.tools()} == TOOLS


def test_logs_go_to_stderr_not_the_protocol(server):
    server.call("list_memories")  # a call the SDK logs; a stray line on stdout would break the session
    assert server.stderr_path.read_text().strip()


# ---- a server bound to alice ------------------------------------------------------------------------

def test_bound_server_refuses_another_entity(alice_server):
    assert "bound to entity 'alice'" in alice_server.error("remember", text="Bob likes jazz", entity="bob")
    assert "bound to entity 'alice'" in alice_server.error("recall", query="allergies", entity="bob")
    assert "bound to entity 'alice'" in alice_server.error("list_memories", entity="bob")


def test_bound_server_never_shows_another_entitys_memory(alice_server, seeded):
    _, ids = seeded
    recalled = {r["id"] for r in alice_server.call("recall", query="Who is allergic to shellfish?", k=10)["results"]}
    assert ids["alice"] in recalled and ids["global"] in recalled
    assert ids["bob"] not in recalled
    listed = {m["id"] for m in alice_server.call("list_memories")["memories"]}
    assert ids["bob"] not in listed and ids["alice"] in listed


def test_bound_server_writes_and_deletes_in_its_own_scope_only(alice_server, seeded):
    _, ids = seeded
    stored = alice_server.call("remember", text="Alice runs on Tuesdays")
    assert stored["metadata"]["scope"] == "entity:alice"
    assert "no memory with id" in alice_server.error("forget", id=ids["bob"])
    # all or none: alice's memory survives a batch that names bob's
    assert "no memory with id" in alice_server.error("forget", ids=[stored["id"], ids["bob"]])
    assert "is global" in alice_server.error("forget", id=ids["global"])
    assert stored["id"] in {m["id"] for m in alice_server.call("list_memories")["memories"]}
    assert alice_server.call("forget", ids=[stored["id"]]) == {"deleted": [stored["id"]]}
