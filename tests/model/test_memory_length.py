"""A memory longer than a prompt could show is refused on every path that writes one, naming the limit,
and nothing is written; a memory of exactly the limit is stored and shown whole in a prompt."""

from __future__ import annotations

import pytest

import brain
from brain.config import Settings
from brain.model.errors import ValidationError
from brain.model.schemas import MAX_MEMORY_CHARS
from tests.conftest import NOBODY

TOO_LONG = "Alice keeps a very long diary. " * (MAX_MEMORY_CHARS // 31 + 1)


@pytest.fixture
def opened(tmp_path, local_embedder):
    with brain.open(Settings(data_dir=tmp_path / "data", ollama_host=NOBODY, summarizer="extractive"),
                    embedder=local_embedder, start_worker=False) as b:
        yield b


@pytest.mark.parametrize("write", [
    lambda b: b.store.upsert_memory(TOO_LONG, scope="entity:alice"),
    lambda b: b.chat.remember(TOO_LONG, entity="alice"),
    lambda b: b.store.upsert_docs([{"text": TOO_LONG, "type": "memory"}]),
    lambda b: b.store.update_memory(b.store.upsert_memory("Alice keeps a diary"), TOO_LONG),
], ids=["upsert_memory", "remember", "upsert_docs", "update_memory"])
def test_a_memory_longer_than_the_limit_is_refused_naming_it(opened, write):
    with pytest.raises(ValidationError, match="MAX_MEMORY_CHARS") as caught:
        write(opened)
    assert f"{len(TOO_LONG):,} characters" in str(caught.value) and caught.value.problems[0]["field"] == "text"
    assert "nothing was written" in str(caught.value)
    assert TOO_LONG not in [d.text for d in opened.store.get(type="memory")]


def test_a_memory_of_the_limit_is_stored_and_shown_whole(opened):
    text = ("Alice is allergic to peanuts. " * MAX_MEMORY_CHARS)[:MAX_MEMORY_CHARS]
    opened.chat.remember(text, importance=5, entity="alice")
    context = opened.chat.build_context(None, "Is Alice allergic to peanuts?", entity="alice")
    assert [item.text for item in context.memory] == [text] and text in context.prompt


def test_the_api_answers_422_naming_the_limit(live):
    refused = live.post("/v1/memories", json={"text": TOO_LONG, "entity": "alice"})
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["error"] == "validation_error" and "MAX_MEMORY_CHARS" in body["message"]
    assert [p["field"] for p in body["problems"]] == ["text"]
    assert live.get("/v1/memories").json()["memories"] == []
