"""The chat proxy as OpenAI's chat completions, driven by the official `openai` client (sync, async, streaming)
against the stand-in upstream: the memory reaches the model, the conversation goes on, the answer comes back
as the upstream sent it, and the exchange is recorded after it."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai

from tests.proxy.conftest import ADMIN, TOKENS, UPSTREAM_KEY, wait_for
from tests.proxy.openai_stub import MODEL, chunk, completion, reply_to


def client(proxy, token: str = ADMIN, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=token, default_headers=headers or None, max_retries=0)


def turns(proxy_store, conversation_id: str) -> list[tuple[str, str]]:
    return [(d.metadata["role"], d.text) for d in proxy_store.conversation_turns(conversation_id)]


def test_the_memory_reaches_the_model_and_the_answer_comes_back(proxy, proxy_store, upstream):
    proxy_store.upsert_memory("Alice is allergic to peanuts", importance=5, scope="entity:alice")
    answer = client(proxy, TOKENS["alice"]).chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Can I eat satay?"}],
        temperature=0.2,
    )
    completion_ = answer.parse()
    assert completion_.choices[0].message.content == reply_to("Can I eat satay?")
    conversation_id = answer.headers["x-brain-conversation"]
    assert conversation_id.startswith("conv-")
    sent = upstream.chats()[-1]
    assert sent.body["temperature"] == 0.2 and sent.body["model"] == MODEL
    roles = [m["role"] for m in sent.messages]
    assert roles == ["system", "system", "user"]  # the client's own system message kept, brain's after it
    # an importance-5 fact about alice is one she is always kept in mind of: the stable system message
    assert sent.messages[0]["content"] == "Be brief." and "allergic to peanuts" in sent.messages[1]["content"]
    assert sent.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"  # the upstream's key, not the caller's
    wait_for(lambda: len(turns(proxy_store, conversation_id)) == 2)
    assert turns(proxy_store, conversation_id) == [
        ("user", "Can I eat satay?"),
        ("assistant", reply_to("Can I eat satay?")),
    ]


def test_the_next_message_carries_the_recorded_turns_and_not_the_history_twice(proxy, proxy_store, upstream):
    chat = client(proxy, TOKENS["alice"])
    first = chat.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "My cat is called Miso"}]
    )
    conversation_id = first.headers["x-brain-conversation"]
    history = [
        {"role": "user", "content": "My cat is called Miso"},
        {"role": "assistant", "content": first.parse().choices[0].message.content},
        {"role": "user", "content": "What is my cat called?"},
    ]
    second = client(proxy, TOKENS["alice"], **{"X-Brain-Conversation": conversation_id})
    answer = second.chat.completions.with_raw_response.create(model=MODEL, messages=history)
    assert answer.headers["x-brain-conversation"] == conversation_id
    sent = upstream.chats()[-1]
    # brain's recorded turns, as the conversation's messages; the client's copy of them not sent as well
    assert sent.said == ["My cat is called Miso", reply_to("My cat is called Miso"), "What is my cat called?"]
    assert [m["role"] for m in sent.messages] == ["user", "assistant", "user"]
    wait_for(lambda: len(turns(proxy_store, conversation_id)) == 4)


def test_without_the_header_a_conversation_whose_turns_match_goes_on(proxy, proxy_store, upstream):
    chat = client(proxy, TOKENS["alice"])
    first = chat.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "I live in Lisbon"}]
    )
    conversation_id = first.headers["x-brain-conversation"]
    wait_for(lambda: len(turns(proxy_store, conversation_id)) == 2)
    history = [
        {"role": "user", "content": "I live in Lisbon"},
        {"role": "assistant", "content": reply_to("I live in Lisbon")},
        {"role": "user", "content": "Where do I live?"},
    ]
    again = chat.chat.completions.with_raw_response.create(model=MODEL, messages=history)
    assert again.headers["x-brain-conversation"] == conversation_id
    other = chat.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},
                               {"role": "user", "content": "z"}])
    new_id = other.headers["x-brain-conversation"]
    assert new_id != conversation_id
    sent = upstream.chats()[-1]
    assert [m["content"] for m in sent.messages if m["role"] != "system"] == ["x", "y", "z"]  # unknown: kept


def test_streaming_passes_every_chunk_and_records_after_the_last(proxy, proxy_store, upstream):
    proxy_store.upsert_memory("Bob plays the cello", importance=5, scope="entity:bob")
    chat = client(proxy, TOKENS["bob"])
    with chat.chat.completions.with_streaming_response.create(
        model=MODEL, messages=[{"role": "user", "content": "What instrument do I play?"}], stream=True
    ) as response:
        conversation_id = response.headers["x-brain-conversation"]
        raw = b"".join(response.iter_bytes())
    assert raw.endswith(b"data: [DONE]\n\n")
    assert "cello" in upstream.chats()[-1].brain_text
    pieces = [json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
              for line in raw.decode().split("\n\n") if line.startswith("data: {")]
    assert "".join(pieces) == reply_to("What instrument do I play?")
    wait_for(lambda: len(turns(proxy_store, conversation_id)) == 2)
    assert turns(proxy_store, conversation_id)[1] == ("assistant", reply_to("What instrument do I play?"))


def test_the_sync_client_streams_and_the_async_client_too(proxy, proxy_store, upstream):
    stream = client(proxy).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == reply_to("one two three")

    async def both() -> tuple[str, str]:
        chat = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key=ADMIN, max_retries=0)
        plain = await chat.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}])
        streamed = await chat.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello there"}], stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in streamed if c.choices])
        await chat.close()
        return plain.choices[0].message.content or "", text

    plain, streamed = asyncio.run(both())
    assert plain == reply_to("hello") and streamed == reply_to("hello there")


def test_models_are_passed_through(proxy, upstream):
    models = client(proxy).models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_tool_calls_pass_through_byte_for_byte(proxy, proxy_store, upstream):
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [{"type": "function",
              "function": {"name": "weather", "description": "the weather in a city", "parameters": parameters}}]
    call = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]
    answer = json.dumps(completion(None, tool_calls=call), separators=(", ", ": ")).encode()  # any spacing kept
    upstream.script = [answer]
    messages = [{"role": "user", "content": "Weather in Oslo?"}]
    raw = httpx.post(proxy.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {ADMIN}"},
                     json={"model": MODEL, "messages": messages, "tools": tools, "tool_choice": "auto"}, timeout=30)
    assert raw.status_code == 200 and raw.content == answer
    sent = upstream.chats()[-1].body
    assert sent["tools"] == tools and sent["tool_choice"] == "auto"
    conversation_id = raw.headers["x-brain-conversation"]
    # the round trip's second half: the call and its result pass as sent; the final answer is recorded
    follow = messages + [{"role": "assistant", "content": None, "tool_calls": call},
                         {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": -3}"}]
    done = client(proxy, **{"X-Brain-Conversation": conversation_id}).chat.completions.create(
        model=MODEL, messages=follow, tools=tools)
    assert done.choices[0].message.content == reply_to("Weather in Oslo?")
    assert upstream.chats()[-1].body["messages"][-3:] == follow
    wait_for(lambda: len(turns(proxy_store, conversation_id)) == 2)
    assert turns(proxy_store, conversation_id) == [("user", "Weather in Oslo?"),
                                                   ("assistant", reply_to("Weather in Oslo?"))]


def test_a_streamed_tool_call_passes_byte_for_byte(proxy, upstream):
    events = (chunk({"role": "assistant", "content": None,
                     "tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                     "function": {"name": "weather", "arguments": ""}}]})
              + chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Oslo\"}"}}]})
              + chunk({}, finish="tool_calls") + b"data: [DONE]\n\n")
    upstream.script = [events]
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {ADMIN}"},
                      json={"model": MODEL, "messages": [{"role": "user", "content": "Oslo?"}], "stream": True},
                      timeout=30) as response:
        assert b"".join(response.iter_raw()) == events
