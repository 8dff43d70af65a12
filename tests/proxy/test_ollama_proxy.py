"""The chat proxy as Ollama's /api/chat, driven by the official `ollama` client (chat, streaming), translated to
the OpenAI-compatible stand-in upstream and back."""

from __future__ import annotations

import base64
import json

import ollama
import pytest

from brain.shells.api.chat_proxy import own_conversation_id
from tests.proxy.conftest import ADMIN, TOKENS, wait_for
from tests.proxy.openai_stub import MODEL, completion, reply_to

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def client(proxy, token: str = ADMIN, **headers: str) -> ollama.Client:
    return ollama.Client(host=proxy.url, headers={"Authorization": f"Bearer {token}", **headers})


def turns(proxy_store, conversation_id: str) -> list[tuple[str, str]]:
    return [(d.metadata["role"], d.text) for d in proxy_store.conversation_turns(conversation_id)]


def test_chat_gets_the_memory_and_answers_in_ollamas_shape(proxy, proxy_store, upstream):
    proxy_store.upsert_memory("Alice is allergic to peanuts", importance=5, scope="entity:alice")
    answer = client(proxy, TOKENS["alice"]).chat(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Can I eat satay?"}],
        options={"temperature": 0.1, "num_predict": 64, "num_ctx": 4096},
    )
    assert answer.message.role == "assistant" and answer.message.content == reply_to("Can I eat satay?")
    assert answer.done and answer.done_reason == "stop" and answer.eval_count == 5
    sent = upstream.chats()[-1]
    assert "allergic to peanuts" in sent.brain_text and sent.messages[0]["content"] == "Be brief."
    assert sent.body["temperature"] == 0.1 and sent.body["max_tokens"] == 64 and "num_ctx" not in sent.body
    assert sent.body["stream"] is False
    wait_for(lambda: len(proxy_store.get(type="turn")) == 2)


def test_streaming_gives_ndjson_lines_and_records_after_the_last(proxy, proxy_store, upstream):
    chat = client(proxy, TOKENS["bob"], **{"X-Brain-Conversation": "conv-ollama-1"})
    parts = list(chat.chat(model=MODEL, messages=[{"role": "user", "content": "one two three"}], stream=True))
    assert "".join(p.message.content or "" for p in parts) == reply_to("one two three")
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert upstream.chats()[-1].body["stream"] is True
    recorded_as = own_conversation_id("conv-ollama-1", "bob")  # bob's conversation of the id he chose
    wait_for(lambda: len(turns(proxy_store, recorded_as)) == 2)
    again = list(chat.chat(model=MODEL, messages=[{"role": "user", "content": "and four?"}], stream=True))
    assert again[-1].done
    assert upstream.chats()[-1].said[0] == "one two three"  # the conversation's recorded turns


def test_images_and_tool_calls_are_translated(proxy, upstream):
    call = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]
    upstream.script = [json.dumps(completion(None, tool_calls=call)).encode()]
    tools = [{"type": "function", "function": {"name": "weather", "description": "the weather",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    answer = client(proxy).chat(model=MODEL, tools=tools,
                                messages=[{"role": "user", "content": "Weather here?", "images": [PNG]}])
    assert answer.message.tool_calls[0].function.name == "weather"
    assert answer.message.tool_calls[0].function.arguments == {"city": "Oslo"}
    sent = upstream.chats()[-1].body
    assert sent["tools"][0]["function"]["name"] == "weather"
    assert sent["messages"][-1]["content"] == [
        {"type": "text", "text": "Weather here?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]
    follow = [{"role": "user", "content": "Weather here?"},
              {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "weather",
                                                                                 "arguments": {"city": "Oslo"}}}]},
              {"role": "tool", "content": "-3 C", "tool_name": "weather"}]
    client(proxy).chat(model=MODEL, messages=follow, tools=tools)
    sent = upstream.chats()[-1].body["messages"]
    assert sent[-2]["tool_calls"][0]["function"] == {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}
    assert sent[-1] == {"role": "tool", "content": "-3 C", "tool_call_id": sent[-2]["tool_calls"][0]["id"]}


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_error_is_ollamas_error_with_its_status(proxy, upstream, stream):
    upstream.script = [503]
    with pytest.raises(ollama.ResponseError) as caught:
        result = client(proxy).chat(model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=stream)
        if stream:
            list(result)
    assert caught.value.status_code == 503 and caught.value.error == "stub failed with 503"
