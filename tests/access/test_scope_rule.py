"""One scope rule for reads "for entity X", the same in the library, the CLI, HTTP and MCP.

The rule (:func:`brain.rules.memories.scopes_for`): a list or a search for X returns X's own memories and the
global ones, never another entity's, each carrying its scope; a search for no entity ranks global memories
only. A delete made for X removes only X's own memories: given ids that include global ones (as a list for
X returns them), it refuses with a message naming them and deletes nothing.

Each hypothesis example writes memories of a few entities (names that differ by case or punctuation
included) into a fresh store, asks every shell for one reader, and then runs the list-then-forget sequence
in every shell: forget everything the list returned, for the reader; then forget what the list marked as the
reader's own. Real embedded Chroma, the real embedder, the real HTTP app and MCP server (in process).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from mcp.client.client import Client

import brain
import brain.store.facade
from brain.access.policy import ADMIN, Access
from brain.config import Settings
from brain.model.errors import Forbidden
from brain.model.schemas import GLOBAL_SCOPE, valid_name
from brain.rules.memories import scopes_for
from brain.shells.api import create_app
from brain.shells.cli import cli
from brain.shells.mcp.server import create_server
from brain.store.memory_listing import list_memories
from tests.conftest import NOBODY

_WORDS = ["peanuts", "tea", "train", "Porto", "allergic", "likes", "dinner", "passport", "piano", "Sunday"]
_texts = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join)
_owners = st.sampled_from([None, "frank", "Frank", "bob", "frank-2"])
_writes = st.lists(st.tuples(_texts, _owners), min_size=1, max_size=6)
_readers = st.sampled_from(["frank", "Frank", "bob"])
SHELLS = ("library", "cli", "http", "mcp")
# each example opens several stores: no shrinking (a failing example is printed as found)
EXAMPLES = hypothesis_settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                               suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _one_embedder(monkeypatch, local_embedder):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)


def settings_in(tmp: Path) -> Settings:
    return Settings(data_dir=tmp / "data", ollama_host=NOBODY, summary_retries=0, summary_backoff_seconds=0)


def cli_run(settings: Settings, *args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(cli, ["--json", "--data-dir", str(settings.data_dir), *args])
    return result.exit_code, (json.loads(result.stdout) if result.stdout.strip() else None), result.stderr


def mcp_call(server: Any, name: str, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, the structured result or the error's text) of one tool call over the MCP protocol."""
    async def call() -> tuple[bool, Any]:
        async with Client(server) as client:
            result = await client.call_tool(name, arguments)
            if result.is_error:
                return True, " ".join(c.text for c in result.content)
            return False, result.structured_content
    return anyio.run(call)


def write(settings: Settings, writes: list[tuple[str, str | None]]) -> dict[str, str]:
    """The memories written, id -> scope."""
    written: dict[str, str] = {}
    with brain.open(settings, start_worker=False) as b:
        for text, owner in writes:
            doc_id = b.store.upsert_memory(text, entity=owner)
            written[doc_id] = b.store.get_one(doc_id).metadata["scope"]
    return written


# ---- reads ---------------------------------------------------------------------------------------------

def listed_by_shell(settings: Settings, reader: str) -> dict[str, dict[str, str]]:
    """For each shell, the memories a list for ``reader`` returns, id -> the scope the item shows."""
    out: dict[str, dict[str, str]] = {}
    with brain.open(settings, start_worker=False) as b:
        out["library"] = {d.id: d.metadata["scope"] for d in b.memories.list(entity=reader)}
        readable = Access(b.store, ADMIN, reader).readable_scopes()
        assert out["library"] == {d.id: d.metadata["scope"]
                                  for d in list_memories(b.store, scopes=readable)}
        with TestClient(create_app(brain=b)) as http:
            got = http.get("/v1/memories", params={"entity": reader, "limit": 1000})
            assert got.status_code == 200, got.text
            out["http"] = {d["id"]: d["metadata"]["scope"] for d in got.json()["memories"]}
        is_error, got = mcp_call(create_server(b), "list_memories", entity=reader, limit=100)
        assert not is_error, got
        assert got["entity"] == valid_name(reader)  # the name in its one canonical form
        out["mcp"] = {d["id"]: d["scope"] for d in got["memories"]}  # the scope beside the id, for a model
        assert all(d["scope"] == d["metadata"]["scope"] for d in got["memories"])
    code, listed, err = cli_run(settings, "memory", "list", "--entity", reader)
    assert code == 0, err
    out["cli"] = {d["id"]: d["metadata"]["scope"] for d in listed}
    return out


