"""The scope rule as a property: whatever Bob's documents are (every type, each written through any entry point:
the library, the HTTP API with Bob's token or the admin's, MCP over HTTP), nothing of them reaches Alice through
any read (the HTTP API with her token and the admin's acting for her, the memory browser's endpoints, MCP over
HTTP and over stdio with ``--entity alice``, her context prompt, the library's reads, a PAM export for her).

Every text of Bob's carries :data:`MARK`; no text of anyone else does, so a response that contains it leaked.
On embedded Chroma and on a real ``chroma run`` server."""

from __future__ import annotations

import json
import sys
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from mcp import StdioServerParameters, stdio_client

import brain
from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.features.pam import export_pam
from brain.providers.summarizers import ExtractiveSummarizer
from brain.shells.api import create_app
from tests.conftest import LiveServer, api_settings
from tests.mcp_client import McpClient, brain_command, http, project, server_env

pytestmark = pytest.mark.subprocess

MARK = "bobsecret"
ADMIN = "admin-token-0123456789abcdef"
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}
ALICE_CONVERSATIONS = ["conv-alice-1", "conv-alice-2"]
# no query holds MARK: several answers repeat their query
QUERIES = ["the locker code", "where are the lockers?", "what does Alice like?", "who are you?"]
WORDS = st.sampled_from(["locker", "code", "tea", "garden", "lockers", "photo", "tone", "plans", "cat", "Thursday"])


@dataclass
class Deployment:
    url: str
    store: Any
    chat: ChatMemory
    workdir: Path
    env: dict[str, str]
    bob_conversations: list[str] = field(default_factory=list)
    counter: int = 0

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server)])
def deployment(request, tmp_path, local_embedder):
    workdir = project(tmp_path / "project")
    tokens = workdir / "config" / "api-tokens"
    tokens.write_text("".join(f"{who} {token}\n" for who, token in TOKENS.items()), encoding="utf-8")
    extra: dict[str, Any] = {}
    env = {"BRAIN_DATA_DIR": str(workdir / "data")}
    if request.param == "server":
        url, collection = request.getfixturevalue("chroma_server"), f"iso-{uuid.uuid4().hex[:12]}"
        extra = {"chroma_url": url, "collection": collection}
        env |= {"BRAIN_CHROMA_URL": url, "BRAIN_COLLECTION": collection}
    settings = api_settings(
        tmp_path,
        api_token=ADMIN,
        api_tokens_file=tokens,
        api_mcp=True,
        summary_every_n=1,
        summarizer="extractive",
        **extra,
    ).model_copy(update={"data_dir": workdir / "data"})
    store = open_store(settings, embedder=local_embedder)
    chat = ChatMemory(store, settings, summarizer=ExtractiveSummarizer(), start_worker=False)
    try:
        with LiveServer(create_app(settings, store=store, chat=chat)) as server:
            deployment = Deployment(server.url, store, chat, workdir, env)
            seed_alice(deployment)
            yield deployment
    finally:
        chat.close()
        store.close()


def seed_alice(d: Deployment) -> None:
    """Alice's conversations and memory, global knowledge, memories and the persona: what she may read."""
    with d.client(TOKENS["alice"]) as alice:
        for conversation in ALICE_CONVERSATIONS:
            for n in (1, 2):
                answer = alice.post(
                    "/v1/exchanges",
                    json={
                        "conversation_id": conversation,
                        "user_text": f"I like green tea, part {n}",
                        "assistant_text": "Noted: green tea.",
                    },
                )
                assert answer.status_code == 201, answer.text
        assert alice.post("/v1/memories", json={"text": "Alice likes green tea"}).status_code == 201
    d.store.upsert_docs(
        [
            {"text": "The lockers are on the second floor.", "type": "faq", "topic": "lockers", "kb_file": "kb.md"},
            {
                "text": "You are Juniper, the office assistant.",
                "type": "persona",
                "topic": "core",
                "position": 0,
                "sections": 1,
                "version": "2026-01-01T00:00:00+00:00",
            },
            {"text": "The office closes at six.", "type": "memory"},
        ]
    )
    d.chat.wait_for_summaries()


# ---- Bob's writes --------------------------------------------------------------------------------------


