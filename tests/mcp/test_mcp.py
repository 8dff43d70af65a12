"""`brain mcp` end to end over stdio: the real command as a subprocess, driven by the MCP SDK's own client.

Two servers for the module (each start loads the model): one unbound and one bound with ``--entity alice``,
each on a store seeded through the library (memories of alice, bob and global ones, FAQ entries, a persona).
"""

from __future__ import annotations

import json

import pytest

import brain
from brain.config import Settings
from brain.features.persona import load_persona
from tests.mcp_client import project, stdio

pytestmark = pytest.mark.subprocess

TOOLS = {
    "remember",
    "recall",
    "update_memory",
    "supersede_memory",
    "memory_history",
    "forget",
    "list_memories",
    "count_memories",
    "search_knowledge",
    "get_context",
    "record_exchange",
    "extract_memories",
    "find_specialists",
}

PERSONA = """You are Juniper, the household's assistant.

# Tone
Warm and brief.
"""
FAQ = [
    {"text": "The recycling bins go out on Thursday evenings.", "type": "faq", "topic": "house"},
    {"text": "The Wi-Fi password is on the fridge door.", "type": "faq", "topic": "house"},
    {"text": "Returns are accepted within 30 days.", "type": "faq", "topic": "shop"},
]


def seed(workdir, embedder) -> dict[str, str]:
    """Memories of alice, bob and a global one, the FAQ and the persona; the memory ids by owner."""
    project(workdir)
    (workdir / "persona.md").write_text(PERSONA, encoding="utf-8")
    with brain.open(Settings(data_dir=workdir / "data"), embedder=embedder, start_worker=False) as b:
        load_persona(b.store, workdir / "persona.md")
        b.store.upsert_docs(FAQ)
        return {
            "alice": b.chat.remember("Alice is allergic to peanuts", importance=5, entity="alice"),
            "bob": b.chat.remember("Bob is allergic to shellfish", importance=5, entity="bob"),
            "global": b.chat.remember("The household shops on Saturdays", importance=3),
        }


@pytest.fixture(scope="module")
def server(tmp_path_factory, local_embedder):
    workdir = tmp_path_factory.mktemp("mcp")
    seed(workdir, local_embedder)
    with stdio(workdir) as client:
        yield client


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, local_embedder):
    workdir = tmp_path_factory.mktemp("mcp-alice")
    return workdir, seed(workdir, local_embedder)


@pytest.fixture(scope="module")
def alice_server(seeded):
    workdir, _ = seeded
    with stdio(workdir, "--entity", "alice") as client:
        yield client


# ---- the unbound server ----------------------------------------------------------------------------


