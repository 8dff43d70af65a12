"""A real model in the loop: brain's summaries, memory formation and chat proxy driven through a real llama.cpp
server (scripts/llama_server.py) with BRAIN_SUMMARIZER=openai, as an operator would configure them.

Formation and summaries use Qwen2.5-Coder-1.5B (it follows instructions and schemas); the proxy uses SmolLM2-135M
(what it says does not matter there, only what passes through). Temperature 0 throughout: the same build answers
the same way."""

from __future__ import annotations

import httpx
import openai
import pytest

from brain.app.core import Brain, open_store
from brain.config import Settings
from brain.providers.extractors import openai as openai_extractor
from brain.shells.api import create_app
from tests.conftest import LiveServer

pytestmark = [pytest.mark.model, pytest.mark.slow]


def model_settings(tmp_path, server, **overrides) -> Settings:
    """What an operator sets to use the server: the summariser, the formation model, the one base URL."""
    fields = dict(
        data_dir=tmp_path / "data",
        summarizer="openai",
        openai_base_url=server.base_url,
        summary_model=server.alias,
        formation=True,
        formation_model=server.alias,
        summary_every_n=2,
        summary_retries=0,
        formation_retries=0,
        summary_backoff_seconds=0,
        summary_deadline_seconds=600,
        mirror_enabled=False,
    )
    return Settings(**{**fields, **overrides})


@pytest.fixture
def qwen_brain(tmp_path, qwen_server, local_embedder):
    with open_store(model_settings(tmp_path, qwen_server), embedder=local_embedder) as store:
        with Brain(store) as opened:
            yield opened


def record(opened: Brain, conversation: str, exchanges, entity: str = "alice") -> None:
    for user, assistant in exchanges:
        opened.chat.record_exchange(conversation, user, assistant, entity=entity)
    assert opened.chat.wait_for_summaries(900)


def current(opened: Brain, entity: str = "alice") -> list[str]:
    return [
        m.text
        for m in opened.store.get(type="memory")
        if m.metadata.get("scope") == f"entity:{entity}" and m.metadata.get("status", "active") == "active"
    ]


def test_formation_and_summaries_over_a_short_conversation(qwen_brain):
    opened = qwen_brain
    record(
        opened,
        "conv-alice-1",
        [
            ("I work as a nurse at a children's hospital.", "That sounds rewarding."),
            ("My shifts are mostly nights, which is tiring.", "Night shifts are hard; rest well."),
        ],
    )
    # the summary of the window, written by the model (not the extractive fallback)
    [summary] = opened.store.get(type="summary")
    assert summary.metadata["summarizer"] == "openai/qwen2.5-coder-1.5b"
    assert "nurse" in summary.text.lower()
    # the window's facts, formed in alice's scope, found by a question that shares no content word with them
    assert summary.metadata["formation"] == "done" and summary.metadata["formation_outcome"] == "accepted"
    formed = current(opened)
    assert any("nurse" in text.lower() for text in formed), formed
    # the job clears the relevance floor; which of the window's work facts ranks first is the embedder's call and
    # varies with the model's wording across machines, so only presence is asserted
    found = opened.store.retrieve_memories("What do I do for a living?", entity="alice")
    assert any("nurse" in hit.text.lower() for hit in found), (formed, found)
    formation = opened.health()["formation"]
    assert formation["done"] == 1 and formation["prompt_tokens"] > 0 and formation["eval_tokens"] > 0
    # every window of N exchanges gets its summary: two more exchanges, a second window
    record(
        opened,
        "conv-alice-1",
        [
            ("I'm vegetarian, so no meat in any recipe please.", "Noted: vegetarian recipes only."),
            ("Thanks!", "You're welcome."),
        ],
    )
    summaries = opened.store.get(type="summary")
    assert sorted(s.metadata["turn_range"] for s in summaries) == ["1-4", "5-8"]
    assert any("vegetarian" in text.lower() for text in current(opened))


def test_a_changed_fact_supersedes_the_one_it_changes(qwen_brain):
    opened = qwen_brain
    known = opened.store.upsert_memory(
        "Alice lives in Paris.", importance=3, entity="alice", timestamp="2026-01-05T10:00:00Z"
    )
    record(
        opened,
        "conv-alice-2",
        [
            (
                "Big news: I moved to Berlin last week, so I don't live in Paris anymore.",
                "Congratulations on the move!",
            ),
            ("The new flat is near a lake.", "That sounds lovely."),
        ],
    )
    old = opened.store.get_one(known)
    assert old.metadata["status"] == "superseded", old.metadata
    successor = opened.store.get_one(old.metadata["superseded_by"])
    assert "berlin" in successor.text.lower()
    found = opened.store.retrieve_memories("Where do I live these days?", entity="alice")
    assert any("berlin" in hit.text.lower() for hit in found), found
    assert not any("paris" in m.text.lower() and "berlin" not in m.text.lower() for m in found)


