"""The memory browser's reads and writes over real HTTP: memories filtered and newest first, a memory's
status, the conversations by last activity, the knowledge base, the persona, health detail, and
forgetting an entity (DELETE /v1/entities/{name}) with the admin token and entity-bound tokens."""

from __future__ import annotations

import httpx
import pytest

from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.providers.summarizers import ExtractiveSummarizer
from brain.shells.api import create_app
from tests.conftest import LiveServer, api_settings
from tests.http.test_api_security import ADMIN, TOKENS, write_tokens


@pytest.fixture
def deployed(tmp_path, local_embedder):
    """A server with the admin token and entity-bound tokens, and clients for each."""
    path = tmp_path / "tokens"
    write_tokens(path)
    (tmp_path / "persona.md").write_text("# Identity\nI am Brainy.\n\n# Tone\nWarm and brief.\n")
    settings = api_settings(
        tmp_path,
        api_token=ADMIN,
        api_tokens_file=path,
        summary_every_n=2,
        summarizer="extractive",
        persona_path=tmp_path / "persona.md",
    )
    with open_store(settings, embedder=local_embedder) as store:
        chat = ChatMemory(store, settings, summarizer=ExtractiveSummarizer(), start_worker=False)
        try:
            with LiveServer(create_app(settings, store=store, chat=chat)) as server:
                clients = {
                    who: httpx.Client(
                        base_url=server.url,
                        timeout=60,
                        headers={"Authorization": f"Bearer {ADMIN if who == 'admin' else TOKENS[who]}"},
                    )
                    for who in ("admin", *TOKENS)
                }
                try:
                    yield store, chat, clients
                finally:
                    for client in clients.values():
                        client.close()
        finally:
            chat.close()


def ok(response: httpx.Response, status: int = 200) -> dict:
    assert response.status_code == status, response.text
    return response.json()


def memory(client: httpx.Client, text: str, **fields) -> dict:
    return ok(client.post("/v1/memories", json={"text": text, **fields}), 201)


# ---- the library calls behind the routes ----------------------------------------------------------


def test_list_memories_library_filters_orders_and_pages(embedded_store):
    from brain.model.errors import ValidationError
    from brain.store.memory_listing import list_memories

    store = embedded_store
    ids = [
        store.upsert_memory(
            f"fact {i}",
            importance=1 + i % 5,
            timestamp=f"2026-02-{10 + i:02d}T00:00:00Z",
            entity="ada" if i % 2 else None,
        )
        for i in range(6)
    ]
    store.update_memory(ids[2], metadata={"status": "retracted"}, timestamp="2026-02-12T00:00:00Z")
    assert [d.id for d in list_memories(store, order="newest", history=True)] == ids[::-1]
    assert [d.id for d in list_memories(store, order="newest")] == [i for i in ids[::-1] if i != ids[2]]  # current
    assert [d.id for d in list_memories(store, order="newest", limit=2, offset=1)] == [ids[4], ids[3]]
    assert [d.id for d in list_memories(store, scopes=["global"], order="newest", history=True)] == [
        ids[4],
        ids[2],
        ids[0],
    ]
    assert [d.id for d in list_memories(store, status=["retracted"])] == [ids[2]]
    assert [d.id for d in list_memories(store, status=["active"], importance=[1, 3, 5], order="newest")] == [
        ids[5],
        ids[4],
        ids[0],
    ]
    for bad in ({"order": "oldest"}, {"importance": [0]}, {"importance": [True]}, {"status": ["gone"]}):
        with pytest.raises(ValidationError):
            list_memories(store, **bad)


