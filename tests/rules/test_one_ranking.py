"""One ranking everywhere: for the same message, a memory search in the library, over HTTP, on the command
line and through MCP lists memories in the order the prompt's memory section shows them (relevance first,
behind the same floor), with the parts of each score; and the person's most important facts are in the
prompt whatever the wording. Real embedded Chroma, the real embedder, the real HTTP app and MCP server."""

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
from tests.access.test_scope_rule import mcp_call
from tests.conftest import NOBODY

MEMORIES = [
    {"text": "Alice is allergic to peanuts", "importance": 5, "scope": "entity:alice"},
    {"text": "Alice's passport expires in March 2027", "importance": 5, "scope": "entity:alice"},
    {"text": "Alice loves peanut butter cookies", "importance": 2, "scope": "entity:alice"},
    {"text": "Alice is training for the Berlin marathon in October", "importance": 3, "scope": "entity:alice"},
    {"text": "Peanut oil is used in the office kitchen", "importance": 3},
    {"text": "The office is closed on Sundays", "importance": 4},
    {"text": "Bob is allergic to peanuts", "importance": 5, "scope": "entity:bob"},
    {"text": "Bob's Volvo is due for a service", "importance": 4, "scope": "entity:bob"},
]
MESSAGES = ["Tell me what you know about peanuts", "Are peanuts a problem for me?", "peanut butter",
            "When is the marathon?", "What is a prime number?"]


@pytest.fixture(scope="module")
def settings(tmp_path_factory, local_embedder):
    home = tmp_path_factory.mktemp("one-ranking")
    # not the repository's persona.md and config/specialists.yaml, which a module's fixture would name (it runs
    # before the working directory moves to tmp_path) and every start of the HTTP app and MCP server would load
    s = Settings(data_dir=home / "data", ollama_host=NOBODY, summary_retries=0, summary_backoff_seconds=0,
                 persona_path=home / "persona.md", specialists_path=home / "specialists.yaml")
    with brain.open(s, start_worker=False, embedder=local_embedder) as b:
        b.store.upsert_docs([{"type": "memory", **m} for m in MEMORIES])
    return s


@pytest.fixture(autouse=True)
def _one_embedder(monkeypatch, local_embedder):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)


def prompt_order(b, message: str) -> list[str]:
    return [item.id for item in b.chat.build_context(None, message, entity="alice").memory]


@pytest.mark.parametrize("message", MESSAGES)
def test_every_shell_searches_in_the_order_of_the_prompt(settings, message):
    with brain.open(settings, start_worker=False) as b:
        prompt = prompt_order(b, message)
        library = b.store.retrieve_memories(message, entity="alice")
        assert [h.id for h in library] == prompt
        assert all(h.floor is not None for h in library)  # the floor it had to reach, shown
        with TestClient(create_app(brain=b)) as http:
            got = http.get("/v1/memories/search", params={"q": message, "entity": "alice"})
            assert got.status_code == 200, got.text
            assert [h["id"] for h in got.json()["results"]] == prompt
            for hit in got.json()["results"]:
                parts = hit["similarity_part"] + hit["lexical_part"] + hit["importance_part"] + hit["recency_part"]
                assert hit["score"] == pytest.approx(parts, abs=1e-6) and "floor" in hit
        is_error, recalled = mcp_call(create_server(b), "recall", query=message, entity="alice")
        assert not is_error, recalled
        assert [h["id"] for h in recalled["results"]] == prompt
    result = CliRunner().invoke(cli, ["--json", "--data-dir", str(settings.data_dir), "search", message,
                                      "--type", "memory", "--entity", "alice"])
    assert result.exit_code == 0, result.stderr
    assert [h["id"] for h in json.loads(result.stdout)["results"]] == prompt


def test_a_search_no_longer_lets_importance_outweigh_relevance(settings):
    """The reference formula (w_imp 0.5) put an unrelated important fact first; the search ranks as the prompt."""
    with brain.open(settings, start_worker=False) as b:
        message = "How should I plan my long runs this month?"
        reference = b.store.retrieve_memories(message, 3, "alice", relevance=False)
        assert reference[0].text != "Alice is training for the Berlin marathon in October"
        searched = [h.text for h in b.store.retrieve_memories(message, 3, "alice")]
        assert "Alice's passport expires in March 2027" not in searched


def test_the_most_important_facts_are_in_every_prompt_and_another_persons_never(settings):
    with brain.open(settings, start_worker=False) as b:
        for message in [*MESSAGES, "What should I bake for the party?", "Any ideas for dinner on Saturday?"]:
            ctx = b.chat.build_context(None, message, entity="alice")
            shown = {i.text for i in ctx.core} | {i.text for i in ctx.memory}
            assert "Alice is allergic to peanuts" in shown, message
            assert not any(t.startswith("Bob") for t in shown), message
            assert "Alice is allergic to peanuts" in ctx.prompt
            assert {i.id for i in ctx.core}.isdisjoint(i.id for i in ctx.memory)  # never twice
            assert len(ctx.core) <= b.settings.core_top_k
            assert all(i.metadata["scope"] == "entity:alice" for i in ctx.core)  # never a global fact
        unrelated = b.chat.build_context(None, "What is a prime number?", entity="alice")
        assert unrelated.memory == []  # nothing relevant: the ranked section stays empty
        assert "## Always keep in mind about this person" in unrelated.prompt
        assert b.chat.build_context(None, "What is a prime number?").core == []  # no person, nothing always shown


def test_the_always_shown_facts_can_be_switched_off_and_bounded(settings, local_embedder):
    off = settings.model_copy(update={"core_top_k": 0})
    with brain.open(off, start_worker=False, embedder=local_embedder) as b:
        assert b.chat.build_context(None, "What should I bake for the party?", entity="alice").core == []
    small = settings.model_copy(update={"core_max_chars": 60})
    with brain.open(small, start_worker=False, embedder=local_embedder) as b:
        core = b.chat.build_context(None, "What should I bake for the party?", entity="alice").core
        assert len(core) == 1 and sum(len(i.text) for i in core) < 60


def test_each_memory_in_the_prompt_says_the_day_it_was_learned(tmp_path, local_embedder):
    s = Settings(data_dir=tmp_path / "data", ollama_host=NOBODY)
    with brain.open(s, start_worker=False, embedder=local_embedder) as b:
        b.chat.remember("Dave lives in Berlin", importance=3, entity="dave", timestamp="2026-01-05T10:00:00Z")
        old = b.store.retrieve_memories("Where does Dave live?", 1, "dave", relevance=False)[0].id
        b.store.supersede(old, "Dave lives in Lisbon", at="2026-11-20T09:00:00Z")
        ctx = b.chat.build_context(None, "Where does Dave live?", entity="dave")
        assert "- Dave lives in Lisbon (about dave, 2026-11-20)" in ctx.prompt
        assert "Berlin" not in ctx.prompt  # a superseded fact never appears