def test_a_model_answer_that_fails_validation_is_counted_and_nothing_is_written(qwen_brain, monkeypatch):
    opened = qwen_brain
    # a real answer cut at the token limit: unfinished JSON, refused, repaired, cut again
    monkeypatch.setattr(openai_extractor, "MAX_TOKENS", 12)
    record(
        opened,
        "conv-alice-3",
        [
            ("I'm allergic to peanuts.", "Noted."),
            ("And I have a dog called Rex.", "Lovely."),
        ],
    )
    [batch] = opened.chat.formation.batches("conv-alice-3")
    assert batch.status == "failed" and batch.outcome == "too_long", batch
    assert current(opened) == []
    formation = opened.health()["formation"]
    assert formation["failed"] == 1 and formation["outcomes"]["too_long"] == 1
    assert formation["answers"]["too_long"] == 2 and formation["last_error"]
    # the batch waits, visible, and forms once the model may answer in full
    monkeypatch.setattr(openai_extractor, "MAX_TOKENS", 2048)
    report = opened.chat.extract_memories("conv-alice-3")
    assert report.done == 1 and any("peanut" in text.lower() for text in current(opened))


@pytest.fixture
def proxy(tmp_path, smollm_server, local_embedder):
    """`brain serve` in front of the real server: the upstream is the model server, named once."""
    settings = model_settings(tmp_path, smollm_server, formation=False, summarizer="extractive")
    assert settings.chat_upstream == smollm_server.base_url
    with open_store(settings, embedder=local_embedder) as store:
        store.upsert_memory("Alice keeps bees on her roof.", importance=4, entity="alice")
        with LiveServer(create_app(settings, store=store)) as server:
            yield store, server


def test_the_proxy_plain_and_streamed_records_the_exchange(proxy, smollm_server):
    store, server = proxy
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)
    question = [{"role": "user", "content": "Tell me about my bees."}]
    plain = client.chat.completions.create(
        model=smollm_server.alias, messages=question, user="alice", max_tokens=24, temperature=0
    )
    assert plain.choices[0].message.content
    streamed = client.chat.completions.create(
        model=smollm_server.alias, messages=question, user="alice", max_tokens=24, temperature=0, stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices)
    assert text
    # both exchanges recorded in alice's scope, the model's own words as the assistant turn
    turns = _wait_for_turns(store, 4)
    assistant = [t.text for t in turns if t.metadata["role"] == "assistant"]
    assert plain.choices[0].message.content.strip() in [a.strip() for a in assistant]
    assert all(t.metadata["scope"] == "entity:alice" for t in turns)
    # the model list passes through from the real server
    models = httpx.get(f"{server.url}/v1/models", timeout=30).json()
    assert smollm_server.alias in [m["id"] for m in models["data"]]


def _wait_for_turns(store, count: int, timeout: float = 30.0):
    import time

    deadline = time.monotonic() + timeout
    while True:
        turns = store.get(type="turn")
        if len(turns) >= count or time.monotonic() > deadline:
            return turns
        time.sleep(0.2)


@pytest.fixture
def qwen_proxy(tmp_path, qwen_server, local_embedder):
    """`brain serve` in front of the 1.5B model, with a fact of alice's and one of bob's that a question about a
    sister would match."""
    settings = model_settings(tmp_path, qwen_server, formation=False, summarizer="extractive")
    with open_store(settings, embedder=local_embedder) as store:
        store.upsert_memory("Alice's sister Maria lives in Porto.", importance=3, entity="alice")
        store.upsert_memory("Bob's sister Lucia lives in Madrid.", importance=3, entity="bob")
        with LiveServer(create_app(settings, store=store)) as server:
            yield store, server


def test_through_the_proxy_in_cache_order_the_model_answers_from_memory(qwen_proxy, qwen_server):
    store, server = qwen_proxy
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=600)
    headers = {"X-Brain-Conversation": "conv-visit", "X-Brain-Entity": "alice"}
    history: list[dict] = []
    answers, usages = [], []
    for i, text in enumerate(
        [
            "Hi! I am planning a trip next month.",
            "I want to visit my sister. Which city do I fly to? Answer with the city's name.",
        ]
    ):
        history.append({"role": "user", "content": text})
        answer = client.chat.completions.create(
            model=qwen_server.alias, messages=history, max_tokens=40, temperature=0, extra_headers=headers
        )
        reply = answer.choices[0].message.content or ""
        answers.append(reply)
        usages.append(answer.usage)
        history.append({"role": "assistant", "content": reply})
        _wait_for_turns(store, 2 * (i + 1), timeout=60)
    # the fact only alice's memory holds reaches the answer; bob's, which the same question matches, never
    assert "porto" in answers[1].lower(), answers
    assert not any("madrid" in a.lower() or "lucia" in a.lower() for a in answers), answers
    # the second prompt started as the first prompt and its answer did: the server kept all of them and read only
    # what followed (its own log says so)
    hits = [
        line for line in qwen_server.log_path.read_text(errors="replace").splitlines() if "prefix-match hit" in line
    ]
    reused = int(hits[-1].split("Llama.generate: ")[1].split()[0])
    assert reused >= usages[0].prompt_tokens + usages[0].completion_tokens - 1, (hits[-1], usages[0])
