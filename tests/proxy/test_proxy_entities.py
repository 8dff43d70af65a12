"""Whose memory reaches the model: the token's entity, or the one the request names under the same rules as every
other route (a token bound to alice naming bob is a 403), and never another entity's."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.proxy.conftest import ADMIN, TOKENS, serve_proxy
from tests.proxy.openai_stub import MODEL, OpenAIStub

SECRETS = {"alice": "Alice keeps her spare key under the blue flowerpot",
           "bob": "Bob keeps his spare key inside the garden gnome",
           "carol": "Carol keeps her spare key taped under the mailbox"}
QUESTION = "Where is my spare key?"


def ask(server, token: str, *, user: str | None = None, header: str | None = None) -> httpx.Response:
    body: dict = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}]}
    if user is not None:
        body["user"] = user
    headers = {"Authorization": f"Bearer {token}"}
    if header is not None:
        headers["X-Brain-Entity"] = header
    return httpx.post(server.url + "/v1/chat/completions", headers=headers, json=body, timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory, local_embedder):
    from brain.app.core import open_store
    from tests.conftest import api_settings, isolate

    with pytest.MonkeyPatch.context() as mp:
        workdir = tmp_path_factory.mktemp("entities")
        isolate(mp, workdir, tmp_path_factory.mktemp("xdg-state"))
        with open_store(api_settings(workdir), embedder=local_embedder) as store:
            for who, secret in SECRETS.items():
                store.upsert_memory(secret, importance=5, scope=f"entity:{who}")
            with OpenAIStub() as stub, serve_proxy(store, stub) as server:
                yield server, stub


def test_a_bound_token_naming_another_entity_is_a_403_and_nothing_is_sent(served):
    server, stub = served
    before = len(stub.chats())
    for response in (ask(server, TOKENS["alice"], user="bob"), ask(server, TOKENS["alice"], header="bob")):
        assert response.status_code == 403, response.text
        assert "bound to entity 'alice'" in response.json()["message"]
    assert len(stub.chats()) == before


def test_the_header_and_user_must_agree(served):
    server, _ = served
    response = ask(server, ADMIN, user="alice", header="bob")
    assert response.status_code == 422 and "X-Brain-Entity" in response.json()["message"]


TOKEN_NAMES = st.sampled_from(["admin", "alice", "bob"])
NAMED = st.one_of(st.none(), st.sampled_from(["alice", "bob", "carol"]))


@hypothesis_settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=TOKEN_NAMES, named=NAMED, by_header=st.booleans())
def test_another_entitys_memory_never_reaches_the_model(served, token, named, by_header):
    server, stub = served
    secret_token = ADMIN if token == "admin" else TOKENS[token]
    response = ask(server, secret_token, **({"header": named} if by_header else {"user": named}))
    bound = None if token == "admin" else token
    if bound is not None and named not in (None, bound):
        assert response.status_code == 403
        return
    assert response.status_code == 200, response.text
    acting = bound or named
    sent = stub.chats()[-1].brain_text
    for who, secret in SECRETS.items():
        if who != acting:
            assert secret not in sent, f"{who}'s memory reached the model of a request acting for {acting}"
    if acting is not None:
        assert SECRETS[acting] in sent  # importance 5: always kept in mind for its entity
