"""Memory formation: facts formed from a conversation by the summary worker, changed with history, never
silent when the model fails, refused whole when the answer breaks a rule, all or nothing across kill -9.

Real embedded Chroma, the real local embedder, and the Ollama test server answering from a script.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from brain.app.core import Brain, open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.features.mirror.sync import verify_mirror
from brain.model.errors import ConfigError, Conflict, NotFound, ValidationError
from brain.providers.summarizers import ExtractiveSummarizer
from brain.rules.formation import answer_schema
from brain.store import MemoryChange
from brain.store.history import apply_changes
from brain.store.write_intents import WriteIntentLog
from tests.conftest import ROOT

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
WAIT = 60


def formation_settings(tmp_path, url, **overrides) -> Settings:
    values = dict(
        data_dir=tmp_path / "data",
        ollama_host=url,
        summary_every_n=1,
        formation=True,
        formation_retries=0,
        summary_backoff_seconds=0.01,
        formation_timeout=10.0,
    )
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def make_chat(tmp_path, stub, local_embedder):
    """A ChatMemory with formation on over a fresh store; summaries are extractive, so every chat request
    the stub sees is formation's."""
    opened = []

    def factory(start_worker=True, **overrides):
        settings = formation_settings(tmp_path, stub.url, **overrides)
        store = open_store(settings, embedder=local_embedder)
        chat = ChatMemory(store, settings, summarizer=ExtractiveSummarizer(), start_worker=start_worker)
        opened.append((chat, store))
        return chat

    yield factory
    for chat, store in opened:
        chat.close(timeout=5)
        store.close()


def fact(text, turns, *, importance=3, entity="alice", action="add", target=None, **more):
    return {
        "text": text,
        "importance": importance,
        "tags": more.pop("tags", []),
        "entity": entity,
        "action": action,
        "target": target,
        "turns": turns,
        **more,
    }


def answer(*facts) -> str:
    return json.dumps({"facts": list(facts)})


def request_text(body) -> str:
    """The user message formation sent (the turns and the known memories)."""
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def exchange(chat, user, assistant, *, conversation=None, at=T0, entity="alice"):
    return chat.record_exchange(conversation, user, assistant, entity=entity, timestamp=at)


def memories(store):
    return {d.text: d for d in store.get(type="memory")}


# ---- formed, ranked, changed ------------------------------------------------------------------------------
def test_a_fact_is_formed_by_the_worker_and_ranked(make_chat, stub):
    chat = make_chat()
    said = answer(fact("Alice is allergic to peanuts", [1], importance=5, tags=["health"]))
    stub.chat_script = [said]
    ex = exchange(chat, "By the way, I'm allergic to peanuts.", "Noted: no peanuts for you.")
    assert chat.wait_for_summaries(timeout=WAIT)

    [sent] = stub.chat_requests()
    # the schema holds the request's own rules: alice's facts only, the window's turns, no known memory to name
    assert sent.body["format"] == answer_schema(entity="alice", turn_indices={1, 2}, candidate_keys=[])
    assert "allergic to peanuts" in request_text(sent.body)
    formed = memories(chat.store)["Alice is allergic to peanuts"].metadata
    assert formed["source"] == "chat" and formed["conversation_id"] == ex.conversation_id
    assert formed["scope"] == "entity:alice" and formed["importance"] == 5 and formed["tags"] == ["health"]
    assert formed["source_turns"] == [ex.user_turn_id]
    assert formed["valid_from"] == T0.isoformat()  # the fact's last turn's time: conversation time

    hits = chat.store.retrieve_memories("What is Alice allergic to?", entity="alice", relevance=False)
    assert hits[0].text == "Alice is allergic to peanuts"
    context = chat.build_context(ex.conversation_id, "Can I have a peanut butter sandwich?", entity="alice")
    assert "Alice is allergic to peanuts" in [item.text for item in context.memory]
    assert chat.store.retrieve_memories("What is Alice allergic to?", entity="bob", k=5, relevance=False) == []

    [batch] = chat.formation_batches(ex.conversation_id)
    assert (batch.status, batch.turn_range, batch.facts, batch.attempts, batch.error) == ("done", "1-2", 1, 1, None)
    assert batch.eval_tokens == len(said.split())  # the stub counts an answer's words as its tokens
    assert batch.prompt_tokens > 0
    health = chat.health()["formation"]
    assert health["enabled"] and health["done"] == 1 and health["pending"] == health["failed"] == 0
    assert health["eval_tokens"] == batch.eval_tokens