def test_list_conversations_library_follows_the_access_rule(embedded_store):
    from brain.app.browse import list_conversations

    store = embedded_store
    store.upsert_turn("conv-a", "hi", "hello", user_ts="2026-01-01T00:00:00Z", scope="entity:ada")
    store.upsert_turn("conv-g", "hi", "hello", user_ts="2026-01-03T00:00:00Z")
    store.upsert_turn("conv-m", "hi", "hello", user_ts="2026-01-02T00:00:00Z", scope="entity:ada")
    # appending in another scope is refused (a conversation has one owner); a copy with its positions is not
    store.upsert_docs(
        [
            {
                "text": t,
                "type": "turn",
                "conversation_id": "conv-m",
                "role": role,
                "turn_index": n,
                "timestamp": "2026-01-04T00:00:00Z",
                "scope": "entity:bob",
            }
            for n, (t, role) in enumerate([("and", "user"), ("more", "assistant")], start=3)
        ]
    )
    every = list_conversations(store)
    assert [c.conversation_id for c in every] == ["conv-m", "conv-g", "conv-a"]
    assert every[0].entity == "ada" and every[0].turns == 4 and every[1].entity is None
    assert [c.conversation_id for c in list_conversations(store, acting="ada")] == ["conv-a"]  # mixed: nobody's
    assert list_conversations(store, acting="carol") == []


# ---- memories: filters, order, status ------------------------------------------------------------


def test_memories_newest_first_paged_and_filtered(deployed):
    _, _, c = deployed
    admin = c["admin"]
    made = [
        memory(admin, f"memory number {i}", importance=1 + i % 5, timestamp=f"2026-01-{10 + i:02d}T00:00:00Z")
        for i in range(7)
    ]
    newest = ok(admin.get("/v1/memories", params={"order": "newest", "limit": 3}))
    assert [m["id"] for m in newest["memories"]] == [m["id"] for m in made[::-1][:3]]
    assert newest["limit"] == 3 and newest["offset"] == 0
    rest = ok(admin.get("/v1/memories", params={"order": "newest", "limit": 50, "offset": 3}))["memories"]
    assert [m["id"] for m in rest] == [m["id"] for m in made[::-1][3:]]
    picked = ok(admin.get("/v1/memories", params=[("importance", 1), ("importance", 5), ("order", "newest")]))
    assert [m["metadata"]["importance"] for m in picked["memories"]] == [1, 5, 1]
    stored = ok(admin.get("/v1/memories"))["memories"]  # the default order stays storage order
    assert {m["id"] for m in stored} == {m["id"] for m in made}


def test_memory_status_is_changed_with_patch_and_filtered(deployed):
    store, _, c = deployed
    admin = c["admin"]
    kept = memory(admin, "Ada drinks oat milk")
    wrong = memory(admin, "Ada drinks cow milk")
    retracted = ok(admin.patch(f"/v1/memories/{wrong['id']}", json={"status": "retracted"}))
    assert retracted["metadata"]["status"] == "retracted"
    assert [h.id for h in store.retrieve_memories("what milk does Ada drink", k=5, relevance=False)] == [kept["id"]]
    only = ok(admin.get("/v1/memories", params={"status": "retracted"}))["memories"]
    assert [m["id"] for m in only] == [wrong["id"]]
    active = ok(admin.get("/v1/memories", params={"status": "active", "order": "newest"}))["memories"]
    assert [m["id"] for m in active] == [kept["id"]]
    back = ok(admin.patch(f"/v1/memories/{wrong['id']}", json={"status": "active"}))
    assert back["metadata"]["status"] == "active"
    assert {h.id for h in store.retrieve_memories("what milk does Ada drink", k=5, relevance=False)} == {
        kept["id"],
        wrong["id"],
    }


@pytest.mark.parametrize(
    "params, field",
    [
        ({"order": "oldest"}, "order"),
        ({"importance": 0}, "importance"),
        ({"importance": 6}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"status": "gone"}, "status"),
    ],
)
def test_bad_memory_filters_are_422_naming_the_field(deployed, params, field):
    _, _, c = deployed
    response = c["admin"].get("/v1/memories", params=params)
    assert response.status_code == 422, response.text
    assert field in response.json()["message"]


