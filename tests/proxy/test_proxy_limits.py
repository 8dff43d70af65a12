"""What an upstream sends back is bounded before brain holds or stores it, and nothing of the operator's reaches
a client: not the upstream's key (quoted back by the upstream), not its address, not a password in its URL."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from brain.config.settings import Settings
from brain.model.errors import ConfigError
from brain.shells.api.chat_proxy import RECORDED_CHARS
from tests.proxy.conftest import ADMIN, TOKENS, UPSTREAM_KEY, serve_proxy, wait_for
from tests.proxy.openai_stub import MODEL, chunk, completion

HUGE = 10_000_000


def huge_answer(stream: bool, size: int = HUGE) -> bytes:
    if stream:
        return chunk({"content": "x" * size}) + b"data: [DONE]\n\n"
    return json.dumps(completion("x" * size)).encode()


def post(server, route: str, *, stream: bool, token: str = TOKENS["alice"], content: str = "hello") -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], "stream": stream}
    return httpx.post(server.url + route, headers={"Authorization": f"Bearer {token}"}, json=body, timeout=60)


def data_bytes(store) -> int:
    return sum(p.stat().st_size for p in store.settings.data_dir.rglob("*") if p.is_file())


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/chat"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_huge_answer_is_refused_and_stores_nothing(proxy, proxy_store, upstream, route, stream):
    before = data_bytes(proxy_store)
    upstream.script = [huge_answer(stream)]
    response = post(proxy, route, stream=stream)
    if stream:  # the head went out before the size was known: the stream ends with an error, no end marker
        assert response.status_code == 200
        assert b"[DONE]" not in response.content and b'"done":true' not in response.content
        assert b"upstream_too_large" in response.content or b"BRAIN_CHAT_UPSTREAM_MAX_BYTES" in response.content
    else:
        assert response.status_code == 502, response.text[:200]
        assert response.json()["error"] == "upstream_too_large"
        assert "BRAIN_CHAT_UPSTREAM_MAX_BYTES" in response.json()["message"]
    started = time.monotonic()
    context = httpx.post(proxy.url + "/v1/context", headers={"Authorization": f"Bearer {TOKENS['bob']}"},
                         json={"user_message": "what do you know?"}, timeout=60)
    took = time.monotonic() - started
    assert context.status_code == 200 and took < 0.5, took
    time.sleep(0.3)
    assert proxy_store.get(type="turn") == []
    assert data_bytes(proxy_store) - before < 1_000_000


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/chat"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_long_answer_is_passed_whole_and_recorded_cut_with_a_marker(proxy, proxy_store, upstream, route, stream):
    upstream.script = [huge_answer(stream, 100_000)]
    response = post(proxy, route, stream=stream)
    assert response.status_code == 200
    assert response.content.count(b"x") >= 100_000  # the client gets all of it
    if not stream:
        assert response.headers["x-brain-recorded"] == f"the first {RECORDED_CHARS} of 100000 characters of the answer"
    conversation_id = response.headers["x-brain-conversation"]
    wait_for(lambda: len(proxy_store.conversation_turns(conversation_id)) == 2)
    answer = proxy_store.conversation_turns(conversation_id)[1].text
    assert answer.startswith("x" * RECORDED_CHARS) and len(answer) < RECORDED_CHARS + 100
    assert answer.endswith(f"[brain recorded the first {RECORDED_CHARS:,} of 100,000 characters]")


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/chat"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_quoting_its_key_is_a_502_without_it(proxy, proxy_store, upstream, route, stream):
    for token in (TOKENS["alice"], ADMIN):
        upstream.script = ["401-quoting-key"]
        response = post(proxy, route, stream=stream, token=token)
        assert response.status_code == 502 and response.json()["error"] == "upstream_refused"
        assert "BRAIN_CHAT_UPSTREAM_KEY" in response.json()["message"]
        assert UPSTREAM_KEY not in response.text and UPSTREAM_KEY not in str(response.headers)
    time.sleep(0.3)
    assert proxy_store.get(type="turn") == []


def test_an_upstream_body_quoting_the_key_has_it_taken_out(proxy, upstream):
    quoted = json.dumps({"error": {"message": f"rate limited for Bearer {UPSTREAM_KEY}", "type": "x"}}).encode()
    upstream.script = [quoted]  # answered as it is, and passed on byte for byte but for the key
    response = post(proxy, "/v1/chat/completions", stream=False)
    assert "rate limited for Bearer [redacted]" in response.text
    assert UPSTREAM_KEY not in response.text


@pytest.mark.parametrize("script", ["hang", None])
def test_a_502_or_504_names_the_setting_not_the_address(proxy_store, upstream, script):
    from tests.proxy.openai_stub import OpenAIStub

    dead = OpenAIStub()
    with dead:
        url = dead.url
    upstream.script = [script] if script else []
    chosen = {"chat_upstream_timeout": 0.5} if script else {"chat_upstream": url}
    with serve_proxy(proxy_store, upstream, **chosen) as server:
        for route in ("/v1/chat/completions", "/api/chat"):
            for stream in (False, True):
                upstream.script = [script] if script else []
                response = post(server, route, stream=stream)
                assert response.status_code in (502, 504), response.text
                assert "BRAIN_CHAT_UPSTREAM" in response.text
                assert "127.0.0.1" not in response.text


def test_an_upstream_url_with_a_password_is_refused_without_printing_it():
    with pytest.raises(ConfigError) as refused:
        Settings(chat_upstream="http://brain:hunter2-password@127.0.0.1:11434/v1")
    assert "hunter2-password" not in str(refused.value)
    assert "BRAIN_CHAT_UPSTREAM_KEY" in str(refused.value)