def test_a_contradiction_supersedes_with_history_and_as_of_answers_the_old_fact(make_chat, stub):
    chat = make_chat()
    stub.chat_script = [answer(fact("Alice lives in Paris", [1], importance=4))]
    first = exchange(chat, "I live in Paris.", "Paris is lovely.")
    assert chat.wait_for_summaries(timeout=WAIT)
    moved_at = T0 + timedelta(days=30)

    def contradict(body):
        known = request_text(body)
        assert "M1" in known and "Alice lives in Paris" in known  # the current memory, under its short key
        return answer(fact("Alice lives in Berlin", [3], importance=4, action="update", target="M1"))

    stub.chat_script = [contradict]
    second = exchange(
        chat, "I moved to Berlin last week.", "Welcome to Berlin!", conversation=first.conversation_id, at=moved_at
    )
    assert chat.wait_for_summaries(timeout=WAIT)
    assert stub.chat_script == []

    stored = memories(chat.store)
    paris, berlin = stored["Alice lives in Paris"], stored["Alice lives in Berlin"]
    assert paris.metadata["status"] == "superseded" and paris.metadata["superseded_by"] == berlin.id
    assert paris.metadata["valid_until"] == moved_at.isoformat()
    assert berlin.metadata["supersedes"] == paris.id and berlin.metadata["change"] == "update"
    assert berlin.metadata["source_turns"] == [second.user_turn_id]
    assert [d.text for d in chat.store.history(berlin.id)] == ["Alice lives in Paris", "Alice lives in Berlin"]

    now = [h.text for h in chat.store.retrieve_memories("Where does Alice live?", entity="alice", relevance=False)]
    assert now[0] == "Alice lives in Berlin" and "Alice lives in Paris" not in now
    then = [
        h.text
        for h in chat.store.retrieve_memories(
            "Where does Alice live?", entity="alice", as_of=T0 + timedelta(days=1), relevance=False
        )
    ]
    assert then[0] == "Alice lives in Paris" and "Alice lives in Berlin" not in then
    assert [b.status for b in chat.formation_batches(first.conversation_id)] == ["done", "done"]


def test_an_expired_formed_fact_stops_ranking(make_chat, stub):
    chat = make_chat()
    exam_ends = T0 + timedelta(days=1, hours=15)
    stub.chat_script = [
        answer(fact("Alice has her chemistry exam tomorrow", [1], importance=4, expires_at=exam_ends.isoformat()))
    ]
    exchange(chat, "My chemistry exam is tomorrow!", "Good luck with the exam.")
    assert chat.wait_for_summaries(timeout=WAIT)

    formed = memories(chat.store)["Alice has her chemistry exam tomorrow"]
    assert formed.metadata["expires_at"] == exam_ends.isoformat()
    before = chat.store.retrieve_memories(
        "When is Alice's exam?", entity="alice", now=T0 + timedelta(hours=2), relevance=False
    )
    assert [h.text for h in before][:1] == ["Alice has her chemistry exam tomorrow"]
    assert (
        chat.store.retrieve_memories(
            "When is Alice's exam?", entity="alice", now=exam_ends + timedelta(minutes=1), relevance=False
        )
        == []
    )
    assert (
        chat.store.retrieve_memories("When is Alice's exam?", entity="alice", relevance=False) == []
    )  # today is long after