def searched_by_shell(settings: Settings, reader: str | None, query: str) -> dict[str, set[str]]:
    """For each shell, the ids a memory search for ``reader`` (None: no entity) returns."""
    out: dict[str, set[str]] = {}
    with brain.open(settings, start_worker=False) as b:
        out["library"] = {h.id for h in b.store.retrieve_memories(query, 50, entity=reader)}
        # every memory eligible (no relevance gate): what the scope rule alone lets through
        out["ungated"] = {h.id for h in b.store.retrieve_memories(query, 50, entity=reader, relevance=False)}
        with TestClient(create_app(brain=b)) as http:
            params = {"q": query, "k": 50, **({"entity": reader} if reader else {})}
            got = http.get("/v1/memories/search", params=params)
            assert got.status_code == 200, got.text
            out["http"] = {h["id"] for h in got.json()["results"]}
        is_error, got = mcp_call(create_server(b), "recall", query=query, k=50,
                                 **({"entity": reader} if reader else {}))
        assert not is_error, got
        out["mcp"] = {h["id"] for h in got["results"]}
    code, found, err = cli_run(settings, "search", query, "--type", "memory", "--k", "50",
                               *(["--entity", reader] if reader else []))
    assert code == 0, err
    out["cli"] = {h["id"] for h in found["results"]}
    return out


@pytest.mark.slow
@EXAMPLES
@given(writes=_writes, reader=_readers, query=_texts)
def test_a_list_or_search_for_an_entity_is_its_memories_and_the_global_ones_in_every_shell(writes, reader, query):
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_in(Path(tmp))
        written = write(settings, writes)
        visible = scopes_for(reader)
        expected = {i: s for i, s in written.items() if s in visible}
        listed = listed_by_shell(settings, reader)
        for shell in SHELLS:
            assert listed[shell] == expected, shell  # the same items, each with its own scope
        for_reader = searched_by_shell(settings, reader, query)
        for_nobody = searched_by_shell(settings, None, query)
        assert for_reader["ungated"] == set(expected)
        assert for_nobody["ungated"] == {i for i, s in written.items() if s == GLOBAL_SCOPE}
        for shell in SHELLS:  # every shell ranks as the library does: the relevant ones among those
            assert for_reader[shell] == for_reader["library"] <= set(expected), shell
            assert for_nobody[shell] == for_nobody["library"] <= for_nobody["ungated"], shell


def test_a_search_of_every_type_shows_no_entitys_memory_without_an_entity(tmp_path):
    settings = settings_in(tmp_path)
    written = write(settings, [("Frank is allergic to peanuts", "frank"), ("The shop closes on Sunday", None)])
    code, found, err = cli_run(settings, "search", "allergic to peanuts", "--k", "10")
    assert code == 0, err
    memories = {h["id"] for h in found["results"] if h["metadata"]["type"] == "memory"}
    assert memories == {i for i, s in written.items() if s == GLOBAL_SCOPE}


# ---- list, then forget ---------------------------------------------------------------------------------

def forget_by_shell(settings: Settings, shell: str, reader: str, ids: list[str]) -> tuple[bool, str]:
    """Forget ``ids`` for ``reader`` through ``shell``: (whether it was refused, the message)."""
    if shell == "cli":
        code, _, err = cli_run(settings, "memory", "rm", "--entity", reader, *ids)
        assert code in (0, 1), err
        return code == 1, err
    with brain.open(settings, start_worker=False) as b:
        if shell == "library":
            try:
                b.memories.delete(ids, entity=reader)
            except Forbidden as exc:
                return True, str(exc)
            return False, ""
        if shell == "http":
            with TestClient(create_app(brain=b)) as http:
                refused = [http.delete(f"/v1/memories/{i}", params={"entity": reader}) for i in ids]
                # one request per id: the refused ones are 403, the entity's own are deleted
                assert all(r.status_code in (200, 403) for r in refused), [(r.status_code, r.text) for r in refused]
                bad = [r for r in refused if r.status_code == 403]
                return bool(bad), " ".join(r.text for r in bad)
        is_error, got = mcp_call(create_server(b), "forget", ids=ids, entity=reader)
        return is_error, got if is_error else ""


def stored_ids(settings: Settings) -> set[str]:
    with brain.open(settings, start_worker=False) as b:
        return {d.id for d in b.store.get(type="memory")}


@pytest.mark.slow
@EXAMPLES
@given(writes=_writes, reader=_readers, shell=st.sampled_from(SHELLS))
def test_forgetting_what_a_list_for_an_entity_returned_never_deletes_a_global_memory(writes, reader, shell):
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_in(Path(tmp))
        written = write(settings, writes + [("Frank takes the train on Sunday", reader)])
        listed = listed_by_shell(settings, reader)[shell]
        own = sorted(i for i, s in listed.items() if s != GLOBAL_SCOPE)
        shared = sorted(i for i, s in listed.items() if s == GLOBAL_SCOPE)

        refused, message = forget_by_shell(settings, shell, reader, sorted(listed))
        left = stored_ids(settings)
        assert set(shared) <= left  # a global memory survives a forget for an entity, whatever the shell
        assert left - set(own) == set(written) - set(own)  # and nothing of another entity goes
        if shared:
            assert refused
            assert "global" in message and all(i in message for i in shared), message
        if shell != "http" and shared:  # one call for every id: all or none
            assert set(own) <= left

        remaining = [i for i in own if i in left]  # what the list marked as the entity's own, still there
        if remaining:
            refused, message = forget_by_shell(settings, shell, reader, remaining)
            assert not refused, message
        assert stored_ids(settings) == set(written) - set(own)
