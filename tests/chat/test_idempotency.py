"""An exchange sent again with its idempotency key is stored once: the retry returns the first answer
and writes nothing, in one process, across processes on a Chroma server, and across `brain serve
--workers 2`."""

from __future__ import annotations

import uuid

import pytest

from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.model.errors import ValidationError
from tests.http.test_serve_workers import WorkersServer, fresh, make_project


def turns_of(store, conversation_id):
    return [(d.metadata["role"], d.text, d.metadata["turn_index"]) for d in store.conversation_turns(conversation_id)]


@pytest.fixture
def chat(store):
    memory = ChatMemory(store, start_worker=False)
    yield memory
    memory.close()


def test_a_repeated_key_returns_the_first_answer_and_writes_nothing(chat, store):
    first = chat.record_exchange(None, "Where did I park?", "Level 3, row F.", entity="alice", idempotency_key="k-1")
    before = store.count()
    again = chat.record_exchange(None, "Where did I park?", "Level 3, row F.", entity="alice", idempotency_key="k-1")
    assert store.count() == before
    assert again.replayed and not first.replayed
    assert {**again.to_dict(), "replayed": False} == first.to_dict()
    assert turns_of(store, first.conversation_id) == [("user", "Where did I park?", 1),
                                                      ("assistant", "Level 3, row F.", 2)]
    # into an existing conversation too
    second = chat.record_exchange(first.conversation_id, "And my keys?", "In your coat.", entity="alice",
                                  idempotency_key="k-2")
    for _ in range(3):
        assert chat.record_exchange(first.conversation_id, "And my keys?", "In your coat.", entity="alice",
                                    idempotency_key="k-2").user_turn_index == second.user_turn_index == 3
    assert len(turns_of(store, first.conversation_id)) == 4
    # without a key every call stores new turns, as before
    chat.record_exchange(first.conversation_id, "And my keys?", "In your coat.", entity="alice")
    assert len(turns_of(store, first.conversation_id)) == 6


def test_the_key_is_the_callers_own(chat, store):
    alice = chat.record_exchange(None, "Alice's secret", "noted", entity="alice", idempotency_key="shared")
    bob = chat.record_exchange(None, "Bob's words", "noted", entity="bob", idempotency_key="shared")
    assert not bob.replayed and bob.conversation_id != alice.conversation_id
    assert {d.text for d in store.get([bob.user_turn_id, bob.assistant_turn_id])} == {"Bob's words", "noted"}
    assert turns_of(store, alice.conversation_id)[0][1] == "Alice's secret"


def test_a_key_reused_for_another_exchange_is_refused(chat, store):
    first = chat.record_exchange(None, "one", "two", idempotency_key="k")
    before = store.count()
    with pytest.raises(ValidationError, match="idempotency key 'k' was used for another exchange") as refused:
        chat.record_exchange(None, "three", "four", idempotency_key="k")
    assert refused.value.problems[0].field == "idempotency_key"
    other = chat.record_exchange(None, "x", "y")
    with pytest.raises(ValidationError, match="another exchange"):
        chat.record_exchange(other.conversation_id, "one", "two", idempotency_key="k")
    for bad in ("", " ", "k\x00", "é", "x" * 256, 5):
        with pytest.raises(ValidationError, match="printable ASCII"):
            chat.record_exchange(None, "one", "two", idempotency_key=bad)
    assert store.count() == before + 2
    assert turns_of(store, first.conversation_id) == [("user", "one", 1), ("assistant", "two", 2)]


@pytest.mark.server
def test_a_retry_through_another_process_of_the_same_server_writes_nothing(chroma_server, tmp_path, local_embedder):
    """Two stores on one Chroma server, as two workers: each its own in-process state and locks."""
    from brain.config import Settings

    settings = Settings(data_dir=tmp_path / "data", chroma_url=chroma_server, collection=f"i-{uuid.uuid4().hex[:10]}",
                        mirror_enabled=False)
    with open_store(settings, embedder=local_embedder) as one, \
            open_store(settings.model_copy(update={"data_dir": tmp_path / "other"}), embedder=local_embedder) as two:
        first_chat, second_chat = ChatMemory(one, start_worker=False), ChatMemory(two, start_worker=False)
        try:
            first = first_chat.record_exchange(None, "hello", "hi there", entity="carol", idempotency_key="retry-1")
            again = second_chat.record_exchange(None, "hello", "hi there", entity="carol", idempotency_key="retry-1")
            assert again.replayed and again.conversation_id == first.conversation_id
            assert (again.user_turn_id, again.assistant_turn_id) == (first.user_turn_id, first.assistant_turn_id)
            assert one.count() == two.count() == 2
        finally:
            first_chat.close()
            second_chat.close()


def test_the_api_takes_the_key_as_a_header_or_in_the_body(live):
    body = {"user_text": "Book the table for eight", "assistant_text": "Booked for 8 pm.", "entity": "dana"}
    first = live.post("/v1/exchanges", json=body, headers={"Idempotency-Key": "req-1"})
    assert first.status_code == 201, first.text
    assert first.json()["replayed"] is False and first.json()["mirror_status"] == "ok"
    for retry in (live.post("/v1/exchanges", json=body, headers={"Idempotency-Key": "req-1"}),
                  live.post("/v1/exchanges", json={**body, "idempotency_key": "req-1"})):
        assert retry.status_code == 201
        assert {**retry.json(), "replayed": False} == first.json()
    conversation = first.json()["conversation_id"]
    turns = live.get(f"/v1/conversations/{conversation}/turns", params={"entity": "dana"}).json()["turns"]
    assert len(turns) == 2
    clash = live.post("/v1/exchanges", json={**body, "idempotency_key": "a"}, headers={"Idempotency-Key": "b"})
    assert clash.status_code == 422 and clash.json()["problems"][0]["field"] == "idempotency_key"
    bad = live.post("/v1/exchanges", json={**body, "idempotency_key": "tab\there"})
    assert bad.status_code == 422 and "idempotency_key" in bad.text


@pytest.mark.server
@pytest.mark.subprocess
def test_retries_across_two_workers_store_the_exchange_once(chroma_server, tmp_path):
    project, _ = make_project(tmp_path, chroma_server, 0.5)
    server = WorkersServer(project, 2)
    try:
        server.wait_ready(2)
        body = {"user_text": "Remind me to water the ferns", "assistant_text": "I will.", "entity": "erin"}
        with fresh(server.url) as client:
            answers = [client.post("/v1/exchanges", json=body, headers={"Idempotency-Key": "ferns-1"})
                       for _ in range(8)]
            assert all(a.status_code == 201 for a in answers), [a.text for a in answers]
            first = answers[0].json()
            assert not first["replayed"] and all(a.json()["replayed"] for a in answers[1:])
            def strip(a):
                return {k: v for k, v in a.json().items() if k not in ("replayed", "sequence")}
            assert all(strip(a) == strip(answers[0]) for a in answers)
            latest = max(a.json()["sequence"] for a in answers)
            for _ in range(6):  # whichever worker answers
                turns = client.get(f"/v1/conversations/{first['conversation_id']}/turns",
                                   params={"entity": "erin"}, headers={"X-Brain-Min-Sequence": str(latest)})
                assert turns.status_code == 200 and len(turns.json()["turns"]) == 2
    finally:
        server.stop()