def test_a_fact_already_known_merges_instead_of_repeating(make_chat, stub):
    chat = make_chat()
    known = chat.remember("Alice likes green tea", entity="alice", importance=2, tags=["drinks"])
    stub.chat_script = [answer(fact("alice likes  GREEN tea", [1], importance=4, tags=["taste"]))]
    ex = exchange(chat, "I do love green tea.", "Green tea it is.")
    assert chat.wait_for_summaries(timeout=WAIT)
    [only] = chat.store.get(type="memory")
    assert only.id == known and only.text == "Alice likes green tea"
    assert only.metadata["importance"] == 4 and only.metadata["tags"] == ["drinks", "taste"]
    assert only.metadata["source_turns"] == [ex.user_turn_id]
    stub.chat_script = [answer(fact("Alice likes green tea", [1], importance=3))]
    report = chat.extract_memories(ex.conversation_id, again=True)  # the same answer again converges
    assert (report.done, report.added, report.merged) == (1, 0, 1)
    assert [d.id for d in chat.store.get(type="memory")] == [known]


# ---- the chat request never waits for the model --------------------------------------------------------
def test_the_chat_request_path_never_calls_the_model(make_chat, stub):
    chat = make_chat()
    release = threading.Event()

    def hung(body):
        release.wait(30)
        return answer(fact("Alice plays the cello", [1]))

    stub.chat_script = [hung]
    started = time.monotonic()
    first = exchange(chat, "I play the cello.", "Lovely instrument.")
    deadline = time.monotonic() + WAIT
    while not stub.chat_requests() and time.monotonic() < deadline:  # the worker is now waiting on the model
        time.sleep(0.02)
    assert len(stub.chat_requests()) == 1
    exchange(chat, "Also, I have a cat.", "Cats are great.", conversation=first.conversation_id)
    context = chat.build_context(first.conversation_id, "What do I play?", entity="alice")
    assert time.monotonic() - started < 5 and context is not None
    assert len(stub.chat_requests()) == 1  # neither the exchange nor the context asked the model
    assert chat.formation_batches(first.conversation_id, status="pending")
    release.set()
    stub.chat_script = [answer()]
    assert chat.wait_for_summaries(timeout=WAIT)
    assert "Alice plays the cello" in memories(chat.store)
    assert [b.status for b in chat.formation_batches(first.conversation_id)] == ["done", "done"]


# ---- never silent -----------------------------------------------------------------------------------------
def test_broken_json_is_repaired_by_one_repair_request(make_chat, stub):
    chat = make_chat()
    broken = '{"facts": [{"text": "Alice speaks Dutch", "importance": 3,'
    good = answer(fact("Alice speaks Dutch", [1]))
    stub.chat_script = [broken, good]
    ex = exchange(chat, "I speak Dutch fluently.", "Goed zo!")
    assert chat.wait_for_summaries(timeout=WAIT)

    first, repair = stub.chat_requests()
    assert repair.body["messages"][: len(first.body["messages"])] == first.body["messages"]
    assert repair.body["messages"][-2] == {"role": "assistant", "content": broken}
    assert "not JSON" in repair.body["messages"][-1]["content"]
    assert "Alice speaks Dutch" in memories(chat.store)
    [batch] = chat.formation_batches(ex.conversation_id)
    assert (batch.status, batch.attempts) == ("done", 1)
    assert batch.eval_tokens == len(broken.split()) + len(good.split())  # both calls counted


