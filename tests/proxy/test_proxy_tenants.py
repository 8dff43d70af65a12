"""One entity's use of the proxy never reaches another's: a conversation id one names is never the other's
conversation (it cannot take it, learn whether it is taken, or make the other wait on it), and a client's own
exchanges are found again however fast it sends the next message."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.proxy.conftest import ADMIN, TOKENS, serve_proxy, wait_for
from tests.proxy.openai_stub import MODEL, OpenAIStub, reply_to

LONG = " ".join(f"word{i}" for i in range(40))


def chat(server, token: str, content: str, *, conversation: str | None = None, history=(), **body) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if conversation is not None:
        headers["X-Brain-Conversation"] = conversation
    messages = [*history, {"role": "user", "content": content}]
    return httpx.post(server.url + "/v1/chat/completions", headers=headers, timeout=60,
                      json={"model": MODEL, "messages": messages, **body})


def turns(server, token: str, conversation_id: str) -> httpx.Response:
    return httpx.get(f"{server.url}/v1/conversations/{conversation_id}/turns",
                     headers={"Authorization": f"Bearer {token}"}, timeout=30)


def recorded(server, token: str, conversation_id: str) -> list[str]:
    response = turns(server, token, conversation_id)
    return [t["text"] for t in response.json()["turns"]] if response.status_code == 200 else []


def test_a_squatted_id_still_records_the_owners_exchanges(proxy, upstream):
    squat = chat(proxy, TOKENS["alice"], "I was here first", conversation="conv-bob-1")
    assert squat.status_code == 200
    wait_for(lambda: len(recorded(proxy, TOKENS["alice"], squat.headers["x-brain-conversation"])) == 2)
    answer = chat(proxy, TOKENS["bob"], "My dog is called Rex", conversation="conv-bob-1")
    assert answer.status_code == 200
    bobs = answer.headers["x-brain-conversation"]
    wait_for(lambda: recorded(proxy, TOKENS["bob"], bobs) == ["My dog is called Rex", reply_to("My dog is called Rex")])
    again = chat(proxy, TOKENS["bob"], "What is my dog called?", conversation="conv-bob-1")
    assert again.headers["x-brain-conversation"] == bobs  # the same id names bob's conversation each time
    assert "My dog is called Rex" in upstream.chats()[-1].said  # bob's own recorded turns
    assert "I was here first" not in upstream.chats()[-1].body_text


def test_whether_another_entity_uses_an_id_cannot_be_learned(proxy):
    bobs = chat(proxy, TOKENS["bob"], "hello", conversation="conv-bob-2")
    wait_for(lambda: len(recorded(proxy, TOKENS["bob"], bobs.headers["x-brain-conversation"])) == 2)
    statuses = {}
    for probe in (bobs.headers["x-brain-conversation"], "conv-bob-2", "conv-nobody-uses-this"):
        answer = chat(proxy, TOKENS["alice"], "probe", conversation=probe)
        alices = answer.headers["x-brain-conversation"]
        wait_for(lambda: len(recorded(proxy, TOKENS["alice"], alices)) == 2)  # noqa: B023
        statuses[probe] = (answer.status_code, turns(proxy, TOKENS["alice"], probe).status_code)
    assert len(set(statuses.values())) == 1, statuses
    assert recorded(proxy, TOKENS["bob"], bobs.headers["x-brain-conversation"]) == ["hello", reply_to("hello")]


@pytest.mark.slow
def test_another_entitys_slow_answer_never_makes_one_wait(proxy_store):
    with OpenAIStub(chunk_delay=0.1) as slow, serve_proxy(proxy_store, slow, chat_upstream_timeout=30) as server:
        first = chat(server, TOKENS["bob"], "hello")
        bobs = first.headers["x-brain-conversation"]
        wait_for(lambda: len(recorded(server, TOKENS["bob"], bobs)) == 2)
        streaming, done = threading.Event(), threading.Event()

        def alice() -> None:  # about 4 s of answer, in bob's conversation id
            body = {"model": MODEL, "messages": [{"role": "user", "content": LONG}], "stream": True}
            headers = {"Authorization": f"Bearer {TOKENS['alice']}", "X-Brain-Conversation": bobs}
            with httpx.stream("POST", server.url + "/v1/chat/completions", headers=headers, json=body,
                              timeout=60) as response:
                for _ in response.iter_raw():
                    streaming.set()
            done.set()

        thread = threading.Thread(target=alice)
        thread.start()
        assert streaming.wait(30)
        answer = chat(server, TOKENS["bob"], "still there?", conversation=bobs)
        answered_while_alice_streamed = not done.is_set()
        thread.join(60)
    assert answer.status_code == 200 and answer.headers["x-brain-conversation"] == bobs
    assert answered_while_alice_streamed, "bob's message waited for alice's answer to end"


def test_a_client_resending_its_history_at_once_stays_in_its_conversation(proxy):
    history: list[dict] = []
    ids = []
    for content in ("My cat is called Miso", "She is three", "What is her name?"):
        answer = chat(proxy, TOKENS["alice"], content, history=history)  # at once: no wait for the record
        assert answer.status_code == 200
        ids.append(answer.headers["x-brain-conversation"])
        history += [{"role": "user", "content": content},
                    {"role": "assistant", "content": answer.json()["choices"][0]["message"]["content"]}]
    assert len(set(ids)) == 1, ids
    wait_for(lambda: len(recorded(proxy, TOKENS["alice"], ids[0])) == 6)


def test_users_name_is_read_as_the_entity_name_it_canonically_is(proxy_store, proxy, upstream):
    proxy_store.upsert_memory("Alice is allergic to peanuts", importance=5, scope="entity:alice")
    answer = chat(proxy, ADMIN, "Can I eat satay?", user="Alice ")
    assert answer.status_code == 200, answer.text
    assert "allergic to peanuts" in upstream.chats()[-1].brain_text


def test_a_user_that_is_no_entity_name_is_a_422_naming_user(proxy, upstream):
    answer = chat(proxy, ADMIN, "hello", user="al\x07ice")
    assert answer.status_code == 422, answer.text
    assert answer.json()["problems"][0]["field"] == "user"
    assert upstream.chats() == []


def test_another_entitys_tagged_id_cannot_be_taken_first_through_the_exchanges_route(proxy, upstream):
    """The tag of an entity's own ids can be computed, so the exchanges route refuses an id tagged for someone
    else as it refuses another's conversation, and bob's conversation of that name stays his."""
    from brain.model.ids import own_conversation_id

    bobs = own_conversation_id("conv-bob-3", "bob")
    taken = httpx.post(proxy.url + "/v1/exchanges", headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30,
                       json={"conversation_id": bobs, "user_text": "squatting", "assistant_text": "ok"})
    assert taken.status_code == 404, taken.text
    answer = chat(proxy, TOKENS["bob"], "My cat is called Tom", conversation="conv-bob-3")
    assert answer.headers["x-brain-conversation"] == bobs
    wait_for(lambda: recorded(proxy, TOKENS["bob"], bobs) == ["My cat is called Tom", reply_to("My cat is called Tom")])
    mine = httpx.post(proxy.url + "/v1/exchanges", headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30,
                      json={"conversation_id": own_conversation_id("conv-alice-9", "alice"), "user_text": "hi",
                            "assistant_text": "hello"})
    assert mine.status_code == 201, mine.text  # her own tagged id she may start


def test_a_turn_too_long_for_any_prompt_is_refused_naming_the_limit_and_nothing_is_written(proxy):
    from brain.model.schemas import MAX_TURN_CHARS

    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    refused = httpx.post(proxy.url + "/v1/exchanges", headers=headers, timeout=30,
                         json={"conversation_id": "conv-long-1", "user_text": "hi",
                               "assistant_text": "x" * (MAX_TURN_CHARS + 1)})
    assert refused.status_code == 422 and "MAX_TURN_CHARS" in refused.text and "assistant_text" in refused.text
    assert recorded(proxy, TOKENS["alice"], "conv-long-1") == []
