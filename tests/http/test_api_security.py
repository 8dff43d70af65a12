"""Identities over HTTP: the admin token, entity-bound tokens from the tokens file, what each may do.

Real uvicorn on a loopback port, a real embedded store and embedder, real HTTP.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from dataclasses import dataclass

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from brain.access.policy import Caller
from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.model.errors import ConfigError
from brain.providers.summarizers import ExtractiveSummarizer
from brain.shells.api import create_app, serve
from brain.shells.web.tokens import TokenTable
from tests.conftest import ROOT, LiveServer, api_settings, free_port

ADMIN = "admin-token-0123456789abcdef"
TOKENS = {
    "alice": "alice-token-0123456789abcdef",
    "bob": "bob-token-0123456789abcdef",
    "carol": "carol-token-0123456789abcdef",
}


def write_tokens(path, **extra: str) -> None:
    lines = ["# who  token", ""] + [f"{who} {token}" for who, token in {**TOKENS, **extra}.items()]
    path.write_text("\n".join(lines) + "\n")


# ---- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "   ", "\t"])
def test_an_empty_or_blank_token_means_no_token(value, monkeypatch):
    assert Settings(api_token=value).api_token is None
    monkeypatch.setenv("BRAIN_API_TOKEN", value)
    assert Settings().api_token is None


def test_a_short_token_is_refused_naming_the_variable_not_the_value(monkeypatch):
    monkeypatch.setenv("BRAIN_API_TOKEN", "short-secret")
    with pytest.raises(ConfigError, match="BRAIN_API_TOKEN") as caught:
        Settings()
    assert "16 characters" in str(caught.value) and "short-secret" not in str(caught.value)
    with pytest.raises(ConfigError, match="printable ASCII"):
        Settings(api_token="has a space in the middle of it")
    assert Settings(api_token="  sixteen-chars-ok  ").api_token.get_secret_value() == "sixteen-chars-ok"


def test_serve_refuses_a_public_address_with_an_empty_token(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAIN_API_TOKEN", "")
    with pytest.raises(ConfigError, match="without a token"):
        serve(Settings(data_dir=tmp_path / "data"), host="0.0.0.0", port=free_port())
    assert not (tmp_path / "data").exists()  # refused before the store was opened


@pytest.mark.subprocess
def test_brain_serve_refuses_a_public_address_with_an_empty_token(tmp_path):
    env = {**os.environ, "BRAIN_API_TOKEN": "", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain.shells.cli",
            "--data-dir",
            str(tmp_path / "data"),
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 1, result.stderr
    assert "refusing to listen on 0.0.0.0 without a token" in result.stderr and "Traceback" not in result.stderr


def test_tokens_file_is_read_into_identities(tmp_path):
    path = tmp_path / "tokens"
    write_tokens(path, admin="second-admin-token-0123456789", **{"mary ann": "mary-ann-token-0123456789"})
    table = TokenTable.from_settings(Settings(api_token=ADMIN, api_tokens_file=path))
    assert table.identify(f"Bearer {ADMIN}") == Caller()
    assert table.identify("Bearer second-admin-token-0123456789") == Caller()
    assert table.identify(f"bearer {TOKENS['alice']}") == Caller("alice")
    assert table.identify(f"Bearer   {TOKENS['bob']}  ") == Caller("bob")
    assert table.identify("Bearer mary-ann-token-0123456789") == Caller("mary ann")
    for header in [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer    ",
        f"Basic {ADMIN}",
        f"{ADMIN}",
        "Bearer nope",
        f"Bearer {TOKENS['alice']}x",
        f"Bearer {TOKENS['alice'][:-1]}",
    ]:
        assert table.identify(header) is None, header
    assert table.entities == ["alice", "bob", "carol", "mary ann"]
    assert TokenTable.from_settings(Settings()) is None
    only_file = TokenTable.from_settings(Settings(api_tokens_file=path))
    assert only_file is not None and only_file.identify(f"Bearer {ADMIN}") is None


@pytest.mark.parametrize(
    "content, expected",
    [
        ("alice\n", "line 1: expected '<admin or entity name> <token>'"),
        ("# only a comment\n\n", "holds no tokens"),
        ("alice short-token\n", "line 1: a token must be at least 16 characters"),
        (f"alice {TOKENS['alice']}\nbob {TOKENS['alice']}\n", "line 2: the token is already used by"),
        (f"alice {ADMIN}\n", "already used by BRAIN_API_TOKEN"),
        ("x" * 200 + f" {TOKENS['alice']}\n", "line 1: the name"),
        ("alice t\u00f6ken-with-umlaut-0123456789\n", "printable ASCII"),
    ],
)
def test_a_malformed_tokens_file_stops_start_up_naming_the_line(tmp_path, content, expected):
    path = tmp_path / "tokens"
    path.write_text(content, encoding="utf-8")
    settings = api_settings(tmp_path, api_token=ADMIN, api_tokens_file=path)
    with pytest.raises(ConfigError, match="BRAIN_API_TOKENS_FILE") as caught:
        create_app(settings)
    assert expected in str(caught.value)
    for token in (*TOKENS.values(), ADMIN):
        assert token not in str(caught.value)  # a secret never reaches a log
    with pytest.raises(ConfigError, match="BRAIN_API_TOKENS_FILE"):
        serve(settings, host="127.0.0.1", port=free_port())
    assert not settings.data_dir.exists()


def test_a_missing_tokens_file_stops_start_up(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        create_app(api_settings(tmp_path, api_tokens_file=tmp_path / "nowhere"))


# ---- authentication comes first --------------------------------------------------------------------


def test_an_unauthenticated_request_gets_401_whatever_it_sends(tmp_path, local_embedder):
    settings = api_settings(tmp_path, api_token=ADMIN, api_max_body_bytes=2048)
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        requests = [
            ("POST", "/v1/memories", {"content": b"{not json", "headers": {"content-type": "application/json"}}),
            ("POST", "/v1/memories", {"json": {"text": "x" * 5000}}),  # over the body limit
            ("POST", "/v1/memories", {"json": {"importance": "high"}}),
            ("GET", "/v1/nowhere", {}),
            ("PATCH", "/v1/memories/some-id", {"json": []}),
            ("GET", "/v1/conversations/not-a-conversation/turns", {}),
            ("GET", "/openapi.json", {}),
            ("GET", "/docs", {}),
        ]
        requests.append(("POST", "/v1/memories", {"json": {"text": "x"}, "headers": {"Authorization": "Bearer"}}))
        for method, path, options in requests:
            response = httpx.request(method, f"{server.url}{path}", timeout=30, **options)
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["error"] == "unauthorized" and response.headers["www-authenticate"] == "Bearer"
        for empty in (b"Bearer ", b"Bearer \t ", b"Bearer  "):  # httpx refuses to send these: raw HTTP
            assert raw_post(server.url, b"/v1/memories", b'{"text": "x"}', empty).startswith(b"HTTP/1.1 401")
        assert store.count() == 0


def raw_post(url: str, path: bytes, body: bytes, authorization: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            b"POST "
            + path
            + b" HTTP/1.1\r\nHost: brain\r\nAuthorization: "
            + authorization
            + b"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        return sock.recv(65536)


def test_documentation_is_served_behind_the_token(tmp_path, local_embedder):
    settings = api_settings(tmp_path, api_token=ADMIN)
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        auth = {"Authorization": f"Bearer {ADMIN}"}
        schema = httpx.get(f"{server.url}/openapi.json", headers=auth, timeout=30)
        assert schema.status_code == 200
        assert schema.json()["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert schema.json()["security"] == [{"bearer": []}]
        assert httpx.get(f"{server.url}/docs", headers=auth, timeout=30).status_code == 200


def test_without_a_token_only_local_clients_are_served(tmp_path):
    app = create_app(api_settings(tmp_path))  # no token configured; the store is never opened here

    def status(client: tuple[str, int]) -> int:
        async def get() -> int:
            transport = httpx.ASGITransport(app=app, client=client)
            async with httpx.AsyncClient(transport=transport, base_url="http://brain") as http:
                return (await http.get("/v1/memories")).status_code

        return asyncio.run(get())

    assert status(("203.0.113.7", 4000)) == 401
    assert status(("::ffff:203.0.113.7", 4000)) == 401
    assert status(("127.0.0.1", 4000)) == 503  # past authentication: the store is not open
    assert status(("::1", 4000)) == 503
    assert status(("::ffff:127.0.0.1", 4000)) == 503


# ---- what a bound token may do ---------------------------------------------------------------------


@dataclass
class Deployment:
    url: str
    store: RagStore
    chat: ChatMemory

    def client(self, who: str) -> httpx.Client:
        token = ADMIN if who == "admin" else TOKENS[who]
        return httpx.Client(base_url=self.url, timeout=60, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def deployment(tmp_path, local_embedder):
    path = tmp_path / "tokens"
    write_tokens(path)
    settings = api_settings(tmp_path, api_token=ADMIN, api_tokens_file=path, summary_every_n=1, summarizer="extractive")
    with open_store(settings, embedder=local_embedder) as store:
        chat = ChatMemory(store, settings, summarizer=ExtractiveSummarizer(), start_worker=False)
        try:
            with LiveServer(create_app(settings, store=store, chat=chat)) as server:
                yield Deployment(server.url, store, chat)
        finally:
            chat.close()


@pytest.fixture
def clients(deployment):
    opened = {who: deployment.client(who) for who in ("admin", *TOKENS)}
    yield opened
    for client in opened.values():
        client.close()


def created(response: httpx.Response) -> dict:
    assert response.status_code == 201, response.text
    return response.json()


def test_a_bound_token_reads_global_and_its_own_memories_only(clients):
    admin, alice, bob = clients["admin"], clients["alice"], clients["bob"]
    shared = created(admin.post("/v1/memories", json={"text": "The office door code changes on Sundays"}))
    mine = created(alice.post("/v1/memories", json={"text": "Alice's door code is 4711", "importance": 5}))
    theirs = created(bob.post("/v1/memories", json={"text": "Bob's door code is 1234", "importance": 5}))
    assert mine["metadata"]["scope"] == "entity:alice" and theirs["metadata"]["scope"] == "entity:bob"
    assert shared["metadata"]["scope"] == "global"

    listed = {m["id"] for m in alice.get("/v1/memories").json()["memories"]}
    assert listed == {shared["id"], mine["id"]}
    hits = alice.get("/v1/memories/search", params={"q": "door code", "k": 10}).json()
    assert hits["entity"] == "alice" and {h["id"] for h in hits["results"]} == {shared["id"], mine["id"]}
    assert alice.get(f"/v1/memories/{shared['id']}").status_code == 200
    assert alice.get(f"/v1/memories/{mine['id']}").status_code == 200
    hidden = alice.get(f"/v1/memories/{theirs['id']}")
    assert hidden.status_code == 404 and "Bob" not in hidden.text
    memory_section = alice.post("/v1/context", json={"user_message": "what is the door code?"}).json()
    assert {m["id"] for m in memory_section["sections"]["memory"]} <= {shared["id"], mine["id"]}
    assert "1234" not in memory_section["prompt"]
    everything = {m["id"] for m in admin.get("/v1/memories").json()["memories"]}
    assert everything == {shared["id"], mine["id"], theirs["id"]}


@pytest.mark.parametrize(
    "method, path, options",
    [
        ("GET", "/v1/memories", {"params": {"entity": "bob"}}),
        ("GET", "/v1/memories/search", {"params": {"q": "door", "entity": "bob"}}),
        ("GET", "/v1/memories/any-id", {"params": {"entity": "bob"}}),
        ("PATCH", "/v1/memories/any-id", {"params": {"entity": "bob"}, "json": {"importance": 1}}),
        ("DELETE", "/v1/memories/any-id", {"params": {"entity": "bob"}}),
        ("POST", "/v1/memories", {"json": {"text": "Bob owes me money", "entity": "bob"}}),
        ("POST", "/v1/context", {"json": {"user_message": "hello", "entity": "bob"}}),
        ("POST", "/v1/exchanges", {"json": {"user_text": "hi", "assistant_text": "hello", "entity": "bob"}}),
        ("GET", "/v1/conversations/conv-x/turns", {"params": {"entity": "bob"}}),
        ("GET", "/v1/conversations/conv-x/summaries", {"params": {"entity": "bob"}}),
    ],
)
def test_a_bound_token_naming_another_entity_is_403(deployment, clients, method, path, options):
    response = clients["alice"].request(method, path, **options)
    assert response.status_code == 403, response.text
    assert response.json()["error"] == "forbidden"
    assert "bound to entity 'alice'" in response.json()["message"]
    assert deployment.store.count() == 0


def test_a_bound_token_may_name_its_own_entity(clients):
    alice = clients["alice"]
    mine = created(alice.post("/v1/memories", json={"text": "Alice likes tea", "entity": "alice"}))
    assert mine["metadata"]["scope"] == "entity:alice"
    assert alice.get("/v1/memories", params={"entity": "alice"}).status_code == 200
    assert alice.get(f"/v1/memories/{mine['id']}", params={"entity": "alice"}).status_code == 200


def test_a_bound_token_creates_memories_in_its_own_scope_only(deployment, clients):
    alice = clients["alice"]
    for scope in ("global", "entity:bob"):
        response = alice.post("/v1/memories", json={"text": "a shared note", "scope": scope})
        assert response.status_code == 403 and "creates memories in scope 'entity:alice' only" in response.text
    assert deployment.store.count() == 0
    own = created(alice.post("/v1/memories", json={"text": "a note", "scope": "entity:alice"}))
    assert own["metadata"]["scope"] == "entity:alice"


def test_a_bound_token_changes_and_deletes_its_own_memories_only(deployment, clients):
    admin, alice, bob = clients["admin"], clients["alice"], clients["bob"]
    shared = created(admin.post("/v1/memories", json={"text": "The office is closed on Sundays"}))
    mine = created(alice.post("/v1/memories", json={"text": "Alice likes green tea"}))
    theirs = created(bob.post("/v1/memories", json={"text": "Bob likes black coffee"}))
    before = {d.id: d.to_dict() for d in deployment.store.get(type="memory")}

    for doc_id, status in [(theirs["id"], 404), (shared["id"], 403)]:
        assert alice.patch(f"/v1/memories/{doc_id}", json={"text": "changed", "importance": 1}).status_code == status
        assert alice.delete(f"/v1/memories/{doc_id}").status_code == status
    assert "global" in alice.delete(f"/v1/memories/{shared['id']}").json()["message"]
    after = {d.id: d.to_dict() for d in deployment.store.get(type="memory")}
    assert after == before

    patched = alice.patch(f"/v1/memories/{mine['id']}", json={"text": "Alice likes white tea", "importance": 4})
    assert patched.status_code == 200 and patched.json()["metadata"]["scope"] == "entity:alice"
    assert alice.delete(f"/v1/memories/{mine['id']}").status_code == 200
    assert {d.id for d in deployment.store.get(type="memory")} == {shared["id"], theirs["id"]}


def test_the_admin_acting_for_an_entity_is_scoped_like_it(deployment, clients):
    admin, bob = clients["admin"], clients["bob"]
    shared = created(admin.post("/v1/memories", json={"text": "The office is closed on Sundays"}))
    theirs = created(bob.post("/v1/memories", json={"text": "Bob likes black coffee"}))
    as_alice = {"entity": "alice"}
    assert admin.get(f"/v1/memories/{theirs['id']}", params=as_alice).status_code == 404
    assert admin.patch(f"/v1/memories/{theirs['id']}", params=as_alice, json={"importance": 1}).status_code == 404
    assert admin.delete(f"/v1/memories/{theirs['id']}", params=as_alice).status_code == 404
    assert admin.patch(f"/v1/memories/{shared['id']}", params=as_alice, json={"importance": 1}).status_code == 403
    assert deployment.store.get_one(theirs["id"]).metadata["importance"] == 3
    # acting for alice, the admin cannot write into another scope either
    clash = admin.post("/v1/memories", json={"text": "x", "entity": "alice", "scope": "entity:bob"})
    assert clash.status_code == 422 and "disagrees" in clash.json()["message"]
    # without an entity the admin may do everything
    assert admin.patch(f"/v1/memories/{theirs['id']}", json={"importance": 1}).status_code == 200
    assert admin.delete(f"/v1/memories/{theirs['id']}").status_code == 200
    assert created(admin.post("/v1/memories", json={"text": "a note about bob", "scope": "entity:bob"}))


def test_patch_cannot_send_reserved_or_ownership_keys(deployment, clients):
    alice = clients["alice"]
    mine = created(alice.post("/v1/memories", json={"text": "Alice likes green tea"}))
    before = deployment.store.get([mine["id"]], include_embeddings=True)[0]
    for key, value in [
        ("scope", "global"),
        ("entity", "bob"),
        ("embedding", [0.1] * 384),
        ("ts_epoch", 0),
        ("type", "faq"),
        ("created_at", "2020-01-01T00:00:00+00:00"),
        ("source", "kb"),
    ]:
        response = alice.patch(f"/v1/memories/{mine['id']}", json={"metadata": {key: value}})
        assert response.status_code == 422, (key, response.text)
        assert f"metadata.{key}" in response.json()["message"]
    after = deployment.store.get([mine["id"]], include_embeddings=True)[0]
    assert after.metadata == before.metadata and (after.embedding == before.embedding).all()
    assert alice.patch(f"/v1/memories/{mine['id']}", json={"metadata": {"mood": "calm"}}).status_code == 200


def test_a_conversation_belongs_to_the_entity_that_started_it(deployment, clients):
    admin, alice, bob = clients["admin"], clients["alice"], clients["bob"]
    first = created(
        alice.post("/v1/exchanges", json={"user_text": "My door code is 4711", "assistant_text": "Noted, Alice."})
    )
    conv = first["conversation_id"]
    created(
        alice.post(
            "/v1/exchanges",
            json={"conversation_id": conv, "user_text": "And my PIN is 9999", "assistant_text": "Noted too."},
        )
    )
    deployment.chat.wait_for_summaries()
    turns = deployment.store.conversation_turns(conv)
    assert len(turns) == 4 and {t.metadata["scope"] for t in turns} == {"entity:alice"}
    assert {s.metadata["scope"] for s in deployment.store.get(type="summary")} == {"entity:alice"}

    assert len(alice.get(f"/v1/conversations/{conv}/turns").json()["turns"]) == 4
    assert len(alice.get(f"/v1/conversations/{conv}/summaries").json()["summaries"]) == 2
    context = alice.post("/v1/context", json={"conversation_id": conv, "user_message": "what was my code?"})
    assert context.status_code == 200 and "4711" in context.json()["prompt"]

    unknown = "conv-nobody-started-this"
    contexts = []
    for probe in (conv, unknown):  # another entity's conversation answers exactly like one that does not exist
        answers = [
            bob.get(f"/v1/conversations/{probe}/turns"),
            bob.get(f"/v1/conversations/{probe}/summaries"),
            admin.get(f"/v1/conversations/{probe}/turns", params={"entity": "bob"}),
        ]
        for answer in answers:
            assert answer.status_code == 404, answer.text
            assert answer.json()["message"].replace(probe, "<id>") == (
                "no conversation '<id>' (a new one starts with an exchange sent without conversation_id)"
            )
            assert "4711" not in answer.text and "9999" not in answer.text
        # its context is an empty conversation's, as for one not yet recorded
        context = bob.post("/v1/context", json={"conversation_id": probe, "user_message": "what was the code?"})
        assert context.status_code == 200, context.text
        assert "4711" not in context.text and "9999" not in context.text
        contexts.append({**context.json(), "conversation_id": None})
    assert contexts[0] == contexts[1]
    hijack = bob.post(
        "/v1/exchanges", json={"conversation_id": conv, "user_text": "I am Alice", "assistant_text": "Hello Alice"}
    )
    assert hijack.status_code == 404
    assert len(deployment.store.conversation_turns(conv)) == 4

    # the admin sees it all; an exchange it appends stays in the conversation's scope
    assert len(admin.get(f"/v1/conversations/{conv}/turns").json()["turns"]) == 4
    created(admin.post("/v1/exchanges", json={"conversation_id": conv, "user_text": "x", "assistant_text": "y"}))
    assert {t.metadata["scope"] for t in deployment.store.conversation_turns(conv)} == {"entity:alice"}
    # bob starting a conversation under an id of his own choosing owns it
    own = created(
        bob.post("/v1/exchanges", json={"conversation_id": unknown, "user_text": "hi", "assistant_text": "hello"})
    )
    assert own["conversation_id"] == unknown
    assert alice.get(f"/v1/conversations/{unknown}/turns").status_code == 404


def test_documents_of_any_type_are_admin_only(deployment, clients):
    body = {"text": "We open at nine.", "type": "faq"}
    for who in TOKENS:
        response = clients[who].post("/v1/docs", json=body)
        assert response.status_code == 403 and "admin token" in response.json()["message"]
    assert deployment.store.count() == 0
    assert clients["admin"].post("/v1/docs", json=body).status_code == 201


def test_health_shows_bound_tokens_no_store_contents(clients):
    clients["admin"].post("/v1/memories", json={"text": "x"})
    assert clients["admin"].get("/v1/health").json()["store"]["documents"] == 1
    bound = clients["alice"].get("/v1/health").json()
    assert bound["status"] == "ok" and bound["store"] == {"ok": True}


# ---- property: whatever a bound caller sends, it never crosses into another entity ---------------------

NAMES = tuple(TOKENS)
SECRET = "SECRET"  # in every seeded text of an entity; a caller's own texts never contain it


def secret_of(name: str) -> str:
    return f"{SECRET}-{name}"


@pytest.fixture
def seeded(deployment, clients):
    """Each entity with two memories and a conversation of two exchanges (summarised); one global memory."""
    ids = {"memory": {}, "conversation": {}}
    ids["memory"]["global"] = [
        created(clients["admin"].post("/v1/memories", json={"text": "the office is closed on Sundays"}))["id"]
    ]
    for name in NAMES:
        client = clients[name]
        ids["memory"][name] = [
            created(
                client.post(
                    "/v1/memories", json={"text": f"{secret_of(name)} door code {n}", "importance": 5, "tags": ["home"]}
                )
            )["id"]
            for n in (1, 2)
        ]
        conv = created(
            client.post(
                "/v1/exchanges",
                json={"user_text": f"{secret_of(name)} my PIN", "assistant_text": f"{secret_of(name)} noted"},
            )
        )
        created(
            client.post(
                "/v1/exchanges",
                json={
                    "conversation_id": conv["conversation_id"],
                    "user_text": f"{secret_of(name)} my pet",
                    "assistant_text": f"{secret_of(name)} a cat",
                },
            )
        )
        ids["conversation"][name] = conv["conversation_id"]
    deployment.chat.wait_for_summaries()
    return ids


def others_state(store: RagStore, caller: str) -> dict[str, tuple]:
    """Everything the caller must not change: other entities' documents and global memories."""
    own = f"entity:{caller}"
    state = {}
    for doc in store.get():
        meta = doc.metadata
        if meta.get("scope") == own:
            continue
        state[doc.id] = (
            doc.text,
            meta.get("scope"),
            meta.get("importance"),
            tuple(meta.get("tags") or ()),
            meta.get("timestamp"),
            meta.get("conversation_id"),
            meta.get("turn_index"),
        )
    return state


