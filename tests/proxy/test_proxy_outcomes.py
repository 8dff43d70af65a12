"""What the chat proxy does when there is no whole answer: the upstream's error, nothing answering, an upstream
that hangs before or during its answer, a client that goes away midway. None records an exchange. And what it
never does: buffer a stream, or let the upstream's key out."""

from __future__ import annotations

import json
import logging
import time

import httpx
import openai
import pytest
from pydantic import SecretStr

from brain.shells.api.upstream import Upstream
from tests.proxy.conftest import ADMIN, UPSTREAM_KEY, serve_proxy
from tests.proxy.openai_stub import MODEL, OpenAIStub

AUTH = {"Authorization": f"Bearer {ADMIN}"}
LONG = " ".join(f"word{i}" for i in range(40))


def ask(proxy, *, stream: bool = False, content: str = "hello", **headers: str) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], "stream": stream}
    return httpx.post(proxy.url + "/v1/chat/completions", headers={**AUTH, **headers}, json=body, timeout=30)


def conversations(proxy_store) -> list:
    return proxy_store.get(type="turn")


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_error_comes_back_with_its_status_and_body(proxy, proxy_store, upstream, stream):
    upstream.script = [429]
    response = ask(proxy, stream=stream)
    assert response.status_code == 429
    assert response.json() == {"error": {"message": "stub failed with 429", "type": "x"}}
    assert response.headers["x-brain-conversation"].startswith("conv-")
    with pytest.raises(openai.RateLimitError):
        upstream.script = [429]
        openai.OpenAI(base_url=proxy.url + "/v1", api_key=ADMIN, max_retries=0).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=stream)
    time.sleep(0.3)
    assert conversations(proxy_store) == []


def test_nothing_answering_is_a_502_naming_the_setting_not_the_address_nor_the_key(proxy_store, upstream, tmp_path):
    dead = OpenAIStub()
    with dead:
        url = dead.url
    with serve_proxy(proxy_store, upstream, chat_upstream=url) as server:
        response = ask(server)
    assert response.status_code == 502 and response.json()["error"] == "upstream_unreachable"
    assert "BRAIN_CHAT_UPSTREAM" in response.json()["message"]
    assert url not in response.text and "127.0.0.1" not in response.text and UPSTREAM_KEY not in response.text


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_that_hangs_is_a_504_after_the_timeout(proxy_store, upstream, stream):
    upstream.script = ["hang"]
    with serve_proxy(proxy_store, upstream, chat_upstream_timeout=0.5) as server:
        started = time.monotonic()
        response = ask(server, stream=stream)
        took = time.monotonic() - started
    assert response.status_code == 504 and response.json()["error"] == "upstream_timeout"
    assert "BRAIN_CHAT_UPSTREAM_TIMEOUT" in response.json()["message"]
    assert took < 5
    assert conversations(proxy_store) == []


@pytest.mark.parametrize("how", ["hang-midway", "drop-midway"])
def test_a_stream_broken_midway_ends_without_done_and_records_nothing(proxy_store, upstream, how):
    upstream.script = [how]
    with serve_proxy(proxy_store, upstream, chat_upstream_timeout=0.5) as server:
        response = ask(server, stream=True)
        assert response.status_code == 200 and b"[DONE]" not in response.content
        if how == "hang-midway":  # an error event the official client raises
            last = response.text.strip().split("\n\n")[-1]
            assert json.loads(last[6:])["error"]["type"] == "upstream_timeout"
            upstream.script = [how]
            chat = openai.OpenAI(base_url=server.url + "/v1", api_key=ADMIN, max_retries=0)
            with pytest.raises(openai.APIError, match="did not send the next chunk"):
                for _ in chat.chat.completions.create(
                        model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True):
                    pass
        time.sleep(0.3)
    assert conversations(proxy_store) == []


@pytest.mark.slow
def test_a_client_gone_midway_closes_the_upstream_request_and_records_nothing(proxy_store):
    with OpenAIStub(chunk_delay=0.1) as slow, serve_proxy(proxy_store, slow) as server:
        body = {"model": MODEL, "messages": [{"role": "user", "content": LONG}], "stream": True}
        with httpx.stream("POST", server.url + "/v1/chat/completions", headers=AUTH, json=body, timeout=30) as response:
            conversation_id = response.headers["x-brain-conversation"]
            next(response.iter_raw())
        assert slow.disconnected.wait(10), "the upstream request was not closed"
        time.sleep(0.3)
        assert proxy_store.conversation_turns(conversation_id) == []


@pytest.mark.slow
def test_a_stream_is_not_buffered(proxy_store):
    with OpenAIStub(chunk_delay=0.1) as slow, serve_proxy(proxy_store, slow) as server:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "one two three four five"}], "stream": True}
        with httpx.stream("POST", server.url + "/v1/chat/completions", headers=AUTH, json=body, timeout=30) as response:
            chunks = response.iter_raw()
            next(chunks)
            first_arrived = time.monotonic()
            rest = b"".join(chunks)
        assert rest.endswith(b"data: [DONE]\n\n")
        assert first_arrived < slow.sent_at[1], "the client's first chunk came after the upstream's second was sent"


def test_the_proxy_off_is_a_503_saying_what_to_set(live):
    response = live.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 503 and "BRAIN_CHAT_UPSTREAM" in response.json()["message"]


@pytest.mark.parametrize("body, field", [
    ({"model": MODEL}, "messages"),
    ({"model": MODEL, "messages": []}, "messages"),
    ({"model": MODEL, "messages": ["hi"]}, "messages.0"),
    ({"model": MODEL, "messages": [{"role": "system", "content": "x"}]}, "messages"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "user": 5}, "user"),
])
def test_a_bad_request_is_a_422_naming_the_field(proxy, upstream, body, field):
    response = httpx.post(proxy.url + "/v1/chat/completions", headers=AUTH, json=body, timeout=30)
    assert response.status_code == 422, response.text
    assert response.json()["problems"][0]["field"] == field
    assert upstream.chats() == []


@pytest.mark.slow
def test_the_upstream_key_never_leaves(proxy_store, upstream, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    seen = []
    with serve_proxy(proxy_store, upstream, chat_upstream_timeout=0.5) as server:
        for script in (None, 500, "hang", "hang-midway"):
            upstream.script = [script] if script is not None else []
            for stream in (False, True):
                upstream.script = [script] if script is not None else []
                seen.append(ask(server, stream=stream, content=f"my key? {script}"))
        seen.append(httpx.get(server.url + "/v1/models", headers=AUTH, timeout=30))
        time.sleep(0.5)
    assert all(UPSTREAM_KEY not in r.text and UPSTREAM_KEY not in str(r.headers) for r in seen)
    assert UPSTREAM_KEY not in caplog.text
    configured = proxy_store.settings.model_copy(update={"chat_upstream_key": SecretStr(UPSTREAM_KEY)})
    assert UPSTREAM_KEY not in repr(configured) and UPSTREAM_KEY not in repr(Upstream(upstream.url, key=UPSTREAM_KEY))
    holding = {
        str(p.relative_to(tmp_path)): p.read_bytes().index(UPSTREAM_KEY.encode())
        for p in (tmp_path / "data").rglob("*")
        if p.is_file() and UPSTREAM_KEY.encode() in p.read_bytes()
    }
    assert not holding, f"the key is in these files, at these offsets: {holding}"
    assert conversations(proxy_store)  # something was recorded, and the key is not in it