def test_a_failing_batch_is_visible_then_runs_again(make_chat, stub):
    chat = make_chat(formation_retries=1)
    stub.chat_script = [500, "no JSON here", "still none"]  # attempt 1: server error; attempt 2: garbage, repair too
    ex = exchange(chat, "I work as a nurse.", "That is a demanding job.")
    assert chat.wait_for_summaries(timeout=WAIT)

    assert memories(chat.store) == {}
    [batch] = chat.formation_batches(ex.conversation_id)
    assert (batch.status, batch.attempts, batch.facts) == ("failed", 2, 0)
    assert "not JSON" in batch.error
    assert [b.turn_range for b in chat.formation_batches(status="failed")] == ["1-2"]
    assert chat.formation_batches(status=["pending", "done"]) == []
    with pytest.raises(ValidationError, match="status must be one of pending, done, failed"):
        chat.formation_batches(status="stuck")
    health = chat.health()["formation"]
    assert (health["failed"], health["done"], health["pending"]) == (1, 0, 0)
    assert health["last_error"] == batch.error
    report = Brain(chat.store, chat=chat).health()
    assert report["formation"]["failed"] == 1 and "formation" not in report["summariser"]
    assert report["status"] == "ok"  # shown, waiting to be run again: reads and writes are unaffected

    stub.chat_script = [answer(fact("Alice works as a nurse", [1], importance=4))]
    report = chat.extract_memories(ex.conversation_id)
    assert (report.done, report.failed, report.added) == (1, 0, 1)
    assert report.eval_tokens > 0 and report.batches[0].status == "done"
    [batch] = chat.formation_batches(ex.conversation_id)
    assert (batch.status, batch.attempts, batch.error) == ("done", 3, None)
    assert "Alice works as a nurse" in memories(chat.store)
    assert chat.extract_memories(ex.conversation_id).batches == []  # nothing left to run
    assert len(stub.chat_requests()) == 4


def test_windows_wait_for_an_unreachable_model_and_run_when_it_answers(make_chat, stub):
    """A window that found the model unreachable through every attempt stays pending; the windows queued
    behind it wait without asking it (the summaries are not held up); when a later window is formed, the
    waiting ones run."""
    chat = make_chat(summary_cooldown_seconds=300)
    stub.chat_script = [500]
    first = exchange(chat, "I work as a nurse.", "That is a demanding job.")
    assert chat.wait_for_summaries(timeout=WAIT)
    cid = first.conversation_id
    exchange(chat, "I live in Lyon.", "A lovely city.", conversation=cid)
    assert chat.wait_for_summaries(timeout=WAIT)

    assert len(stub.chat_requests()) == 1  # the second window never asked
    batches = chat.formation_batches(cid)
    assert [(b.turn_range, b.status, b.attempts) for b in batches] == [("1-2", "pending", 1), ("3-4", "pending", 0)]
    assert "failed (500)" in batches[0].error and "not asked: the model was unreachable" in batches[1].error
    assert len(chat.store.conversation_summaries(cid)) == 2  # the summaries did not wait
    assert chat.health()["formation"]["pending"] == 2

    chat.formation._down_until = 0.0  # the cooldown is over: the next window asks the model
    stub.chat_script = [
        answer(fact("Alice plays the cello", [5])),
        answer(fact("Alice works as a nurse", [1])),
        answer(fact("Alice lives in Lyon", [3])),
    ]
    exchange(chat, "I play the cello.", "Lovely.", conversation=cid)
    assert chat.wait_for_summaries(timeout=WAIT)
    assert [(b.turn_range, b.status, b.error) for b in chat.formation_batches(cid)] == [
        ("1-2", "done", None),
        ("3-4", "done", None),
        ("5-6", "done", None),
    ]
    assert {"Alice works as a nurse", "Alice lives in Lyon", "Alice plays the cello"} <= set(memories(chat.store))


@pytest.mark.parametrize(
    "bad, problem",
    [
        (fact("Bob lives in Oslo", [1], entity="bob"), "entity 'bob' is refused"),
        (fact("Alice lives in Rome", [1], action="update", target="M7"), "target 'M7' is not a listed memory"),
        (fact("Alice is a pilot", [1], importance=9), "importance"),
    ],
    ids=["another-entity", "unknown-key", "importance-9"],
)
def test_an_answer_breaking_a_rule_is_refused_whole(make_chat, stub, bad, problem):
    chat = make_chat()
    refused = answer(fact("Alice has two sisters", [1]), bad)
    stub.chat_script = [refused, refused]  # the repair answers the same
    ex = exchange(chat, "I have two sisters and I fly planes.", "Quite a family!")
    assert chat.wait_for_summaries(timeout=WAIT)

    assert chat.store.get(type="memory") == []  # not even the good fact
    [batch] = chat.formation_batches(ex.conversation_id)
    assert batch.status == "failed" and problem in batch.error
    assert len(stub.chat_requests()) == 2