def test_lists_the_tools_with_described_arguments(server):
    tools = {t.name: t for t in server.tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
    assert tools["remember"].input_schema["required"] == ["text"]
    assert tools["recall"].input_schema["required"] == ["query"]


def test_remember_then_recall_finds_it_first(server):
    stored = server.call(
        "remember", text="Carol prefers green tea to coffee", importance=4, tags=["drinks"], entity="carol"
    )
    assert stored["metadata"]["scope"] == "entity:carol"
    assert stored["metadata"]["importance"] == 4
    server.call("remember", text="Carol's bicycle is red", entity="carol")
    server.call("remember", text="The boiler is serviced every October")

    found = server.call("recall", query="What does Carol like to drink?", entity="carol")
    assert found["entity"] == "carol"
    first = found["results"][0]
    assert first["id"] == stored["id"]
    assert first["score"] == pytest.approx(
        first["similarity_part"] + first["lexical_part"] + first["importance_part"] + first["recency_part"]
    )
    assert first["floor"] is not None  # ranked as the chat context ranks: behind its floor
    # without an entity only global memories are ranked
    assert stored["id"] not in {r["id"] for r in server.call("recall", query="green tea")["results"]}
    tagged = server.call("list_memories", entity="carol", tags=["drinks"])["memories"]
    assert [m["id"] for m in tagged] == [stored["id"]]
    assert server.call("count_memories", entity="carol", tags=["drinks"]) == {"entity": "carol", "count": 1}


def test_forget_deletes_and_a_second_forget_is_an_error(server):
    doc = server.call("remember", text="Dave's locker code is 4711", entity="dave")
    assert server.call("forget", id=doc["id"], entity="dave") == {"deleted": [doc["id"]]}
    assert doc["id"] not in {m["id"] for m in server.call("list_memories", entity="dave")["memories"]}
    assert f"no memory with id {doc['id']!r}" in server.error("forget", id=doc["id"], entity="dave")


def test_bad_arguments_are_tool_errors_naming_the_rule(server):
    assert "importance must be between 1 and 5" in server.error("remember", text="x", importance=9)
    assert "k must be an integer between 1 and" in server.error("recall", query="tea", k=0)
    assert "give either id" in server.error("forget")
    assert "entity" in server.error("recall", query="tea", entity=" padded ")
    assert "limit" in server.error("list_memories", limit=0)  # the schema's range, checked by the SDK
    # the server is still serving
    assert {t.name for t in server.tools()} == TOOLS


def test_logs_go_to_stderr_not_the_protocol(server):
    server.call("list_memories")  # a call the SDK logs; a stray line on stdout would break the session
    assert server.stderr_path.read_text().strip()


def test_update_memory_changes_it_in_place(server):
    stored = server.call("remember", text="Frank drinks his coffee black", importance=2, entity="frank")
    updated = server.call(
        "update_memory",
        id=stored["id"],
        entity="frank",
        text="Frank drinks his coffee with oat milk",
        importance=4,
        tags=["drinks"],
    )
    assert updated["id"] == stored["id"]
    assert (updated["text"], updated["metadata"]["importance"], updated["metadata"]["tags"]) == (
        "Frank drinks his coffee with oat milk",
        4,
        ["drinks"],
    )
    first = server.call("recall", query="How does Frank take his coffee?", entity="frank")["results"][0]
    assert (first["id"], first["text"]) == (stored["id"], "Frank drinks his coffee with oat milk")
    assert "nothing to change" in server.error("update_memory", id=stored["id"], entity="frank")
    assert "importance must be between 1 and 5" in server.error(
        "update_memory", id=stored["id"], entity="frank", importance=0
    )
    assert "no memory with id 'mem-nope'" in server.error("update_memory", id="mem-nope", importance=3)


def test_list_memories_pages_with_an_opaque_cursor(server):
    ids = {server.call("remember", text=f"Gina's note number {n}", entity="gina")["id"] for n in range(5)}
    seen, cursor, pages = [], None, 0
    while True:
        page = server.call("list_memories", entity="gina", limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [m["id"] for m in page["memories"] if m["metadata"].get("entity") == "gina"]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert set(seen) == ids and len(seen) == len(ids)  # every memory once, across the pages
    assert pages >= 3
    assert "cursor is not one this server gave" in server.error("list_memories", cursor="not-a-cursor")


def test_supersede_keeps_the_old_fact_as_history_and_recall_as_of_finds_it(server):
    old = server.call("remember", text="Gina lives in Lyon", entity="gina", importance=4)
    done = server.call(
        "supersede_memory", id=old["id"], text="Gina lives in Porto", entity="gina", at="2100-01-01T00:00:00+00:00"
    )
    assert done["kind"] == "update" and done["old"]["metadata"]["status"] == "superseded"
    assert done["new"]["metadata"]["supersedes"] == old["id"] and done["new"]["metadata"]["scope"] == "entity:gina"
    history = server.call("memory_history", id=done["new"]["id"], entity="gina")["history"]
    assert [m["text"] for m in history] == ["Gina lives in Lyon", "Gina lives in Porto"]
    now = [r["id"] for r in server.call("recall", query="Where does Gina live?", entity="gina")["results"]]
    assert now[0] == done["new"]["id"] and old["id"] not in now
    then = server.call("recall", query="Where does Gina live?", entity="gina", as_of="2099-06-01T00:00:00+00:00")
    assert then["results"][0]["id"] == old["id"] and done["new"]["id"] not in {r["id"] for r in then["results"]}
    assert "was superseded already" in server.error("supersede_memory", id=old["id"], text="Gina lives in Nice")
    assert "kind" in server.error("supersede_memory", id=done["new"]["id"], text="Gina lives in Nice", kind="guess")
    expiring = server.call(
        "remember", text="Gina's parcel arrives today", entity="gina", expires_at="2020-01-01T00:00:00+00:00"
    )
    assert expiring["id"] not in {r["id"] for r in server.call("recall", query="parcel", entity="gina")["results"]}


def test_search_knowledge_answers_from_the_faq(server):
    found = server.call("search_knowledge", query="When do the bins go out?")
    assert found["results"][0]["text"] == FAQ[0]["text"]
    only_shop = server.call("search_knowledge", query="When do the bins go out?", topic="shop")["results"]
    assert [r["text"] for r in only_shop] == [FAQ[2]["text"]]
    assert "k must be an integer between 1 and" in server.error("search_knowledge", query="bins", k=0)


def test_record_exchange_then_context_and_the_conversation_resource(server):
    first = server.call(
        "record_exchange",
        user_text="Hi, I'm Hana. I keep bees.",
        assistant_text="Lovely to meet you, Hana!",
        entity="hana",
    )
    conversation = first["conversation_id"]
    second = server.call(
        "record_exchange",
        conversation_id=conversation,
        entity="hana",
        user_text="The hives are behind the shed.",
        assistant_text="Noted: behind the shed.",
    )
    assert (first["user_turn_index"], second["user_turn_index"]) == (1, 3)
    turns = json.loads(server.read(f"brain://conversations/{conversation}"))["turns"]
    assert [t["text"] for t in turns] == [
        "Hi, I'm Hana. I keep bees.",
        "Lovely to meet you, Hana!",
        "The hives are behind the shed.",
        "Noted: behind the shed.",
    ]
    # who said it: the entity's name and the persona's, unless the call names them
    assert [t["metadata"].get("speaker") for t in turns] == ["hana", "Juniper"] * 2
    named = server.call(
        "record_exchange",
        conversation_id=conversation,
        entity="hana",
        user_name="Hana Kowalska",
        user_text="Do bees sleep?",
        assistant_text="They do rest, yes.",
    )
    named_turns = json.loads(server.read(f"brain://conversations/{conversation}"))["turns"][-2:]
    assert [t["metadata"]["speaker"] for t in named_turns] == ["Hana Kowalska", "Juniper"]
    assert named["user_turn_index"] == 5
    assert "user_name" in server.error("record_exchange", user_text="a", assistant_text="b", user_name=" padded ")
    server.call("remember", text="Hana is allergic to bee stings", importance=5, entity="hana")
    context = server.call(
        "get_context",
        user_message="What should I know before visiting the hives?",
        conversation_id=conversation,
        entity="hana",
    )
    assert "Hana is allergic to bee stings" in context["prompt"]
    assert "The hives are behind the shed." in context["prompt"]
    assert "Juniper" in context["prompt"]  # the persona
    # a conversation not yet recorded, and another entity's, read as empty: the persona and memories still come
    for conversation_id, entity in (("conv-unknown", "hana"), (conversation, "bob")):
        empty = server.call(
            "get_context",
            user_message="What should I know before visiting the hives?",
            conversation_id=conversation_id,
            entity=entity,
        )
        assert empty["conversation_id"] == conversation_id and "Juniper" in empty["prompt"]
        assert empty["sections"]["turn"] == [] and empty["sections"]["summary"] == []
        assert "behind the shed" not in json.dumps(empty)
    assert (
        "Hana is allergic"
        in server.call("get_context", user_message="bee stings?", conversation_id="conv-new", entity="hana")["prompt"]
    )
    assert "user_text" in server.error("record_exchange", user_text="", assistant_text="ok")


def test_find_specialists_names_the_best_tool(server):
    found = server.call("find_specialists", request="what's 17 percent of 2,340?", k=2)
    assert found["results"][0]["id"] == "calculator"
    assert {"score", "band"} <= set(found["results"][0])
    assert "request" in server.error("find_specialists", request="  ")


def test_resources_persona_and_schemas(server):
    resources = {str(r.uri) for r in server.sync(server.session.list_resources()).resources}
    templates = {t.uri_template for t in server.sync(server.session.list_resource_templates()).resource_templates}
    assert resources == {"brain://persona"}
    assert templates == {"brain://schema/{doc_type}", "brain://conversations/{conversation_id}"}
    persona = server.read("brain://persona")
    assert "You are Juniper, the household's assistant." in persona and "Warm and brief." in persona
    schema = json.loads(server.read("brain://schema/memory"))
    assert schema["document_type"] == "memory" and "importance" in schema["fields"]
    with pytest.raises(Exception, match="unknown document type 'gossip'"):
        server.read("brain://schema/gossip")


# ---- a server bound to alice ------------------------------------------------------------------------


def test_bound_server_refuses_another_entity(alice_server):
    assert "bound to entity 'alice'" in alice_server.error("remember", text="Bob likes jazz", entity="bob")
    assert "bound to entity 'alice'" in alice_server.error("recall", query="allergies", entity="bob")
    assert "bound to entity 'alice'" in alice_server.error("list_memories", entity="bob")


def test_bound_server_never_shows_another_entitys_memory(alice_server, seeded):
    _, ids = seeded
    recalled = {r["id"] for r in alice_server.call("recall", query="Who is allergic to shellfish?", k=10)["results"]}
    assert ids["bob"] not in recalled  # the closest memory of all, and bob's
    mine = {r["id"] for r in alice_server.call("recall", query="Who is allergic to peanuts?", k=10)["results"]}
    assert ids["alice"] in mine and ids["bob"] not in mine
    listed = {m["id"] for m in alice_server.call("list_memories")["memories"]}
    assert ids["bob"] not in listed and ids["alice"] in listed and ids["global"] in listed


def test_bound_server_writes_and_deletes_in_its_own_scope_only(alice_server, seeded):
    _, ids = seeded
    stored = alice_server.call("remember", text="Alice runs on Tuesdays")
    assert stored["metadata"]["scope"] == "entity:alice"
    assert "no memory with id" in alice_server.error("forget", id=ids["bob"])
    # all or none: alice's memory survives a batch that names bob's
    assert "no memory with id" in alice_server.error("forget", ids=[stored["id"], ids["bob"]])
    assert "is global" in alice_server.error("forget", id=ids["global"])
    assert stored["id"] in {m["id"] for m in alice_server.call("list_memories")["memories"]}
    assert alice_server.call("forget", ids=[stored["id"]]) == {"deleted": [stored["id"]]}


def test_bound_server_never_reaches_another_entitys_history(alice_server, seeded):
    _, ids = seeded
    assert "no memory with id" in alice_server.error("supersede_memory", id=ids["bob"], text="Bob eats shellfish")
    assert "no memory with id" in alice_server.error("memory_history", id=ids["bob"])
    assert "is global" in alice_server.error("supersede_memory", id=ids["global"], text="The household shops daily")
    assert "bound to entity 'alice'" in alice_server.error("memory_history", id=ids["alice"], entity="bob")
    history = alice_server.call("memory_history", id=ids["alice"])["history"]
    assert [m["id"] for m in history] == [ids["alice"]]


def test_bound_server_keeps_conversations_and_context_in_its_scope(alice_server, server):
    mine = alice_server.call("record_exchange", user_text="I moved to Lisbon.", assistant_text="Welcome to Lisbon!")
    turns = json.loads(alice_server.read(f"brain://conversations/{mine['conversation_id']}"))["turns"]
    assert {t["metadata"]["scope"] for t in turns} == {"entity:alice"}
    context = alice_server.call("get_context", user_message="Which allergies should I know about?")
    assert "Alice is allergic to peanuts" in context["prompt"]
    assert "Bob is allergic to shellfish" not in context["prompt"]
    assert "bound to entity 'alice'" in alice_server.error("get_context", user_message="hi", entity="bob")
    assert "bound to entity 'alice'" in alice_server.error(
        "record_exchange", user_text="a", assistant_text="b", entity="bob"
    )


def test_extract_memories_keeps_to_the_entitys_conversations_and_says_when_formation_is_off(alice_server):
    mine = alice_server.call("record_exchange", user_text="I am allergic to peanuts.", assistant_text="Noted.")
    # this server has no formation model (BRAIN_FORMATION is off): the tool says which setting turns it on
    assert "BRAIN_FORMATION" in alice_server.error("extract_memories", conversation_id=mine["conversation_id"])
    # another entity's conversation, or none, is not found before anything else
    assert "no conversation 'conv-nobody'" in alice_server.error("extract_memories", conversation_id="conv-nobody")
    assert "bound to entity 'alice'" in alice_server.error(
        "extract_memories", conversation_id=mine["conversation_id"], entity="bob"
    )
