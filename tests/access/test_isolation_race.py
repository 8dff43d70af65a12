"""Two entities starting one new conversation id at once: the conversation's owner is claimed once, in one
process (its writes are serialised) and across processes on one Chroma server (a claim record beside the
turn positions, :mod:`brain.store.positions`); the loser's turns are refused, never mixed in."""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

import brain
from brain.config import Settings
from brain.model.errors import ConversationOwned
from brain.store.follower import catch_up
from tests.http.test_serve_workers import WorkersServer, make_project

ALICE_TOKEN = "alice-token-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"


def two_processes(url: str, tmp_path):
    """Two Brains on one Chroma server and collection, each with its own feed writer, position claims and
    in-process state, following each other's writes only when asked (as two workers between polls)."""
    collection = f"race-{uuid.uuid4().hex[:12]}"

    def one(name: str):
        return brain.open(
            Settings(
                chroma_url=url,
                collection=collection,
                data_dir=tmp_path / name,
                feed_interval_seconds=3600,
                index_refresh_seconds=3600,
                mirror_enabled=False,
                summarizer="extractive",
            ),
            start_worker=False,
        )

    return one("a"), one("b")


@pytest.mark.server
def test_the_second_scope_is_refused_though_its_process_has_not_seen_the_first(chroma_server, tmp_path, local_embedder):
    first, second = two_processes(chroma_server, tmp_path)
    try:
        # the second process looked at the conversation while it was new: its turn cache says "no turns"
        assert second.store.conversation_turns("conv-race") == []
        first.chat.record_exchange("conv-race", "Alice here", "Hello Alice", entity="alice")
        with pytest.raises(ConversationOwned, match="belongs to scope 'entity:alice'"):
            second.chat.record_exchange("conv-race", "Bob here", "Hello Bob", entity="bob")
        catch_up(second.store)
        turns = second.store.conversation_turns("conv-race")
        assert [(t.text, t.metadata["scope"]) for t in turns] == [
            ("Alice here", "entity:alice"),
            ("Hello Alice", "entity:alice"),
        ]
        # the owner appends, from either process
        second.chat.record_exchange("conv-race", "Alice again", "Hi again", entity="alice")
        # forgetting Alice releases the id: then anyone may start a conversation under it
        first.forget_entity("alice")
        catch_up(second.store)
        second.chat.record_exchange("conv-race", "Bob now", "Hello Bob", entity="bob")
        assert {t.metadata["scope"] for t in first.store.conversation_turns("conv-race")} <= {"entity:bob"}
    finally:
        first.close()
        second.close()


def test_one_process_refuses_another_scope_on_a_conversation(embedded_store):
    from brain.features.chat import ChatMemory

    chat = ChatMemory(embedded_store, start_worker=False)
    try:
        chat.record_exchange("conv-one", "Alice here", "Hello", entity="alice")
        with pytest.raises(ConversationOwned):
            chat.record_exchange("conv-one", "Bob here", "Hello", entity="bob")
        with pytest.raises(ConversationOwned):  # nor global turns, through the store itself
            embedded_store.write_turns("conv-one", "anyone", "hello")
        assert {t.metadata["scope"] for t in embedded_store.conversation_turns("conv-one")} == {"entity:alice"}
    finally:
        chat.close()


@pytest.fixture
def workers(chroma_server, tmp_path):
    project, _ = make_project(tmp_path, chroma_server, 0.5)
    tokens = project / "config" / "api-tokens"
    tokens.write_text(f"alice {ALICE_TOKEN}\nbob {BOB_TOKEN}\n", encoding="utf-8")
    with open(project / ".env", "a") as env:
        env.write(f"BRAIN_API_TOKENS_FILE={tokens}\nBRAIN_SUMMARY_EVERY_N=1\nBRAIN_SUMMARIZER=extractive\n")
    server = WorkersServer(project, 2)
    try:
        server.wait_ready(2)
        yield server
    finally:
        server.stop()


@pytest.mark.server
@pytest.mark.stress
@pytest.mark.subprocess
def test_two_workers_racing_for_one_new_id_give_it_to_one_entity(workers):
    """Alice and Bob post their first exchange under one new id at the same moment, to two workers."""
    clients = {
        who: httpx.Client(
            base_url=workers.url,
            timeout=60,
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"Authorization": f"Bearer {token}", "Connection": "close"},
        )
        for who, token in (("alice", ALICE_TOKEN), ("bob", BOB_TOKEN))
    }
    try:
        for attempt in range(12):
            conversation = f"conv-race-{attempt}"
            answers: dict[str, httpx.Response] = {}
            start = threading.Barrier(2)

            def post(who: str, start=start, answers=answers, conversation=conversation, attempt=attempt) -> None:
                start.wait()
                answers[who] = clients[who].post(
                    "/v1/exchanges",
                    json={
                        "conversation_id": conversation,
                        "user_text": f"{who} says the word {who}word{attempt}",
                        "assistant_text": f"noted for {who}",
                    },
                )

            threads = [threading.Thread(target=post, args=(who,)) for who in clients]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            codes = sorted(answer.status_code for answer in answers.values())
            assert codes == [201, 404], {who: (a.status_code, a.text) for who, a in answers.items()}
            owner = next(who for who, a in answers.items() if a.status_code == 201)
            other = "bob" if owner == "alice" else "alice"
            sequence = str(answers[owner].json()["sequence"])
            turns = clients[owner].get(
                f"/v1/conversations/{conversation}/turns", headers={"X-Brain-Min-Sequence": sequence}
            )
            assert turns.status_code == 200, turns.text
            assert all(f"{owner}word" in t["text"] or t["text"] == f"noted for {owner}" for t in turns.json()["turns"])
            assert (
                clients[other]
                .get(f"/v1/conversations/{conversation}/turns", headers={"X-Brain-Min-Sequence": sequence})
                .status_code
                == 404
            )
            context = clients[owner].post(
                "/v1/context",
                json={"conversation_id": conversation, "user_message": "words"},
                headers={"X-Brain-Min-Sequence": sequence},
            )
            assert context.status_code == 200 and f"{other}word" not in context.text
    finally:
        for client in clients.values():
            client.close()


def test_an_exchange_without_an_entity_goes_on_in_the_conversations_scope(embedded_store):
    from brain.features.chat import ChatMemory

    chat = ChatMemory(embedded_store, start_worker=False)
    try:
        started = chat.record_exchange(None, "Alice here", "Hello", entity="alice")
        chat.record_exchange(started.conversation_id, "Thanks!", "You're welcome.")  # the library, no entity
        turns = embedded_store.conversation_turns(started.conversation_id)
        assert [t.metadata["scope"] for t in turns] == ["entity:alice"] * 4
    finally:
        chat.close()
