"""`brain mcp --http` as a real subprocess, and the `/mcp` endpoint of `brain serve`, driven by the SDK's
client over streamable HTTP: the token rule, entity-bound tokens, and that what a tool writes is visible to
the library, the mirror and a PAM export."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

import brain
from brain.app.core import open_store
from brain.config import Settings
from brain.features.pam import export_pam
from brain.shells.api import create_app
from tests.conftest import LiveServer, api_settings, free_port
from tests.mcp.test_mcp import TOOLS, seed
from tests.mcp_client import HttpServer, brain_command, http, project, server_env, stdio

ADMIN_TOKEN = "admin-token-0123456789abcdef"
ALICE_TOKEN = "alice-token-0123456789abcdef"


@pytest.fixture(scope="module")
def served(tmp_path_factory, local_embedder):
    """``brain mcp --http`` on a seeded store, with an admin token and a token bound to alice."""
    workdir = tmp_path_factory.mktemp("mcp-http")
    ids = seed(workdir, local_embedder)
    tokens = workdir / "config" / "api-tokens"
    tokens.write_text(f"alice {ALICE_TOKEN}\n", encoding="utf-8")
    env = {"BRAIN_API_TOKEN": ADMIN_TOKEN, "BRAIN_API_TOKENS_FILE": str(tokens)}
    with HttpServer(workdir, free_port(), env=env) as server:
        yield server, ids


@pytest.mark.subprocess
def test_without_the_token_nothing_answers(served):
    server, _ = served
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
        response = httpx.post(server.url, json=initialize, headers={**headers, **auth}, timeout=30)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert "bearer token" in response.json()["message"]
    with pytest.raises(RuntimeError, match="did not start"):
        with http(server.url):
            pass


@pytest.mark.subprocess
def test_the_admin_token_serves_every_tool(served):
    server, ids = served
    with http(server.url, ADMIN_TOKEN) as client:
        assert {t.name for t in client.tools()} == TOOLS
        stored = client.call("remember", text="Ines collects vinyl records", entity="ines", tags=["music"])
        found = client.call("recall", query="What does Ines collect?", entity="ines")["results"]
        assert found[0]["id"] == stored["id"]
        listed = {m["id"] for m in client.call("list_memories", entity="bob")["memories"]}
        assert ids["bob"] in listed and ids["alice"] not in listed
        assert "importance must be between 1 and 5" in client.error("remember", text="x", importance=6)


@pytest.mark.subprocess
def test_a_token_bound_to_alice_acts_for_alice_only(served):
    server, ids = served
    with http(server.url, ALICE_TOKEN) as client:
        recalled = {r["id"] for r in client.call("recall", query="Who is allergic to shellfish?", k=10)["results"]}
        assert ids["alice"] in recalled and ids["bob"] not in recalled
        assert "token is bound to entity 'alice'" in client.error("recall", query="allergies", entity="bob")
        assert "no memory with id" in client.error("forget", id=ids["bob"])
        stored = client.call("remember", text="Alice swims on Fridays")
        assert stored["metadata"]["scope"] == "entity:alice"


@pytest.mark.subprocess
def test_a_non_loopback_address_without_a_token_is_refused(tmp_path):
    workdir = project(tmp_path / "open")
    done = subprocess.run(
        brain_command(workdir, "--http", "--host", "0.0.0.0", "--port", str(free_port())),
        cwd=workdir,
        env=server_env(workdir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr
    assert not (workdir / "data").exists()  # refused before the store was opened


@pytest.mark.subprocess
def test_host_without_http_is_a_usage_error(tmp_path):
    workdir = project(tmp_path / "usage")
    done = subprocess.run(
        brain_command(workdir, "--host", "127.0.0.1"),
        cwd=workdir,
        env=server_env(workdir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "--host and --port go with --http" in done.stderr


# ---- /mcp inside brain serve ---------------------------------------------------------------------------


@pytest.fixture
def api_with_mcp(tmp_path, local_embedder):
    """The HTTP API with MCP mounted at /mcp (in this process, so the test reads the same store)."""
    settings = api_settings(tmp_path, api_mcp=True, api_token=ADMIN_TOKEN)
    with open_store(settings, embedder=local_embedder) as store:
        with LiveServer(create_app(settings, store=store)) as live:
            yield live, store


def test_serve_mounts_mcp_behind_the_same_token(api_with_mcp, tmp_path):
    live, store = api_with_mcp
    url = f"{live.url}/mcp"
    assert httpx.post(url, json={}, timeout=30).status_code == 401
    with http(url, ADMIN_TOKEN) as client:
        stored = client.call(
            "remember", text="Jonas keeps a sourdough starter called Bubbles", importance=4, entity="jonas"
        )
        exchange = client.call(
            "record_exchange", user_text="How is Bubbles doing?", assistant_text="Bubbling.", entity="jonas"
        )
    # what the tool wrote is the library's, the mirror's and the export's at once
    hits = store.retrieve_memories("What is the sourdough starter called?", entity="jonas", relevance=False)
    assert hits[0].id == stored["id"]
    assert [d.text for d in store.mirror.get(stored["id"])] == ["Jonas keeps a sourdough starter called Bubbles"]
    exported = export_pam(store, tmp_path / "export")
    memories = json.loads(exported.memory_store.read_text(encoding="utf-8"))["memories"]
    assert "Jonas keeps a sourdough starter called Bubbles" in {m["content"] for m in memories}
    turns = store.conversation_turns(exchange["conversation_id"])
    assert [t.text for t in turns] == ["How is Bubbles doing?", "Bubbling."]


def test_serve_without_the_setting_has_no_mcp(live):
    assert live.post("/mcp", json={}).status_code == 404


# ---- stdio writes, seen after the server exits ------------------------------------------------------------


@pytest.mark.subprocess
def test_what_stdio_writes_is_in_the_store_the_mirror_and_an_export(tmp_path, local_embedder):
    workdir = project(tmp_path / "stdio")
    with stdio(workdir) as client:
        stored = client.call("remember", text="Kai's bike lock code is 3141", importance=5, entity="kai")
    with brain.open(Settings(data_dir=workdir / "data"), embedder=local_embedder, start_worker=False) as b:
        assert (
            b.store.retrieve_memories("What is Kai's lock code?", entity="kai", relevance=False)[0].id == stored["id"]
        )
        assert [d.text for d in b.store.mirror.get(stored["id"])] == ["Kai's bike lock code is 3141"]
        exported = export_pam(b.store, tmp_path / "export")
    memories = json.loads(exported.memory_store.read_text(encoding="utf-8"))["memories"]
    assert any(m["content"] == "Kai's bike lock code is 3141" for m in memories)


def test_a_pinned_server_takes_its_own_entitys_token_only():
    from types import SimpleNamespace

    from brain.access.policy import Caller
    from brain.model.errors import Forbidden
    from brain.shells.mcp.server import request_caller

    def ctx(caller):
        return SimpleNamespace(request_context=SimpleNamespace(request=SimpleNamespace(scope={"brain.caller": caller})))

    stdio_ctx = SimpleNamespace(request_context=SimpleNamespace(request=None))
    assert request_caller(stdio_ctx, None).is_admin
    assert request_caller(stdio_ctx, "alice") == Caller("alice", bound_by="server")
    assert request_caller(ctx(Caller()), "alice") == Caller("alice", bound_by="server")  # the admin, narrowed
    assert request_caller(ctx(Caller("alice")), "alice") == Caller("alice")
    assert request_caller(ctx(Caller("bob")), None) == Caller("bob")
    with pytest.raises(Forbidden, match="bound to entity 'bob' but the server serves entity 'alice'"):
        request_caller(ctx(Caller("bob")), "alice")