def test_a_target_superseded_meanwhile_fails_the_attempt_and_the_next_asks_again(make_chat, stub):
    chat = make_chat(formation_retries=1)
    old = chat.remember("Alice lives in Paris", entity="alice", timestamp=T0 - timedelta(days=9))

    def update_then_someone_else_does(body):
        chat.store.supersede(old, "Alice lives in Lyon", entity="alice", at=T0 - timedelta(days=1))
        return answer(fact("Alice lives in Berlin", [1], action="update", target="M1"))

    def asked_again(body):
        assert "Alice lives in Lyon" in request_text(body) and "Alice lives in Paris" not in request_text(body)
        return answer(fact("Alice lives in Berlin", [1], action="update", target="M1"))

    stub.chat_script = [update_then_someone_else_does, asked_again]
    exchange(chat, "I live in Berlin now.", "Noted.")
    assert chat.wait_for_summaries(timeout=WAIT)
    assert stub.chat_script == []
    lyon = memories(chat.store)["Alice lives in Lyon"]
    assert [d.text for d in chat.store.history(old)] == [
        "Alice lives in Paris",
        "Alice lives in Lyon",
        "Alice lives in Berlin",
    ]
    assert lyon.metadata["superseded_by"] == memories(chat.store)["Alice lives in Berlin"].id
    [batch] = chat.formation_batches()
    assert (batch.status, batch.attempts) == ("done", 2)


def test_a_change_is_never_dated_before_the_memory_it_changes(make_chat, stub):
    chat = make_chat()
    old = chat.remember("Alice lives in Paris", entity="alice")  # today: after the conversation's own time
    stub.chat_script = [answer(fact("Alice lives in Berlin", [1], action="update", target="M1"))]
    exchange(chat, "I live in Berlin.", "Noted.")  # recorded at T0, months ago
    assert chat.wait_for_summaries(timeout=WAIT)
    paris = chat.store.get_one(old).metadata
    assert paris["status"] == "superseded" and paris["valid_until"] == paris["created_at"]
    assert [b.status for b in chat.formation_batches()] == ["done"]


def test_with_formation_off_nothing_is_scheduled_and_extract_says_why(make_chat, stub):
    chat = make_chat(formation=False)
    ex = exchange(chat, "I live in Paris.", "Nice.")
    assert chat.wait_for_summaries(timeout=WAIT)
    assert stub.chat_requests() == [] and chat.formation_batches() == []
    assert "formation" not in chat.store.conversation_summaries(ex.conversation_id)[0].metadata
    health = chat.health()["formation"]
    assert health["enabled"] is False and "BRAIN_FORMATION" in health["off_reason"]
    with pytest.raises(ConfigError, match="BRAIN_FORMATION"):
        chat.extract_memories()
    off = make_chat(summarizer="extractive")
    assert off.health()["formation"]["enabled"] is False
    assert "BRAIN_SUMMARIZER" in off.health()["formation"]["off_reason"]


def test_windows_summarised_before_formation_was_on_are_extracted_on_request(make_chat, stub, tmp_path):
    chat = make_chat(formation=False)
    ex = exchange(chat, "I was born in Porto.", "A beautiful city.")
    assert chat.wait_for_summaries(timeout=WAIT)
    chat.close()
    chat.store.close()
    on = make_chat()
    assert on.formation_batches() == []
    stub.chat_script = [answer(fact("Alice was born in Porto", [1]))]
    report = on.extract_memories(ex.conversation_id)
    assert (report.done, report.added) == (1, 1)
    assert [b.status for b in on.formation_batches(ex.conversation_id)] == ["done"]


