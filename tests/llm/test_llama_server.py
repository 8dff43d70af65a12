"""The model tier's plumbing: llama_cpp.server 0.3.36 over the registry's GGUF models answers the OpenAI requests the
suite relies on (chat, usage, streaming, JSON constrained by a schema)."""

from __future__ import annotations

import json

import httpx
import jsonschema_rs
import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]

HELLO = [{"role": "user", "content": "Say hello in five words."}]
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def chat(server, timeout: float = 120, **body) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat/completions", json={"model": server.alias, **body}, timeout=timeout)


def test_the_server_lists_its_model_under_the_alias(smollm_server):
    models = httpx.get(f"{smollm_server.base_url}/models", timeout=10).json()
    assert [model["id"] for model in models["data"]] == [smollm_server.alias]


def test_a_chat_completion_returns_text_and_usage(smollm_server):
    response = chat(smollm_server, messages=HELLO, max_tokens=32)
    assert response.status_code == 200, response.text
    body = response.json()
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"].strip()
    assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_max_tokens_ends_the_answer_with_finish_reason_length(smollm_server):
    body = chat(smollm_server, messages=[{"role": "user", "content": "Tell a long story."}], max_tokens=3).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3


def test_a_streamed_completion_arrives_as_server_sent_chunks(smollm_server):
    request = {"model": smollm_server.alias, "messages": HELLO, "max_tokens": 16, "stream": True}
    with httpx.stream("POST", f"{smollm_server.base_url}/chat/completions", json=request, timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert len(chunks) >= 3
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks).strip()
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_the_openai_json_schema_response_format_is_refused(smollm_server):
    """0.3.36 knows only "text" and "json_object" (a schema goes in ``response_format.schema``, see below): OpenAI's
    ``{"type": "json_schema", ...}`` fails validation, answered as a 500. A caller has to translate it."""
    response_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    response = chat(smollm_server, messages=HELLO, max_tokens=8, response_format=response_format)
    assert response.status_code == 500
    assert "json_object" in response.json()["error"]["message"]


def test_qwen_answers_json_that_follows_the_schema(qwen_server):
    """``{"type": "json_object", "schema": ...}`` compiles the schema to a grammar: the output cannot leave it."""
    messages = [{"role": "user", "content": "Alice is 31 and lives in Lyon. Reply with her name and age."}]
    response = chat(
        qwen_server,
        timeout=300,
        messages=messages,
        max_tokens=60,
        temperature=0,
        response_format={"type": "json_object", "schema": PERSON},
    )
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    answer = json.loads(choice["message"]["content"])
    jsonschema_rs.validate(PERSON, answer)
    assert answer == {"name": "Alice", "age": 31}