def test_bad_status_patch_is_422_and_changes_nothing(deployed):
    store, _, c = deployed
    made = memory(c["admin"], "Ada likes plums")
    for body in ({"status": "forgotten"}, {"status": "retracted", "metadata": {"status": "active"}}):
        response = c["admin"].patch(f"/v1/memories/{made['id']}", json=body)
        assert response.status_code == 422, response.text
        assert "status" in response.json()["message"]
    assert "status" not in store.get_one(made["id"]).metadata


def test_a_bound_token_lists_only_its_own_and_global_memories(deployed):
    _, _, c = deployed
    memory(c["admin"], "the office closes at six")
    mine = memory(c["alice"], "Alice likes jazz")
    memory(c["bob"], "Bob likes metal")
    listed = ok(c["alice"].get("/v1/memories", params={"order": "newest"}))["memories"]
    assert {m["text"] for m in listed} == {"the office closes at six", mine["text"]}
    assert c["alice"].get("/v1/memories", params={"entity": "bob"}).status_code == 403


# ---- conversations ----------------------------------------------------------------------------------


def exchange(client: httpx.Client, user: str, conversation: str | None = None, **fields) -> dict:
    body = {"user_text": user, "assistant_text": f"reply to {user}", **fields}
    if conversation is not None:
        body["conversation_id"] = conversation
    return ok(client.post("/v1/exchanges", json=body), 201)


def test_conversations_by_last_activity_with_counts(deployed):
    _, chat, c = deployed
    first = exchange(c["alice"], "hello", timestamp="2026-03-01T10:00:00Z")["conversation_id"]
    second = exchange(c["bob"], "hi there", timestamp="2026-03-02T10:00:00Z")["conversation_id"]
    exchange(c["alice"], "again", first, timestamp="2026-03-03T10:00:00Z")
    chat.wait_for_summaries(60)
    listed = ok(c["admin"].get("/v1/conversations"))
    assert listed["limit"] == 50 and listed["offset"] == 0
    assert [x["conversation_id"] for x in listed["conversations"]] == [first, second]
    top = listed["conversations"][0]
    assert top["entity"] == "alice" and top["turns"] == 4 and top["summaries"] >= 1
    assert top["last_activity"].startswith("2026-03-03T10:00:00")
    assert listed["conversations"][1] == {
        "conversation_id": second,
        "entity": "bob",
        "turns": 2,
        "summaries": 0,
        "last_activity": listed["conversations"][1]["last_activity"],
        "formation": {"pending": 0, "failed": 0, "done": 0},
    }
    paged = ok(c["admin"].get("/v1/conversations", params={"limit": 1, "offset": 1}))["conversations"]
    assert [x["conversation_id"] for x in paged] == [second]
    assert [x["conversation_id"] for x in ok(c["alice"].get("/v1/conversations"))["conversations"]] == [first]
    assert [
        x["conversation_id"] for x in ok(c["admin"].get("/v1/conversations", params={"entity": "bob"}))["conversations"]
    ] == [second]
    assert c["alice"].get("/v1/conversations", params={"entity": "bob"}).status_code == 403
    assert c["admin"].get("/v1/conversations", params={"limit": 0}).status_code == 422


# ---- knowledge, persona, health -------------------------------------------------------------------


def test_knowledge_by_file_and_topic(deployed):
    store, _, c = deployed
    store.upsert_docs(
        [
            {
                "text": "Returns are accepted for 30 days.",
                "type": "faq",
                "topic": "returns",
                "kb_file": "shop.md",
                "kb_part": 1,
            },
            {"text": "We ship worldwide.", "type": "faq", "topic": "shipping", "kb_file": "shop.md"},
            {"text": "Opening hours are 9 to 5.", "type": "faq", "topic": "hours", "kb_file": "about.md"},
            {"text": "A loose entry.", "type": "faq"},
        ]
    )
    files = ok(c["admin"].get("/v1/knowledge"))["files"]
    assert [f["kb_file"] for f in files] == ["about.md", "shop.md", None]
    shop = files[1]
    assert [t["topic"] for t in shop["topics"]] == ["returns", "shipping"]
    assert shop["topics"][0]["documents"][0]["text"] == "Returns are accepted for 30 days."
    assert set(shop["topics"][0]["documents"][0]) == {"id", "text", "metadata"}
    assert ok(c["alice"].get("/v1/knowledge"))["files"] == files  # the knowledge base is nobody's secret