def test_resummarising_a_fallback_keeps_the_formation_state(make_chat, stub):
    chat = make_chat()
    stub.chat_script = [answer(fact("Alice knits scarves", [1]))]
    ex = exchange(chat, "I knit scarves in winter.", "Cosy!")
    assert chat.wait_for_summaries(timeout=WAIT)
    [summary] = chat.store.conversation_summaries(ex.conversation_id)
    assert summary.metadata["fallback"] is False  # extractive is this chat's model summariser
    kept = {
        k: v
        for k, v in summary.metadata.items()
        if k not in ("type", "ts_epoch", "fallback", "source", "conversation_id", "timestamp")
    }
    chat.store.upsert_summary(
        ex.conversation_id,
        summary.text,
        id=summary.id,
        fallback=True,
        source="system",
        timestamp=summary.metadata["timestamp"],
        **kept,
    )
    before = {k: v for k, v in chat.store.get_one(summary.id).metadata.items() if k.startswith("formation")}
    assert before["formation"] == "done" and before["formation_facts"] == 1
    assert chat.resummarize_fallbacks(ex.conversation_id) == 1
    after = chat.store.get_one(summary.id).metadata
    assert after["fallback"] is False
    assert {k: v for k, v in after.items() if k.startswith("formation")} == before


# ---- the store's one write ---------------------------------------------------------------------------------
def test_apply_changes_refuses_a_batch_whole(embedded_store):
    store = embedded_store
    paris = store.upsert_memory("Alice lives in Paris", entity="alice")
    bobs = store.upsert_memory("Bob lives in Oslo", entity="bob")
    store.supersede(paris, "Alice lives in Lyon", entity="alice")
    before = {d.id: d.metadata for d in store.get(type="memory")}
    cases = [
        ([MemoryChange("add", "Alice sings"), MemoryChange("update", "Alice lives in Rome", target=paris)], Conflict),
        ([MemoryChange("add", "Alice sings"), MemoryChange("same", "Bob lives in Oslo", target=bobs)], ValidationError),
        (
            [MemoryChange("add", "Alice sings"), MemoryChange("update", "Alice lives in Rome", target="doc-nope")],
            NotFound,
        ),
        ([MemoryChange("add", "Alice sings"), MemoryChange("add", "Alice sings", importance=9)], ValidationError),
        (
            [MemoryChange("update", "Alice sings", target=paris), MemoryChange("same", "x", target=paris)],
            ValidationError,
        ),
    ]
    for changes, error in cases:
        with pytest.raises(error):
            apply_changes(store, changes, scope="entity:alice")
        assert {d.id: d.metadata for d in store.get(type="memory")} == before


def test_apply_changes_writes_memories_and_the_record_as_one_write(embedded_store):
    store = embedded_store
    old = store.upsert_memory("Alice lives in Paris", entity="alice", created_at=T0)
    summary = store.upsert_summary(
        "conv-1", "Alice moved.", turn_range="1-2", summary_index=1, formation="pending", scope="entity:alice"
    )
    before = store.get_one(summary).metadata
    done = apply_changes(
        store,
        [
            MemoryChange("contradict", "Alice lives in Berlin", target=old, at=T0 + timedelta(days=3)),
            MemoryChange("add", "Alice has a dog", at=T0, source_turns=("t-1",)),
        ],
        scope="entity:alice",
        conversation_id="conv-1",
        with_docs=[
            {
                "id": summary,
                "text": "Alice moved.",
                "type": "summary",
                "conversation_id": "conv-1",
                "turn_range": "1-2",
                "summary_index": 1,
                "scope": "entity:alice",
                "formation": "done",
            }
        ],
    )
    assert done.actions == ("contradict", "add") and done.count("add") == 1
    assert before["formation"] == "pending" and store.get_one(summary).metadata["formation"] == "done"
    stored = memories(store)
    assert stored["Alice has a dog"].metadata["source_turns"] == ["t-1"]
    assert stored["Alice lives in Paris"].metadata["superseded_by"] == done.ids[0] == stored["Alice lives in Berlin"].id


