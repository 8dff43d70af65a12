"""The chat proxy's fixtures: a stand-in upstream (:mod:`tests.proxy.openai_stub`) and `brain serve` in front of
it, on real uvicorn, over a real embedded store and the real embedder."""

from __future__ import annotations

import time

import pytest
from pydantic import SecretStr

from brain.access.policy import Caller
from brain.app.core import open_store
from brain.shells.api import create_app
from brain.shells.web.tokens import TokenTable
from tests.conftest import LiveServer, api_settings
from tests.proxy.openai_stub import OpenAIStub

ADMIN = "admin-token-0123456789abcdef"
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}
UPSTREAM_KEY = "sk-upstream-secret-0123456789"


def token_table() -> TokenTable:
    entries = [(ADMIN.encode(), Caller())]
    entries += [(token.encode(), Caller(entity=who)) for who, token in TOKENS.items()]
    return TokenTable(tuple(entries))


@pytest.fixture
def upstream():
    with OpenAIStub(key=UPSTREAM_KEY) as stub:
        yield stub


@pytest.fixture
def proxy_store(tmp_path, local_embedder):
    with open_store(api_settings(tmp_path), embedder=local_embedder) as store:
        yield store


#: what every proxy test's server sent a client with the upstream's key in it (see :func:`no_key_reaches_a_client`)
LEAKS: list[str] = []


def watched(app):
    """``app``, every response head and body it sends a client checked for the upstream's key (a key split
    across two body chunks included)."""
    key = UPSTREAM_KEY.encode()

    async def wrapper(scope, receive, send):
        tail = b""

        async def checked_send(message):
            nonlocal tail
            if message["type"] == "http.response.start":
                if any(key in name or key in value for name, value in message.get("headers", [])):
                    LEAKS.append(f"{scope.get('path')}: a response header")
            elif message["type"] == "http.response.body":
                seen = tail + message.get("body", b"")
                if key in seen:
                    LEAKS.append(f"{scope.get('path')}: the body")
                tail = seen[-len(key):]
            await send(message)

        await app(scope, receive, checked_send if scope["type"] == "http" else send)

    return wrapper


@pytest.fixture(autouse=True)
def no_key_reaches_a_client():
    """Every test here: no response of the proxy carries the upstream's key."""
    LEAKS.clear()
    yield
    assert not LEAKS, f"the upstream's key reached a client: {LEAKS}"


def serve_proxy(store, upstream: OpenAIStub, **settings) -> LiveServer:
    configured = store.settings.model_copy(
        update={"chat_upstream": upstream.url, "chat_upstream_key": SecretStr(UPSTREAM_KEY), **settings}
    )
    return LiveServer(watched(create_app(configured, store=store, tokens=token_table())))


@pytest.fixture
def proxy(proxy_store, upstream):
    """The proxy's base URL (``.../v1``): `brain serve` in front of the stand-in upstream."""
    with serve_proxy(proxy_store, upstream) as server:
        yield server


def wait_for(condition, timeout: float = 10.0) -> None:
    """Until ``condition()`` holds (the exchange is recorded after the answer, off the request's path)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)