def test_persona_by_section(deployed, tmp_path):
    store, _, c = deployed
    assert ok(c["admin"].get("/v1/persona")) == {
        "version": None,
        "source": str(tmp_path / "persona.md"),
        "sections": [],
    }
    from brain.features.persona import load_persona

    loaded = load_persona(store, tmp_path / "persona.md")
    persona = ok(c["admin"].get("/v1/persona"))
    assert persona["version"] == loaded.version
    assert [(s["title"], s["text"]) for s in persona["sections"]] == [
        ("Identity", "I am Brainy."),
        ("Tone", "Warm and brief."),
    ]


def test_health_detail_has_counts_and_the_mirror_verify_summary(deployed):
    _, _, c = deployed
    memory(c["admin"], "the office closes at six")
    exchange(c["alice"], "hello")
    detail = ok(c["admin"].get("/v1/health"))
    assert detail["counts"]["memory"] == 1 and detail["counts"]["turn"] == 2
    assert "verify" not in detail["mirror"]  # a probe's poll does not read the whole store
    assert "reachable" in detail["summariser"]
    verified = ok(c["admin"].get("/v1/health", params={"verify": "true"}))
    assert verified["mirror"]["verify"]["ok"] is True and verified["mirror"]["verify"]["checked"] == 3
    plain = ok(c["alice"].get("/v1/health", params={"verify": "true"}))
    assert "counts" not in plain and "verify" not in plain["mirror"]


# ---- forgetting an entity -------------------------------------------------------------------------


def test_forget_an_entity_over_http(deployed):
    store, _, c = deployed
    memory(c["alice"], "Alice's locker code is 4711")
    conversation = exchange(c["alice"], "my cat is called Whiskerfield")["conversation_id"]
    bob = memory(c["bob"], "Bob plays the tuba")
    report = ok(c["admin"].delete("/v1/entities/alice"))
    assert report["entity"] == "alice"
    assert report["deleted"]["memory"] == 1 and report["deleted"]["turn"] == 2
    assert report["mirror"]["rows"] == 3 and report["mirror"]["vectors"] == 3
    assert report["scrubbed"]["chroma"]["vacuumed"] is True
    assert store.get(where={"scope": "entity:alice"}) == []
    assert ok(c["alice"].get("/v1/memories"))["memories"] == []
    assert c["alice"].get(f"/v1/conversations/{conversation}/turns").status_code == 404
    assert ok(c["bob"].get(f"/v1/memories/{bob['id']}"))["text"] == "Bob plays the tuba"
    gone = c["admin"].delete("/v1/entities/alice")
    assert gone.status_code == 404 and "nothing is stored for entity 'alice'" in gone.json()["message"]


def test_a_bound_token_forgets_only_its_own_entity(deployed):
    store, _, c = deployed
    memory(c["alice"], "Alice likes jazz")
    memory(c["bob"], "Bob likes metal")
    refused = c["alice"].delete("/v1/entities/bob")
    assert refused.status_code == 403 and "bound to entity 'alice'" in refused.json()["message"]
    assert len(store.get(where={"scope": "entity:bob"})) == 1
    assert ok(c["alice"].delete("/v1/entities/alice"))["deleted"]["memory"] == 1
    assert store.get(where={"scope": "entity:alice"}) == []


def test_forget_bad_names_and_no_token(deployed):
    store, _, c = deployed
    memory(c["alice"], "Alice likes jazz")
    assert c["admin"].delete("/v1/entities/%20alice").status_code == 422
    with httpx.Client(base_url=str(c["admin"].base_url)) as anonymous:
        assert anonymous.delete("/v1/entities/alice").status_code == 401
    assert len(store.get(where={"scope": "entity:alice"})) == 1