# ---- the chain rule, through formation's write, as a property ------------------------------------------------

_RUN = iter(range(10**6))
_BATCHES = st.lists(
    st.tuples(
        st.sampled_from(["alice", "bob", None]),  # whose conversation the batch is from
        st.lists(
            st.tuples(st.sampled_from(["add", "again", "same", "update", "contradict", "cross"]), st.integers(0, 50)),
            min_size=1,
            max_size=4,
        ),
    ),
    min_size=1,
    max_size=6,
)


@hypothesis_settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=_BATCHES)
def test_any_sequence_of_formed_batches_keeps_the_chain_rule(embedded_store, batches):
    """Batches of add / the same text again / same / update / contradict / a target of another entity, applied
    as formation applies them: each batch is all or nothing, every chain keeps exactly one current memory, all
    in one scope, and no text is lost."""
    store = embedded_store
    run = next(_RUN)
    names = {"alice": f"alice{run}", "bob": f"bob{run}", None: None}
    chains: dict[str, list[tuple[str, str]]] = {}  # first id -> [(id, text)], oldest first
    owner: dict[str, str] = {}  # first id -> scope
    for n, (who, ops) in enumerate(batches):
        scope = "global" if names[who] is None else f"entity:{names[who]}"
        heads = {links[-1][0]: first for first, links in chains.items() if owner[first] == scope}
        others = [links[-1][0] for first, links in chains.items() if owner[first] != scope]
        changes, free = [], sorted(heads)
        for i, (op, pick) in enumerate(ops):
            if op in ("same", "update", "contradict", "again") and free:
                target = free.pop(pick % len(free))
                text = dict(chains[heads[target]])[target]
                if op == "again":
                    changes.append(MemoryChange("add", text.upper()))  # a current memory's text: merges into it
                else:
                    changes.append(
                        MemoryChange(op, text if op == "same" else f"fact {run}.{n}.{i} ({op})", target=target)
                    )
            elif op == "cross" and others:
                changes.append(
                    MemoryChange("update", f"fact {run}.{n}.{i} from elsewhere", target=others[pick % len(others)])
                )
            else:
                changes.append(MemoryChange("add", f"fact {run}.{n}.{i} of {who or 'everyone'}"))
        before = {(d.id, d.text, json.dumps(d.metadata, sort_keys=True)) for d in store.get(type="memory")}
        try:
            done = apply_changes(store, changes, scope=scope)
        except (ValidationError, NotFound):
            assert any(c.target in others for c in changes)  # only a target of another scope is refused here
            after = {(d.id, d.text, json.dumps(d.metadata, sort_keys=True)) for d in store.get(type="memory")}
            assert after == before  # nothing of a refused batch
            continue
        for change, doc_id, action in zip(changes, done.ids, done.actions):
            if action == "add":
                chains[doc_id], owner[doc_id] = [(doc_id, change.text)], scope
            elif action in ("update", "contradict"):
                chains[heads[change.target]].append((doc_id, change.text))
            else:
                assert doc_id in heads  # merged into a current memory of this scope
    for first, links in chains.items():
        history = store.history(links[-1][0])
        assert [(d.id, d.text) for d in history] == links  # every text kept, in order
        assert sum("status" not in d.metadata for d in history) == 1 and "status" not in history[-1].metadata
        assert {d.metadata["scope"] for d in history} == {owner[first]}
    mine = {f"entity:{names['alice']}", f"entity:{names['bob']}"}  # this example's; the store is shared by all
    stored = {
        d.id
        for d in store.get(type="memory")
        if d.metadata["scope"] in mine or d.text.casefold().startswith(f"fact {run}.")
    }
    assert stored == {i for links in chains.values() for i, _ in links}