def requests_strategy(ids: dict) -> st.SearchStrategy:
    memory_ids = [i for per in ids["memory"].values() for i in per] + ["no-such-memory"]
    conversations = list(ids["conversation"].values()) + ["conv-unknown", "not-a-conv"]
    entity = st.sampled_from([None, "", "dave", *NAMES])
    text = st.sampled_from(["door code", "my cat", "what is my PIN?", "tea", "  "])
    maybe = lambda strategy: st.none() | strategy  # noqa: E731
    metadata = maybe(
        st.dictionaries(
            st.sampled_from(["scope", "entity", "mood", "conversation_id", "embedding"]),
            st.sampled_from(["global", "entity:bob", "calm", ids["conversation"]["bob"]]),
            max_size=2,
        )
    )

    def clean(data: dict) -> dict:
        return {k: v for k, v in data.items() if v is not None}

    def params(**values):
        return st.fixed_dictionaries({}, optional=values).map(clean)

    memory_path = st.sampled_from(memory_ids).map(lambda i: f"/v1/memories/{i}")
    conversation = st.sampled_from(conversations)
    return st.one_of(
        st.tuples(
            st.just("GET"),
            st.just("/v1/memories"),
            params(entity=entity, tags=st.just("home"), offset=st.integers(0, 3)),
            st.none(),
        ),
        st.tuples(
            st.just("GET"),
            st.just("/v1/memories/search"),
            params(entity=entity, q=text, k=st.integers(1, 20)),
            st.none(),
        ),
        st.tuples(st.just("GET"), memory_path, params(entity=entity), st.none()),
        st.tuples(st.just("DELETE"), memory_path, params(entity=entity), st.none()),
        st.tuples(
            st.just("PATCH"),
            memory_path,
            params(entity=entity),
            st.fixed_dictionaries(
                {},
                optional={
                    "text": text,
                    "importance": st.integers(0, 6),
                    "metadata": metadata,
                    "replace_metadata": st.booleans(),
                },
            ),
        ),
        st.tuples(
            st.just("POST"),
            st.just("/v1/memories"),
            st.just({}),
            st.fixed_dictionaries(
                {"text": text},
                optional={
                    "entity": entity,
                    "scope": st.sampled_from(["global", "entity:bob", "entity:alice"]),
                    "conversation_id": conversation,
                    "metadata": metadata,
                },
            ).map(clean),
        ),
        st.tuples(
            st.just("POST"),
            st.just("/v1/context"),
            st.just({}),
            st.fixed_dictionaries(
                {"user_message": text}, optional={"entity": entity, "conversation_id": conversation}
            ).map(clean),
        ),
        st.tuples(
            st.just("POST"),
            st.just("/v1/exchanges"),
            st.just({}),
            st.fixed_dictionaries(
                {"user_text": text, "assistant_text": text},
                optional={"entity": entity, "conversation_id": conversation},
            ).map(clean),
        ),
        st.tuples(
            st.just("GET"),
            conversation.map(lambda c: f"/v1/conversations/{c}/turns"),
            params(entity=entity, k=st.integers(1, 5)),
            st.none(),
        ),
        st.tuples(
            st.just("GET"),
            conversation.map(lambda c: f"/v1/conversations/{c}/summaries"),
            params(entity=entity),
            st.none(),
        ),
        st.tuples(
            st.just("POST"),
            st.just("/v1/docs"),
            st.just({}),
            st.just(
                {
                    "text": "hi",
                    "type": "turn",
                    "metadata": {"conversation_id": ids["conversation"]["bob"], "role": "user"},
                }
            ),
        ),
    )


def test_property_no_bound_token_crosses_into_another_entity(deployment, clients, seeded):
    @hypothesis_settings(
        max_examples=60,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(caller=st.sampled_from(NAMES), request=st.data())
    def check(caller, request):
        method, path, params, body = request.draw(requests_strategy(seeded))
        before = others_state(deployment.store, caller)
        response = clients[caller].request(method, path, params=params, json=body)
        assert response.status_code < 500, response.text
        for other in NAMES:
            if other != caller:
                assert secret_of(other) not in response.text, (method, path, params, body, response.text)
        if response.status_code < 300 and "entity" in params | (body or {}):
            assert (params | (body or {}))["entity"] == caller  # naming another entity never succeeds
        assert others_state(deployment.store, caller) == before, (method, path, params, body)

    check()
