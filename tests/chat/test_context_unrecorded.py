"""The context of a conversation's first message, asked for before the exchange is recorded: an empty
conversation's (persona, knowledge, memories), never a 404; another entity's conversation reads the same,
in the library, over HTTP (and MCP: tests/mcp/test_mcp.py)."""

from __future__ import annotations

from brain.features.chat import ChatMemory, new_conversation_id
from brain.features.persona import load_persona

PERSONA = "You are Juniper, the household's assistant.\n\n## Tone\nWarm and brief.\n"


def seed(store, tmp_path) -> None:
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    load_persona(store, tmp_path / "persona.md")
    store.upsert_doc("The recycling bins go out on Thursday evenings.", "faq", topic="house")
    store.upsert_memory("Alice is allergic to peanuts", scope="entity:alice", importance=5)


def test_the_first_message_of_a_conversation_the_backend_named_gets_its_context(api_store, live, tmp_path):
    seed(api_store, tmp_path)
    conversation = new_conversation_id()  # the chat backend's id, as the reference makes it
    asked = live.post("/v1/context", json={"conversation_id": conversation, "entity": "alice",
                                           "user_message": "Can I eat the peanut cookies? When do bins go out?"})
    assert asked.status_code == 200, asked.text
    body = asked.json()
    assert body["conversation_id"] == conversation
    sections = body["sections"]
    assert sections["persona"] and sections["faq"] and sections["memory"]
    assert sections["turn"] == [] and sections["summary"] == [] and sections["related"] == []
    assert "Juniper" in body["prompt"] and "Alice is allergic to peanuts" in body["prompt"]
    # then the exchange is recorded under that id, and the next context shows it
    recorded = live.post("/v1/exchanges", json={"conversation_id": conversation, "entity": "alice",
                                                "user_text": "Can I eat the peanut cookies?",
                                                "assistant_text": "Better not: you are allergic to peanuts."})
    assert recorded.status_code == 201, recorded.text
    again = live.post("/v1/context", json={"conversation_id": conversation, "entity": "alice",
                                           "user_message": "And the oat ones?"}).json()
    assert [t["text"] for t in again["sections"]["turn"]] == ["Can I eat the peanut cookies?",
                                                             "Better not: you are allergic to peanuts."]


def test_the_library_shows_an_entity_none_of_another_entitys_conversation(api_store, tmp_path):
    seed(api_store, tmp_path)
    with ChatMemory(api_store, start_worker=False) as chat:
        bobs = chat.record_exchange(None, "My safe code is 2468", "Noted, Bob.", entity="bob").conversation_id
        chat.wait_for_summaries()
        question = "what is the safe code? and can I eat peanuts?"
        as_alice = chat.build_context(bobs, question, entity="alice")
        unrecorded = chat.build_context("conv-never-recorded", question, entity="alice")
        assert "2468" not in as_alice.prompt and as_alice.turn == [] and as_alice.summary == []
        assert as_alice.conversation_id == bobs
        # exactly what a conversation not yet recorded gives (scores aside: recency moves with the clock)
        assert as_alice.prompt == unrecorded.prompt
        assert ({name: [i.id for i in items] for name, items in as_alice.sections().items()}
                == {name: [i.id for i in items] for name, items in unrecorded.sections().items()})
        assert as_alice.persona and as_alice.memory
        # bob, and the unrestricted caller, see the conversation
        assert "2468" in chat.build_context(bobs, question, entity="bob").prompt
        assert "2468" in chat.build_context(bobs, question).prompt
        # a conversation recorded without an entity is shared, as global memories are
        shared = chat.record_exchange(None, "The wifi code is 1357", "Noted.").conversation_id
        assert "1357" in chat.build_context(shared, "wifi code?", entity="alice").prompt