# ---- killed in the middle -----------------------------------------------------------------------------------

# A batch whose write (the old memory retired, its successor, a new memory, the summary marked done) takes one
# Chroma call per document (max batch 1); the call number argv[3] is followed by a pause, so the kill lands there.
FORMER = textwrap.dedent("""
    import sys, time
    from brain.app.core import Brain, open_store
    from brain.config import Settings
    from brain.features.chat import ChatMemory, formation
    from brain.providers.summarizers import ExtractiveSummarizer

    settings = Settings(data_dir=sys.argv[1], ollama_host=sys.argv[2], summary_every_n=1, formation=True,
                        formation_retries=0, formation_timeout=30)
    store = open_store(settings)
    old_id = store.upsert_memory("Alice lives in Paris", entity="alice", importance=4,
                                 created_at="2026-01-01T00:00:00+00:00")
    chat = ChatMemory(store, settings, summarizer=ExtractiveSummarizer(), start_worker=False)
    ex = chat.record_exchange(None, "I moved to Berlin.", "Welcome to Berlin!", entity="alice",
                              timestamp="2026-02-01T00:00:00+00:00")
    armed = []
    real_upsert, real_apply = store.col.upsert, formation.apply_changes
    def paused(*args, **kwargs):
        result = real_upsert(*args, **kwargs)
        if armed:
            armed.append(True)
            print("chroma call", flush=True)
            if len(armed) > int(sys.argv[3]):
                time.sleep(30)
        return result
    def apply(*args, **kwargs):
        armed.append(True)
        store.chroma.max_batch_size = 1
        return real_apply(*args, **kwargs)
    store.col.upsert = paused
    formation.apply_changes = apply
    print(old_id, ex.conversation_id, flush=True)
    chat.wait_for_summaries()
    print("done", flush=True)
""")

MOVE = answer(
    fact("Alice lives in Berlin", [1], importance=4, action="contradict", target="M1"),
    fact("Alice has a new flat", [1]),
)


@pytest.mark.subprocess
@pytest.mark.parametrize("calls", [1, 3], ids=["after-the-first-document", "before-the-summary"])
def test_a_process_killed_mid_formation_leaves_none_of_it_and_the_batch_pending(tmp_path, stub, local_embedder, calls):
    script = tmp_path / "former.py"
    script.write_text(FORMER)
    data_dir = tmp_path / "data"
    stub.chat_script = [MOVE]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(data_dir), stub.url, str(calls)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline().split()
        assert len(line) == 2 and line[0].startswith("doc-"), proc.stderr.read()[-3000:]
        old_id, conversation = line
        for _ in range(calls):
            assert proc.stdout.readline().strip() == "chroma call", proc.stderr.read()[-3000:]
    finally:
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    assert "done" not in out

    settings = formation_settings(tmp_path, stub.url)
    with open_store(settings, embedder=local_embedder) as store:  # the open rolls the unfinished write back
        assert WriteIntentLog(data_dir).pending() == []
        [only] = store.get(type="memory")
        assert (only.id, only.text) == (old_id, "Alice lives in Paris")
        assert not {"status", "superseded_by", "valid_until"} & set(only.metadata)
        [summary] = store.conversation_summaries(conversation)
        assert summary.metadata["formation"] == "pending"
        assert verify_mirror(store, store.mirror).ok

        stub.chat_script = [MOVE]
        with ChatMemory(store, settings, summarizer=ExtractiveSummarizer()) as chat:  # its worker takes it up
            assert chat.wait_for_summaries(timeout=WAIT)
            [batch] = chat.formation_batches(conversation)
            assert batch.status == "done"
        assert [d.text for d in store.history(old_id)] == ["Alice lives in Paris", "Alice lives in Berlin"]
        assert "Alice has a new flat" in memories(store)
        assert verify_mirror(store, store.mirror).ok