def bob_write(d: Deployment, way: str, doc_type: str, words: list[str], target: str) -> None:
    """One document of Bob's, of ``doc_type``, written ``way``; ``target`` picks the conversation id (one of
    Alice's, or a new one of Bob's). A write the rules refuse (Bob appending to Alice's conversation) is fine:
    the property is about what Alice reads."""
    d.counter += 1
    text = f"{MARK}{d.counter} " + " ".join(words)
    conversation = ALICE_CONVERSATIONS[0] if target == "alice's" else f"conv-bob-{d.counter}"
    bob = {"scope": "entity:bob"}
    docs = {
        "faq": {"text": text, "type": "faq", "topic": "lockers", "kb_file": "kb.md", **bob},
        "persona": {
            "text": text,
            "type": "persona",
            "topic": "core",
            "position": 0,
            "sections": 1,
            "version": f"2030-01-01T00:00:{d.counter % 60:02d}+00:00",
            **bob,
        },
        "summary": {
            "text": text,
            "type": "summary",
            "conversation_id": conversation,
            "turn_range": "1-2",
            "summary_index": 100 + d.counter,
            **bob,
        },
        "memory": {"text": text, "type": "memory", "importance": 5, **bob},
        # a turn carrying its own position: an operator's copy, which the owner rule does not check
        "turn": {
            "text": text,
            "type": "turn",
            "conversation_id": conversation,
            "role": "user",
            "turn_index": 100 + d.counter,
            **bob,
        },
    }
    if way == "library":
        if doc_type == "turn" and target == "new":
            d.chat.record_exchange(conversation, text, f"{MARK} reply", entity="bob")
        else:
            d.store.upsert_docs([docs[doc_type]])
    elif way == "http admin /v1/docs":
        doc = docs[doc_type]
        body = {
            "text": doc["text"],
            "type": doc["type"],
            "metadata": {k: v for k, v in doc.items() if k not in ("text", "type")},
        }
        with d.client(ADMIN) as admin:
            answer = admin.post("/v1/docs", json=body)
            assert answer.status_code == 201, answer.text
    elif way == "http bob":
        with d.client(TOKENS["bob"]) as client:
            if doc_type == "memory":
                answer = client.post("/v1/memories", json={"text": text, "importance": 5})
            else:  # turns (and, from them, summaries) through exchanges
                answer = client.post(
                    "/v1/exchanges",
                    json={"conversation_id": conversation, "user_text": text, "assistant_text": f"{MARK} reply"},
                )
            assert answer.status_code in (201, 404), answer.text  # 404: Alice's id is not Bob's
    else:  # mcp over http, with Bob's token
        with http(f"{d.url}/mcp", TOKENS["bob"]) as client:
            if doc_type == "memory":
                client.call("remember", text=text, importance=5)
            else:
                answer = client.sync(
                    client.session.call_tool(
                        "record_exchange",
                        {"user_text": text, "assistant_text": f"{MARK} reply", "conversation_id": conversation},
                    )
                )
                assert not answer.is_error or "no conversation" in answer.content[0].text
    if target == "new":
        d.bob_conversations.append(conversation)
    d.chat.wait_for_summaries()


# ---- Alice's reads ---------------------------------------------------------------------------------------


def http_reads(d: Deployment) -> list[tuple[str, str]]:
    """(what, the response's text) for every HTTP read, with Alice's token and the admin's acting for her."""
    out = []
    conversations = ALICE_CONVERSATIONS + d.bob_conversations[-3:]
    for who, token, entity in (("alice", TOKENS["alice"], None), ("admin for alice", ADMIN, "alice")):
        params = {"entity": entity} if entity else {}
        with d.client(token) as client:
            reads = [
                ("GET", "/v1/memories", params, None),
                ("GET", "/v1/knowledge", params, None),
                ("GET", "/v1/persona", params, None),
                ("GET", "/v1/conversations", params, None),
            ]
            reads += [("GET", "/v1/memories/search", {**params, "q": q, "k": 50}, None) for q in QUERIES[:2]]
            for conversation in conversations:
                reads += [
                    ("GET", f"/v1/conversations/{conversation}/turns", params, None),
                    ("GET", f"/v1/conversations/{conversation}/summaries", params, None),
                ]
            for conversation in [None, *conversations]:
                body = {
                    "user_message": QUERIES[0],
                    **({"entity": entity} if entity else {}),
                    **({"conversation_id": conversation} if conversation else {}),
                }
                reads.append(("POST", "/v1/context", {}, body))
            for method, path, query, body in reads:
                answer = client.request(method, path, params=query, json=body)
                assert answer.status_code in (200, 404), (path, answer.text)
                out.append((f"{who} {method} {path} {query} {body}", answer.text))
    return out


def mcp_reads(client: McpClient, conversations: list[str], entity: str | None = None) -> list[tuple[str, str]]:
    """Every MCP tool and resource that reads, as the client's caller (``entity`` when it must name her)."""
    named = {"entity": entity} if entity else {}
    out = []
    for query in QUERIES[:2]:
        out.append(("recall", json.dumps(client.call("recall", query=query, k=50, **named))))
        out.append(("search_knowledge", json.dumps(client.call("search_knowledge", query=query, k=50, **named))))
        for conversation in [None, *conversations]:
            result = client.sync(
                client.session.call_tool(
                    "get_context",
                    {"user_message": query, **named, **({"conversation_id": conversation} if conversation else {})},
                )
            )
            out.append((f"get_context {conversation}", json.dumps(result.structured_content) + str(result.content)))
    out.append(("list_memories", json.dumps(client.call("list_memories", limit=100, **named))))
    out.append(("persona", client.read("brain://persona")))
    for conversation in conversations:
        try:
            out.append((f"conversation {conversation}", client.read(f"brain://conversations/{conversation}")))
        except Exception as exc:  # noqa: BLE001 - a refused read is an MCP error: its message must not leak either
            out.append((f"conversation {conversation}", str(exc)))
    return out


