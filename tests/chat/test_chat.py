"""brain.features.chat: context assembly, exchanges, summaries at their cadence, fallbacks, access tracking.

Real Chroma, the real local embedder and a real loopback HTTP server speaking Ollama's /api/chat.
"""

from __future__ import annotations

import logging
import re
import threading
import time

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import DROP_PRIORITY, ChatMemory, TokenCounter, render_prompt, summary_id
from brain.features.persona import load_persona
from brain.model.errors import ValidationError
from brain.providers.summarizers import SummarizerUnavailable, transcript
from brain.rules import ranking
from brain.rules.ranking import ScoreWeights
from brain.store.indexes import memory_index
from brain.store.memory_index import MemoryIndex
from brain.store.memory_query import MemoryQuery
from tests.ollama_stub import dead_url, stub_chat_reply

CONV_RE = re.compile(r"^conv-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


class CountingEmbedder:
    """The real local embedder, counting calls (the query cache must not hide a second embedding)."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.queries: list[str] = []
        self.documents = 0

    def embed_query(self, text):
        self.queries.append(text)
        return self.inner.embed_query(text)

    def embed_documents(self, texts):
        self.documents += 1
        return self.inner.embed_documents(texts)


class AccessRecorder:
    """Wraps an object and records every attribute read after ``arm()``."""

    def __init__(self, inner):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "reads", [])
        object.__setattr__(self, "armed", False)

    def arm(self):
        object.__setattr__(self, "armed", True)

    def __getattr__(self, name):
        if self.armed:
            self.reads.append(name)
        return getattr(self._inner, name)



def make_settings(tmp_path, url, **overrides) -> Settings:
    values = dict(data_dir=tmp_path / "data", ollama_host=url, summary_every_n=2, summary_retries=1,
                  summary_backoff_seconds=0.01, summary_timeout=5.0)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def make_chat(tmp_path, stub, local_embedder):
    opened = []

    def factory(embedder=None, url=None, start_worker=True, clock=time.time, **overrides):
        settings = make_settings(tmp_path, url or stub.url, **overrides)
        store = open_store(settings, embedder=embedder or local_embedder)
        chat = ChatMemory(store, start_worker=start_worker, clock=clock)
        opened.append((chat, store))
        return chat

    yield factory
    for chat, store in opened:
        chat.close()
        store.close()


def turns_of(store, conversation_id):
    docs = store.get(where={"conversation_id": conversation_id}, type="turn")
    return sorted(docs, key=lambda d: d.metadata["turn_index"])


def summaries_of(store, conversation_id):
    docs = store.get(where={"conversation_id": conversation_id}, type="summary")
    return sorted(docs, key=lambda d: d.metadata["summary_index"])


# ---- record_exchange ------------------------------------------------------------------------------------
def test_exchange_gets_a_new_conversation_and_consecutive_indexes(make_chat):
    chat = make_chat()
    first = chat.record_exchange(None, "Hello, I am Ana.", "Hi Ana!")
    assert CONV_RE.match(first.conversation_id)
    assert (first.user_turn_index, first.assistant_turn_index) == (1, 2)
    second = chat.record_exchange(first.conversation_id, "I live in Porto.", "Porto is lovely.")
    assert (second.user_turn_index, second.assistant_turn_index) == (3, 4)
    stored = turns_of(chat.store, first.conversation_id)
    assert [(d.metadata["turn_index"], d.metadata["role"], d.text) for d in stored] == [
        (1, "user", "Hello, I am Ana."), (2, "assistant", "Hi Ana!"),
        (3, "user", "I live in Porto."), (4, "assistant", "Porto is lovely."),
    ]
    assert [d.id for d in stored] == [first.user_turn_id, first.assistant_turn_id,
                                      second.user_turn_id, second.assistant_turn_id]
    assert other_conversation_is_independent(chat)


def other_conversation_is_independent(chat) -> bool:
    other = chat.record_exchange("conv-other", "x", "y")
    return (other.user_turn_index, other.assistant_turn_index) == (1, 2)


def test_exchange_with_entity_timestamp_and_metadata(make_chat):
    chat = make_chat()
    ex = chat.record_exchange("conv-e1", "Hi", "Hello", entity="alice", timestamp="2023-05-08T13:56:00+00:00",
                              metadata={"session": 3})
    for doc in turns_of(chat.store, "conv-e1"):
        assert doc.metadata["scope"] == "entity:alice"
        assert doc.metadata["timestamp"] == "2023-05-08T13:56:00+00:00"
        assert doc.metadata["session"] == 3
    assert ex.to_dict()["conversation_id"] == "conv-e1"


def test_bad_exchange_stores_neither_turn(make_chat):
    chat = make_chat()
    chat.record_exchange("conv-a1", "first", "reply")
    with pytest.raises(ValidationError, match="text"):
        chat.record_exchange("conv-a1", "a question", "   ")
    with pytest.raises(ValidationError, match="reserved|sets them itself"):
        chat.record_exchange("conv-a1", "a question", "an answer", metadata={"role": "assistant"})
    with pytest.raises(ValidationError, match="conversation_id"):
        chat.record_exchange("chat-1", "a question", "an answer")
    with pytest.raises(ValidationError, match="entity"):
        chat.record_exchange("conv-a1", "a question", "an answer", entity=" spaced ")
    assert [d.text for d in turns_of(chat.store, "conv-a1")] == ["first", "reply"]
    assert chat.record_exchange("conv-a1", "q", "a").user_turn_index == 3  # no gap either


def test_concurrent_exchanges_never_collide(make_chat):
    chat = make_chat(summary_every_n=1000)
    errors = []

    def talk(n):
        try:
            for i in range(5):
                chat.record_exchange("conv-busy", f"user {n}.{i}", f"assistant {n}.{i}")
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=talk, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stored = turns_of(chat.store, "conv-busy")
    assert [d.metadata["turn_index"] for d in stored] == list(range(1, 41))
    for user, assistant in zip(stored[::2], stored[1::2]):  # each exchange kept together
        assert user.metadata["role"] == "user" and assistant.metadata["role"] == "assistant"
        assert user.text.replace("user", "") == assistant.text.replace("assistant", "")


def test_restart_keeps_turn_numbering_and_summary_cadence(tmp_path, stub, local_embedder):
    settings = make_settings(tmp_path, stub.url, summary_every_n=2)
    store = open_store(settings, embedder=local_embedder)
    chat = ChatMemory(store)
    conv = chat.record_exchange(None, "u1", "a1").conversation_id
    assert chat.record_exchange(conv, "u2", "a2").summaries_scheduled == ["1-4"]
    chat.record_exchange(conv, "u3", "a3")
    assert chat.wait_for_summaries(30)
    chat.close()
    store.close()

    store = open_store(settings, embedder=local_embedder)  # a new process would see exactly this
    chat = ChatMemory(store)
    try:
        ex = chat.record_exchange(conv, "u4", "a4")
        assert (ex.user_turn_index, ex.assistant_turn_index) == (7, 8)
        assert ex.summaries_scheduled == ["5-8"]
        assert chat.wait_for_summaries(30)
        summaries = summaries_of(store, conv)
        assert [(s.metadata["summary_index"], s.metadata["turn_range"]) for s in summaries] == [(1, "1-4"), (2, "5-8")]
        assert [d.text for d in turns_of(store, conv)] == ["u1", "a1", "u2", "a2", "u3", "a3", "u4", "a4"]
    finally:
        chat.close()
        store.close()


# ---- summaries --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("every_n", [1, 3])
def test_summaries_at_exactly_the_cadence(make_chat, stub, every_n):
    chat = make_chat(summary_every_n=every_n)
    conv = "conv-cadence"
    due = []
    for i in range(1, 8):
        ex = chat.record_exchange(conv, f"user says {i}", f"assistant says {i}")
        due.append(ex.summaries_scheduled)
    window = 2 * every_n
    expected = [[f"{i * 2 - window + 1}-{i * 2}"] if i % every_n == 0 else [] for i in range(1, 8)]
    assert due == expected
    assert chat.wait_for_summaries(30)
    summaries = summaries_of(chat.store, conv)
    ranges = [r for due_now in expected for r in due_now]
    assert [s.metadata["turn_range"] for s in summaries] == ranges
    assert [s.metadata["summary_index"] for s in summaries] == list(range(1, len(ranges) + 1))
    requests = stub.chat_requests()
    assert len(requests) == len(ranges)
    for summary, request in zip(summaries, requests):
        start, end = map(int, summary.metadata["turn_range"].split("-"))
        prompt = request.body["messages"][-1]["content"]
        said = [int(n) for n in re.findall(r"says (\d+)", prompt)]
        assert said == [(t + 1) // 2 for t in range(start, end + 1)]  # those turns, no others
        assert summary.text == stub_chat_reply(request.body["messages"])
        assert summary.id == summary_id(conv, summary.metadata["summary_index"])
        assert summary.metadata["summarizer"] == "ollama/llama3.2:3b" and summary.metadata["fallback"] is False
        assert summary.metadata["source"] == "system"
    assert chat.health()["model_summaries"] == len(ranges)


def test_summary_covers_exactly_its_turns(make_chat, stub):
    chat = make_chat(summary_every_n=2)
    conv = "conv-exact"
    for i in range(1, 5):
        chat.record_exchange(conv, f"question {i}", f"answer {i}")
    assert chat.wait_for_summaries(30)
    first, second = stub.chat_requests()
    stored = turns_of(chat.store, conv)
    from brain.providers.summarizers import TurnText
    for request, part in ((first, stored[0:4]), (second, stored[4:8])):
        expected = transcript([TurnText(d.metadata["turn_index"], d.metadata["role"], d.text) for d in part])
        assert request.body["messages"][-1]["content"].endswith(expected)


def test_ollama_down_falls_back_without_blocking_the_chat(make_chat, caplog):
    chat = make_chat(url=dead_url(), summary_every_n=1)
    with caplog.at_level(logging.WARNING, logger="brain.features.chat"):
        ex = chat.record_exchange("conv-down", "My sister Lena lives in Oslo.", "Oslo is beautiful in June.")
        assert ex.summaries_scheduled == ["1-2"]
        context = chat.build_context("conv-down", "where does Lena live?")  # the chat goes on
        assert [i.text for i in context.turn][-1] == "Oslo is beautiful in June."
        assert chat.wait_for_summaries(30)
    (summary,) = summaries_of(chat.store, "conv-down")
    assert summary.metadata["fallback"] is True
    assert summary.metadata["summarizer"] == "extractive"
    assert "cannot reach Ollama" in summary.metadata["fallback_reason"]
    assert summary.metadata["turn_range"] == "1-2" and summary.metadata["summary_index"] == 1
    assert summary.text == "User: My sister Lena lives in Oslo. Assistant: Oslo is beautiful in June."
    assert any("extractive fallback" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    health = chat.health()
    assert health["reachable"] is False and "cannot reach" in health["last_error"]
    assert health["fallback_summaries"] == 1 and health["queue_length"] == 0


def test_slow_ollama_does_not_hold_up_exchanges(make_chat, stub):
    stub.chat_delay = 2.0
    chat = make_chat(summary_every_n=1, summary_timeout=0.5, summary_retries=0)
    ex = chat.record_exchange("conv-slow", "one", "two")
    # the exchange is stored and answered while its summary is still being worked on
    assert chat.pending_summaries() == 1
    assert [d.id for d in turns_of(chat.store, "conv-slow")] == [ex.user_turn_id, ex.assistant_turn_id]
    assert chat.wait_for_summaries(30)
    (summary,) = summaries_of(chat.store, "conv-slow")
    assert summary.metadata["fallback"] is True and "timed out" in summary.metadata["fallback_reason"]


def test_hung_ollama_costs_one_deadline_and_health_says_so(make_chat, stub):
    """A server that accepts the connection and never answers: one attempt, cut at the deadline (not at
    BRAIN_SUMMARY_TIMEOUT per retry), then the extractive fallback; health says it timed out."""
    stub.hang = True
    chat = make_chat(summary_every_n=1, summary_timeout=120.0, summary_retries=3, summary_deadline_seconds=1.0)
    started = time.monotonic()
    chat.record_exchange("conv-hung", "My sister Lena lives in Oslo.", "Oslo is beautiful in June.")
    assert chat.wait_for_summaries(60)
    elapsed = time.monotonic() - started
    (summary,) = summaries_of(chat.store, "conv-hung")
    assert summary.metadata["fallback"] is True and summary.metadata["summarizer"] == "extractive"
    assert "timed out: no answer within 1 s" in summary.metadata["fallback_reason"]
    assert len(stub.chat_requests()) == 1  # the first attempt used the whole deadline; no retry outlived it
    assert elapsed < 30  # one 1 s deadline, not 4 x 120 s (generous: the machine is shared)
    health = chat.health()
    assert health["reachable"] is False and "timed out" in health["last_error"]
    assert health["fallback_summaries"] == 1 and health["fallback_for_seconds"] > 0


@pytest.mark.slow  # waits out real timeouts of seconds
def test_retries_share_the_deadline_and_the_first_timeout_shows_in_health(make_chat, stub):
    stub.hang = True
    chat = make_chat(summary_every_n=1, summary_timeout=0.3, summary_retries=20, summary_backoff_seconds=0.05,
                     summary_deadline_seconds=4.0)
    assert chat.health()["reachable"] is None  # nothing known yet
    chat.record_exchange("conv-hung", "first question", "first answer")
    # unresponsive as soon as the first attempt timed out, while the summary is still being tried
    for _ in range(200):
        health = chat.health()
        if health["reachable"] is not None:
            break
        time.sleep(0.02)
    assert health["reachable"] is False and "timed out: no answer within 0.3 s" in health["last_error"]
    assert chat.pending_summaries() == 1
    assert chat.wait_for_summaries(60)
    (summary,) = summaries_of(chat.store, "conv-hung")
    reason = summary.metadata["fallback_reason"]
    assert summary.metadata["fallback"] is True
    assert "no model summary within BRAIN_SUMMARY_DEADLINE_SECONDS=4" in reason and "timed out" in reason
    attempts = len(stub.chat_requests())
    assert 2 <= attempts < 21  # retried, but the deadline ended it before the retries ran out
    assert f"after {attempts} attempts;" in reason


def test_garbage_is_retried_then_falls_back_and_later_jobs_skip_the_wait(make_chat, stub):
    stub.chat_mode = "not-json"
    chat = make_chat(summary_every_n=1, summary_retries=2)
    chat.record_exchange("conv-garbage", "first question", "first answer")
    assert chat.wait_for_summaries(30)
    assert len(stub.chat_requests()) == 3  # one try + two retries
    chat.record_exchange("conv-garbage", "second question", "second answer")
    assert chat.wait_for_summaries(30)
    assert len(stub.chat_requests()) == 3  # within the cool-down: straight to the fallback
    summaries = summaries_of(chat.store, "conv-garbage")
    assert [s.metadata["fallback"] for s in summaries] == [True, True]
    assert "not an Ollama chat response" in summaries[0].metadata["fallback_reason"]


def test_resummarize_replaces_fallbacks_in_place(make_chat, stub):
    stub.chat_mode = "empty"
    chat = make_chat(summary_every_n=1, summary_retries=0)
    for i in range(3):
        chat.record_exchange("conv-re", f"question {i}", f"answer {i}")
    chat.record_exchange("conv-keep", "other question", "other answer")
    assert chat.wait_for_summaries(30)
    before = summaries_of(chat.store, "conv-re")
    assert [s.metadata["fallback"] for s in before] == [True, True, True]

    stub.chat_mode = "ok"
    assert chat.resummarize_fallbacks("conv-re") == 3
    after = summaries_of(chat.store, "conv-re")
    assert [s.id for s in after] == [s.id for s in before]
    assert [(s.metadata["summary_index"], s.metadata["turn_range"], s.metadata["timestamp"]) for s in after] == [
        (s.metadata["summary_index"], s.metadata["turn_range"], s.metadata["timestamp"]) for s in before]
    for s in after:
        assert s.metadata["fallback"] is False and s.metadata["summarizer"] == "ollama/llama3.2:3b"
        assert "fallback_reason" not in s.metadata
        assert s.text.startswith("Model summary ")
    assert chat.store.count("summary") == 4
    assert summaries_of(chat.store, "conv-keep")[0].metadata["fallback"] is True  # other conversation untouched
    assert chat.resummarize_fallbacks("conv-re") == 0


def test_resummarize_reports_ollama_down(make_chat):
    chat = make_chat(url=dead_url(), summary_every_n=1, summary_retries=0)
    chat.record_exchange("conv-still-down", "q", "a")
    assert chat.wait_for_summaries(30)
    with pytest.raises(SummarizerUnavailable, match="replaced 0 of 1"):
        chat.resummarize_fallbacks()
    assert summaries_of(chat.store, "conv-still-down")[0].metadata["fallback"] is True


def test_without_worker_summaries_run_on_wait_and_close_writes_fallbacks(make_chat, stub):
    chat = make_chat(summary_every_n=1, start_worker=False)
    chat.record_exchange("conv-sync", "q1", "a1")
    assert chat.pending_summaries() == 1 and stub.chat_requests() == []
    assert chat.wait_for_summaries()
    assert summaries_of(chat.store, "conv-sync")[0].metadata["fallback"] is False
    chat.record_exchange("conv-sync", "q2", "a2")
    chat.close()  # nothing left unsummarised, and no model call at shutdown
    assert len(stub.chat_requests()) == 1
    second = summaries_of(chat.store, "conv-sync")[1]
    assert second.metadata["turn_range"] == "3-4" and second.metadata["fallback"] is True
    assert "closed" in second.metadata["fallback_reason"]


# ---- build_context ------------------------------------------------------------------------------------------
PERSONA = """I am Brainy, a helpful assistant.

## Tone
Friendly and concise.

## Limits
I never give medical advice.
"""


def populate(chat, tmp_path):
    store = chat.store
    path = tmp_path / "persona.md"
    path.write_text(PERSONA, encoding="utf-8")
    load_persona(store, path)
    store.upsert_docs([
        {"text": "Opening hours: the shop is open 9 to 17 on weekdays.", "type": "faq", "topic": "shop"},
        {"text": "Shipping takes three days within Portugal.", "type": "faq", "topic": "shipping"},
        {"text": "Returns are accepted within 30 days.", "type": "faq", "topic": "returns"},
    ])
    chat.remember("The user's cat is called Miso.", importance=4, tags=["pets"])
    chat.remember("The user prefers tea over coffee.", importance=2)
    chat.remember("Alice is allergic to cats.", entity="alice", importance=5)
    chat.remember("Bob supports FC Porto.", entity="bob", importance=5)
    for i in range(1, 5):
        chat.record_exchange("conv-ctx", f"Tell me about cat food number {i}.", f"Cat food {i} is fine.")
    chat.wait_for_summaries(30)


#: the section mechanics below (limits, switches, the budget) want every candidate shown: the reference
#: ranking has no relevance floor (tests/chat/test_relevance_context.py covers the floor)
EVERY_CANDIDATE = {"memory_ranking": "reference"}


def test_context_has_every_section_scoped_and_limited(make_chat, tmp_path):
    chat = make_chat(summary_every_n=2, turn_top_k=3, faq_top_k=2, memory_top_k=2, summary_top_k=1, **EVERY_CANDIDATE)
    populate(chat, tmp_path)
    ctx = chat.build_context("conv-ctx", "What does my cat eat?", entity="alice")
    assert [i.metadata["topic"] for i in ctx.persona] == ["core", "tone", "limits"]  # whole persona, file order
    assert all("similarity" in i.scores for i in ctx.persona + ctx.faq + ctx.summary)
    assert len(ctx.faq) == 2
    assert [i.text for i in ctx.memory] == ["Alice is allergic to cats.", "The user's cat is called Miso."]
    assert set(ctx.memory[0].scores) == {"score", "similarity", "similarity_part", "lexical_part", "importance_part",
                                         "recency_part"}
    assert ctx.memory[0].scores["score"] == pytest.approx(
        sum(ctx.memory[0].scores[k] for k in ("similarity_part", "lexical_part", "importance_part", "recency_part")))
    assert len(ctx.summary) == 1 and ctx.summary[0].metadata["conversation_id"] == "conv-ctx"
    assert [i.metadata["turn_index"] for i in ctx.turn] == [6, 7, 8]
    assert ctx.dropped == []
    assert ctx.prompt == render_prompt(ctx.sections())
    assert ctx.chars == len(ctx.prompt)
    assert "Bob" not in ctx.prompt  # another entity's memory never shows
    for heading in ("## Persona", "## Knowledge base", "## What you remember", "## Earlier in this conversation",
                    "## Recent turns"):
        assert heading in ctx.prompt
    data = ctx.to_dict()
    assert set(data["sections"]) == {"persona", "core", "faq", "memory", "summary", "related", "turn"}
    assert data["sections"]["core"] == []  # no entity: no person whose facts are always shown
    assert data["sections"]["memory"][0]["id"] == ctx.memory[0].id


@pytest.mark.parametrize("section", ["persona", "faq", "memory", "summary", "turn"])
def test_each_section_can_be_switched_off(make_chat, tmp_path, section):
    chat = make_chat(summary_every_n=2, **{f"enable_{section}": False}, **EVERY_CANDIDATE)
    populate(chat, tmp_path)
    ctx = chat.build_context("conv-ctx", "What does my cat eat?")
    off = {section, "related"} if section == "turn" else {section}  # related turns are turns too
    off.add("core")  # no entity: no person whose facts are always shown
    for name, items in ctx.sections().items():
        assert (len(items) == 0) == (name in off), name


def test_related_turns_can_be_switched_off_alone(make_chat, tmp_path):
    chat = make_chat(summary_every_n=2, enable_related_turns=False)
    populate(chat, tmp_path)
    ctx = chat.build_context("conv-ctx", "What does my cat eat?")
    assert ctx.related == [] and ctx.turn != []


def test_rag_disabled_touches_neither_store_nor_embedder(make_chat, tmp_path, local_embedder):
    chat = make_chat(rag_enabled=False)
    recorder = AccessRecorder(chat.store)
    quiet = ChatMemory(recorder, start_worker=False)
    recorder.arm()
    ctx = quiet.build_context("conv-any", "hello there", entity="alice")
    assert recorder.reads == []
    assert ctx.enabled is False and ctx.prompt == "" and all(not v for v in ctx.sections().values())
    with pytest.raises(ValidationError, match="user_message"):
        quiet.build_context("conv-any", "  ")
    quiet.close()


def test_message_is_embedded_once_and_persona_costs_no_chroma_read(make_chat, tmp_path, local_embedder):
    counting = CountingEmbedder(local_embedder)
    chat = make_chat(embedder=counting, summary_every_n=2, **EVERY_CANDIDATE)
    populate(chat, tmp_path)
    chat.build_context("conv-ctx", "warm-up message")  # builds the in-process indexes, caches the turns
    counting.queries.clear()
    documents = counting.documents
    calls = []
    col = chat.store.col
    recorder = AccessRecorder(col)
    chat.store.col = recorder
    recorder.arm()
    try:
        for message in ("What does my cat eat?", "When is the shop open?"):
            ctx = chat.build_context("conv-ctx", message)
            assert ctx.persona and ctx.faq and ctx.memory and ctx.summary and ctx.turn
            calls.append(list(counting.queries))
            counting.queries.clear()
    finally:
        chat.store.col = col
    assert calls == [["What does my cat eat?"], ["When is the shop open?"]]
    assert counting.documents == documents
    assert not {"get", "query"} & set(recorder.reads)


def test_budget_drops_whole_items_lowest_priority_first(make_chat, tmp_path):
    chat = make_chat(summary_every_n=2, turn_top_k=4, faq_top_k=3, memory_top_k=3, summary_top_k=2, **EVERY_CANDIDATE)
    populate(chat, tmp_path)
    full = chat.build_context("conv-ctx", "What does my cat eat?", entity="alice")
    assert full.dropped == [] and len(full.faq) == 3 and len(full.summary) == 2 and len(full.memory) == 3
    assert len(full.related) == 3
    # room for everything but the FAQ, the summaries, the related turns and the weakest memory
    keep = {"persona": full.persona, "turn": full.turn, "memory": full.memory[:2]}
    limit = len(render_prompt(keep)) + 5
    tight = make_chat_with_budget(chat, context_max_chars=limit).build_context(
        "conv-ctx", "What does my cat eat?", entity="alice")
    assert tight.chars <= limit and tight.chars == len(tight.prompt)
    assert [i.id for i in tight.persona] == [i.id for i in full.persona]
    assert [i.id for i in tight.turn] == [i.id for i in full.turn]
    assert [i.id for i in tight.memory] == [i.id for i in full.memory[:2]]
    assert tight.faq == [] and tight.summary == [] and tight.related == []
    sections = [d["section"] for d in tight.dropped]
    assert sections == ["faq"] * 3 + ["summary"] * 2 + ["related"] * 3 + ["memory"]
    assert tight.dropped[-1]["id"] == full.memory[2].id  # the lowest-scored memory went first
    faq_drops = [d["id"] for d in tight.dropped[:3]]
    by_similarity = sorted(full.faq, key=lambda i: i.scores["similarity"])
    assert faq_drops == [i.id for i in by_similarity]
    assert DROP_PRIORITY == ("persona", "core", "turn", "memory", "related", "summary", "faq")


def make_chat_with_budget(chat, **overrides):
    settings = chat.settings.model_copy(update=overrides)
    budgeted = ChatMemory(chat.store, settings, start_worker=False)
    return budgeted


def test_token_budget(make_chat, tmp_path):
    chat = make_chat(summary_every_n=2, faq_top_k=3, memory_top_k=3)
    populate(chat, tmp_path)
    counter = TokenCounter()
    full = make_chat_with_budget(chat, context_max_tokens=100000).build_context("conv-ctx", "What does my cat eat?")
    assert full.tokens == counter.count([full.prompt])[0]  # per-line counts add up to the prompt's
    limit = full.tokens // 2
    tight = make_chat_with_budget(chat, context_max_tokens=limit).build_context("conv-ctx", "What does my cat eat?")
    assert tight.tokens <= limit and tight.tokens == counter.count([tight.prompt])[0]
    assert tight.dropped and {d["reason"] for d in tight.dropped} == {"max_tokens"}
    assert tight.persona  # the persona stays
    assert make_chat_with_budget(chat).build_context("conv-ctx", "x").tokens is None  # off by default


def test_context_without_conversation_and_bad_input(make_chat, tmp_path):
    chat = make_chat(summary_every_n=2)
    populate(chat, tmp_path)
    ctx = chat.build_context(None, "What does my cat eat?")
    assert ctx.turn == [] and ctx.summary == [] and ctx.memory and ctx.persona
    with pytest.raises(ValidationError, match="conversation_id"):
        chat.build_context("not a conversation", "hi")
    with pytest.raises(ValidationError, match="entity"):
        chat.build_context(None, "hi", entity="")


# ---- remember -------------------------------------------------------------------------------------------------
def test_remember_records_creation_and_keeps_the_earliest(make_chat):
    chat = make_chat()
    first = chat.remember("Likes green tea", importance=2, tags=["drinks"], timestamp="2024-01-01T00:00:00+00:00")
    again = chat.remember("likes  GREEN tea", importance=4, tags=["tea"], timestamp="2024-06-01T00:00:00+00:00")
    assert again == first
    meta = chat.store.get_one(first).metadata
    assert meta["created_at"] == "2024-01-01T00:00:00+00:00"
    assert meta["timestamp"] == "2024-06-01T00:00:00+00:00"
    assert meta["importance"] == 4 and meta["tags"] == ["drinks", "tea"]
    scoped = chat.remember("Prefers mornings", entity="carol")
    assert chat.store.get_one(scoped).metadata["scope"] == "entity:carol"
    with pytest.raises(ValidationError, match="importance"):
        chat.remember("bad", importance=9)


# ---- access tracking --------------------------------------------------------------------------------------------
def test_access_tracking_persists_last_use(make_chat):
    now = [1_800_000_000.0]
    chat = make_chat(track_access=True, memory_top_k=1, clock=lambda: now[0])
    cat = chat.remember("The user's cat is called Miso.")
    chat.remember("The user drives a red bicycle.")
    chat.build_context(None, "what is my cat called?")
    chat.flush_access()
    assert chat.store.get_one(cat).metadata["last_used"] == now[0]
    others = [d for d in chat.store.get(type="memory") if d.id != cat]
    assert all("last_used" not in d.metadata for d in others)
    # a restart reads it back into the index
    again = open_store(chat.store.settings, embedder=chat.store.embedder, client=chat.store.client)
    assert memory_index(again).metadata(cat)["last_used"] == now[0]


def test_access_tracking_is_off_by_default(make_chat):
    chat = make_chat()
    cat = chat.remember("The user's cat is called Miso.")
    chat.build_context(None, "what is my cat called?")
    chat.flush_access()
    assert "last_used" not in chat.store.get_one(cat).metadata


def test_recency_from_last_use_changes_the_recency_part(make_chat):
    day = 86400.0
    chat = make_chat(track_access=True, recency_from="last_used", weight_recency=1.0, memory_top_k=1,
                     clock=lambda: 1_700_000_000.0 + 60 * day)
    old = chat.remember("The user's cat is called Miso.", timestamp=1_700_000_000.0)
    chat.build_context(None, "what is my cat called?")
    (hit,) = chat.store.retrieve_memories("what is my cat called?", now=1_700_000_000.0 + 60 * day, relevance=False)
    assert hit.id == old
    assert hit.recency_part == pytest.approx(1.0)  # used just now, though written 60 days ago


@pytest.mark.parametrize("weights", [ScoreWeights(recency_from="last_used"),
                                     ScoreWeights(0.2, 0.3, 0.9, 86400.0, "last_used")])
def test_last_use_ranking_is_exact(weights):
    rng = np.random.default_rng(7)
    n, d, now = 3000, 64, 1_800_000_000.0
    vectors = rng.standard_normal((n, d)).astype(np.float32)
    ids = [f"doc-{i:05d}" for i in range(n)]
    metas = [{"importance": int(rng.integers(1, 6)), "ts_epoch": now - float(rng.random() * 3e7), "scope": "global"}
             for _ in range(n)]
    index = MemoryIndex(d)
    index.upsert(ids, vectors, ["t"] * n, metas)
    used = {ids[i]: now - float(rng.random() * 1e5) for i in range(0, n, 3)}
    index.set_last_used(used)
    unit = ranking.normalize_rows(vectors)
    for _ in range(20):
        q = rng.standard_normal(d).astype(np.float32)
        sims = unit @ (q / np.linalg.norm(q))
        epochs = [used.get(i, m["ts_epoch"]) for i, m in zip(ids, metas)]
        totals = ranking.total_scores(sims, [m["importance"] for m in metas], epochs, now, weights)
        expected = [ids[j] for j in ranking.top_k_by_score(totals, ids, 5)]
        assert [h.id for h in index.search(MemoryQuery(q, 5, weights, now))] == expected


def test_related_turns_find_an_old_turn_outside_the_recent_window(make_chat):
    chat = make_chat(summary_every_n=1000, turn_top_k=4, related_turn_top_k=2)
    conv = chat.record_exchange(None, "I put my passport in the blue folder under the desk.",
                                "Noted: passport, blue folder, under the desk.").conversation_id
    for i in range(8):
        chat.record_exchange(conv, f"Let's plan dinner number {i}: pasta or soup?", f"Soup for dinner {i}.")
    ctx = chat.build_context(conv, "Where did I leave my passport?")
    recent = {i.id for i in ctx.turn}
    assert len(ctx.turn) == 4 and all("passport" not in i.text for i in ctx.turn)
    assert any("passport" in i.text.lower() for i in ctx.related)
    assert not recent & {i.id for i in ctx.related}
    assert {"score", "dense_part", "lexical_part"} <= set(ctx.related[0].scores)
    assert "## Earlier turns related to this message" in ctx.prompt
    # a new exchange is searchable at once (the index follows the conversation)
    chat.record_exchange(conv, "My passport number ends in 4471.", "Got it.")
    for i in range(3):
        chat.record_exchange(conv, f"What about dessert {i}?", "Fruit.")
    again = chat.build_context(conv, "what does my passport number end in?")
    assert any("4471" in i.text for i in again.related)


def test_the_summary_worker_survives_an_unexpected_error(make_chat, monkeypatch):
    chat = make_chat(summary_every_n=1)
    real = chat.summary_writer.read_window
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("sqlite3.OperationalError: database is locked")  # not a BrainError
        return real(*args, **kwargs)

    monkeypatch.setattr(chat.summary_writer, "read_window", flaky)
    conv = chat.record_exchange(None, "first", "one").conversation_id
    assert chat.wait_for_summaries(30)
    assert chat.health()["worker_running"] is True
    chat.record_exchange(conv, "second", "two")
    assert chat.wait_for_summaries(30)
    assert summaries_of(chat.store, conv)  # the worker went on and wrote the next window


def test_a_summary_whose_write_failed_once_is_written_on_retry(make_chat, monkeypatch):
    from brain.model.errors import StoreUnavailable

    # no worker: both windows are queued before the first runs (the jobs run in wait_for_summaries)
    chat = make_chat(summary_every_n=1, summary_backoff_seconds=0.05, start_worker=False)
    real = chat.summary_writer.write_summary
    failures = []

    def flaky(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise StoreUnavailable("chroma server restarting")
        return real(*args, **kwargs)

    monkeypatch.setattr(chat.summary_writer, "write_summary", flaky)
    conv = chat.record_exchange(None, "first", "one").conversation_id
    chat.record_exchange(conv, "second", "two")
    assert chat.wait_for_summaries(30)
    ranges = [s.metadata["turn_range"] for s in summaries_of(chat.store, conv)]
    assert failures and ranges == ["1-2", "3-4"]  # the failed window was not lost, and order kept
