"""Lists show the current memories by default, each with its status, in every shell; the replaced ones on
request (the whole history). Real embedded Chroma, the real HTTP app, MCP server and CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import brain
import brain.store.facade
from brain.config import Settings
from brain.shells.api import create_app
from brain.shells.cli import cli
from brain.shells.mcp.server import create_server
from brain.store.memory_listing import list_memories
from tests.access.test_scope_rule import mcp_call
from tests.conftest import NOBODY

CITIES = ["Berlin", "Lisbon", "Porto", "Madrid", "Rome"]


@pytest.fixture(scope="module")
def moved(tmp_path_factory, local_embedder):
    """Dave moved four times; each move supersedes the fact before. Returns (settings, ids oldest first)."""
    home = tmp_path_factory.mktemp("moves")
    # a module's fixture runs before the working directory moves to tmp_path: without these two paths the
    # settings would name the repository's persona.md and config/specialists.yaml, which every start of the
    # HTTP app and the MCP server below would load and register (seconds each, and nothing this test reads)
    s = Settings(data_dir=home / "data", ollama_host=NOBODY, persona_path=home / "persona.md",
                 specialists_path=home / "specialists.yaml")
    with brain.open(s, start_worker=False, embedder=local_embedder) as b:
        ids = [b.chat.remember(f"Dave lives in {CITIES[0]}", entity="dave", timestamp="2026-01-01T00:00:00Z")]
        for month, city in enumerate(CITIES[1:], start=2):
            ids.append(b.store.supersede(ids[-1], f"Dave lives in {city}", at=f"2026-{month:02d}-01T00:00:00Z").new.id)
    return s, ids


@pytest.fixture(autouse=True)
def _one_embedder(monkeypatch, local_embedder):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)


def test_every_shell_lists_the_current_fact_with_its_status_and_the_history_on_request(moved):
    settings, ids = moved
    with brain.open(settings, start_worker=False) as b:
        assert [d.id for d in list_memories(b.store, scopes=["entity:dave"])] == [ids[-1]]
        assert {d.id for d in list_memories(b.store, scopes=["entity:dave"], history=True)} == set(ids)
        with TestClient(create_app(brain=b)) as http:
            current = http.get("/v1/memories", params={"entity": "dave"}).json()["memories"]
            assert [(m["id"], m["status"]) for m in current] == [(ids[-1], "active")]
            every = http.get("/v1/memories", params={"entity": "dave", "history": "true"}).json()["memories"]
            assert {m["id"]: m["status"] for m in every} == {**{i: "superseded" for i in ids[:-1]}, ids[-1]: "active"}
            # an explicit status still filters as asked
            old = http.get("/v1/memories", params={"entity": "dave", "status": "superseded"}).json()["memories"]
            assert {m["id"] for m in old} == set(ids[:-1])
        server = create_server(b)
        is_error, listed = mcp_call(server, "list_memories", entity="dave")
        assert not is_error and [(m["id"], m["status"]) for m in listed["memories"]] == [(ids[-1], "active")]
        is_error, listed = mcp_call(server, "list_memories", entity="dave", history=True)
        assert not is_error and len(listed["memories"]) == len(CITIES)
        # and the prompt: only the current city, with the day it became true
        prompt = b.chat.build_context(None, "Where does Dave live now?", entity="dave").prompt
        assert "Dave lives in Rome (about dave, 2026-05-01)" in prompt
        assert not any(f"Dave lives in {city}" in prompt for city in CITIES[:-1])
    run = CliRunner()
    text = run.invoke(cli, ["--data-dir", str(settings.data_dir), "memory", "list", "--entity", "dave"])
    assert text.exit_code == 0, text.stderr
    lines = text.stdout.strip().splitlines()
    assert len(lines) == 1 and "Rome" in lines[0] and "  active  " in lines[0]
    every = run.invoke(cli, ["--data-dir", str(settings.data_dir), "memory", "list", "--entity", "dave", "--history"])
    assert sum("  superseded  " in line for line in every.stdout.splitlines()) == len(CITIES) - 1
    listed = run.invoke(cli, ["--json", "--data-dir", str(settings.data_dir), "memory", "list", "--entity", "dave"])
    assert [d["id"] for d in json.loads(listed.stdout)] == [ids[-1]]