def library_reads(d: Deployment, tmp: Path) -> list[tuple[str, str]]:
    b = brain.Brain(d.store, chat=d.chat)
    out = []
    for doc_type in (None, "memory", "faq", "persona", "summary", "turn"):
        for query in QUERIES[:2]:
            hits = b.search(query, type=doc_type, k=50, entity="alice")
            out.append((f"search {doc_type}", json.dumps([h.to_dict() for h in hits], default=str)))
    out.append(("get", json.dumps([doc.to_dict() for doc in d.store.get(entity="alice")], default=str)))
    for conversation in [None, *ALICE_CONVERSATIONS]:
        context = d.chat.build_context(conversation, QUERIES[0], entity="alice")
        out.append((f"context {conversation}", json.dumps(context.to_dict(), default=str)))
    export = tmp / f"export-{d.counter}"
    export_pam(d.store, export, entity="alice")
    for path in sorted(export.rglob("*")):
        if path.is_file():
            out.append((f"export {path.name}", path.read_bytes().decode("utf-8", "replace")))
    return out


def leaks(reads: list[tuple[str, str]]) -> list[str]:
    return [
        f"{what}: ...{text[max(0, text.find(MARK) - 200) : text.find(MARK) + 100]}..."
        for what, text in reads
        if MARK in text
    ]


def stdio_reads(d: Deployment, conversations: list[str]) -> list[tuple[str, str]]:
    """``brain mcp --entity alice`` over stdio, on the same data (the embedded store is closed first)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=brain_command(d.workdir, "--entity", "alice")[1:],
        cwd=d.workdir,
        env=server_env(d.workdir, **d.env),
    )
    stderr_path = d.workdir / "stdio-stderr.log"

    @asynccontextmanager
    async def connect():
        with open(stderr_path, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams

    with McpClient(connect, stderr_path) as client:
        return mcp_reads(client, conversations)


# ---- the property ------------------------------------------------------------------------------------------

WAYS = ["library", "http admin /v1/docs", "http bob", "mcp http bob"]
TYPES_BY_WAY = {
    "library": ["faq", "persona", "summary", "memory", "turn"],
    "http admin /v1/docs": ["faq", "persona", "summary", "memory", "turn"],
    "http bob": ["memory", "turn"],
    "mcp http bob": ["memory", "turn"],
}


def writes() -> st.SearchStrategy:
    way = st.sampled_from(WAYS)
    return way.flatmap(
        lambda w: st.tuples(
            st.just(w),
            st.sampled_from(TYPES_BY_WAY[w]),
            st.lists(WORDS, min_size=1, max_size=6),
            st.sampled_from(["alice's", "new"]),
        )
    )


def test_nothing_bob_writes_reaches_alice_on_any_read(deployment, tmp_path):
    with http(f"{deployment.url}/mcp", TOKENS["alice"]) as alice_mcp:

        @hypothesis_settings(
            max_examples=12,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(batch=st.lists(writes(), min_size=1, max_size=3))
        def check(batch):
            for way, doc_type, words, target in batch:
                bob_write(deployment, way, doc_type, words, target)
            reads = http_reads(deployment) + library_reads(deployment, tmp_path)
            reads += mcp_reads(alice_mcp, ALICE_CONVERSATIONS + deployment.bob_conversations[-2:])
            assert not leaks(reads), leaks(reads)[:3]

        check()
        # every type of Bob's is stored by now (the examples may not have drawn each): write one of each
        for doc_type in TYPES_BY_WAY["library"]:
            bob_write(deployment, "library", doc_type, ["locker", "code"], "alice's")
        reads = http_reads(deployment) + library_reads(deployment, tmp_path)
        reads += mcp_reads(alice_mcp, ALICE_CONVERSATIONS + deployment.bob_conversations[-2:])
        assert not leaks(reads), leaks(reads)[:3]
    stored = deployment.store.get(where={"scope": "entity:bob"})
    assert {d.metadata["type"] for d in stored} == {"faq", "persona", "summary", "memory", "turn"}
    # Bob's own reads do find his documents: the property is not vacuous
    with deployment.client(TOKENS["bob"]) as bob:
        assert MARK in bob.get("/v1/knowledge").text and MARK in bob.get("/v1/persona").text
    conversations = ALICE_CONVERSATIONS + deployment.bob_conversations[-2:]
    if deployment.store.settings.chroma_url is None:
        deployment.chat.close()
        deployment.store.close()  # the stdio server opens the embedded store itself
    assert not leaks(stdio_reads(deployment, conversations))
