"""Every document type keeps to the scope rule, on every read path of the library: a document in scope
``entity:bob`` exists for Bob (and the admin's listings) only, whatever its type. Embedded Chroma and a
real ``chroma run`` (the ``store`` fixture runs on both)."""

from __future__ import annotations

import brain
from brain.features.chat import ChatMemory
from brain.features.persona import current_persona
from brain.providers.summarizers import ExtractiveSummarizer

SECRET = "zebracode"  # in every one of Bob's documents, in none of anyone else's
QUERY = f"the locker {SECRET} combination"


def seed(store) -> dict[str, str]:
    """Alice's conversation, global FAQ and persona; Bob's FAQ entry, persona section and a summary under
    Alice's conversation id, each written in scope entity:bob."""
    chat = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
    try:
        chat.record_exchange("conv-shared", "Where are the lockers?", "On the second floor.", entity="alice")
    finally:
        chat.close()
    ids = {
        "global_faq": store.upsert_doc("The lockers are on the second floor.", "faq", topic="lockers"),
        "bob_faq": store.upsert_doc(f"Bob's locker {SECRET} combination is 4417.", "faq", topic="lockers",
                                    scope="entity:bob"),
        "bob_summary": store.upsert_summary("conv-shared", f"Bob asked for the locker {SECRET} combination.",
                                            turn_range="1-2", summary_index=7, scope="entity:bob"),
    }
    store.upsert_docs([
        {"text": "You are Juniper, the office assistant.", "type": "persona", "version": "2026-01-01T00:00:00+00:00",
         "topic": "core", "position": 0, "sections": 1},
        # a newer, complete version, in Bob's scope: it must not become anyone else's persona
        {"text": f"You are Bob's {SECRET} butler.", "type": "persona", "version": "2030-01-01T00:00:00+00:00",
         "topic": "core", "position": 0, "sections": 1, "scope": "entity:bob"},
    ])
    return ids


def texts(hits) -> list[str]:
    return [h.text for h in hits]


def test_faq_persona_and_summaries_of_bob_do_not_reach_alice(store):
    seed(store)
    for entity in ("alice", None):
        faq = texts(store.retrieve_faq(QUERY, k=10, entity=entity))
        assert faq == ["The lockers are on the second floor."]
        assert all(SECRET not in t for t in texts(store.retrieve_summaries(QUERY, k=10, entity=entity)))
        assert all(SECRET not in t for t in texts(store.retrieve_summaries(QUERY, k=10, conversation_id="conv-shared",
                                                                           entity=entity)))
        assert texts(store.retrieve_persona(QUERY, k=10, entity=entity)) == ["You are Juniper, the office assistant."]
        assert [d.text for d in current_persona(store, entity)] == ["You are Juniper, the office assistant."]
    assert all(SECRET not in h.text for h in store.search(QUERY, k=50, entity="alice"))
    assert all(SECRET not in d.text for d in store.conversation_summaries("conv-shared", entity="alice"))
    # Bob's own reads find them, and an operator's all-scopes search does
    assert any(SECRET in t for t in texts(store.retrieve_faq(QUERY, k=10, entity="bob")))
    assert any(SECRET in t for t in texts(store.retrieve_summaries(QUERY, k=10, entity="bob")))
    assert texts(store.retrieve_persona(QUERY, k=10, entity="bob")) == [f"You are Bob's {SECRET} butler."]
    assert any(SECRET in t for t in texts(store.retrieve_faq(QUERY, k=10, all_scopes=True)))


def test_alices_context_holds_nothing_of_bob(store):
    seed(store)
    chat = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
    try:
        context = chat.build_context("conv-shared", QUERY, entity="alice")
        assert SECRET not in context.prompt
        assert "Juniper" in context.prompt and "second floor" in context.prompt
        for items in context.sections().values():
            assert all(item.metadata.get("scope", "global") in ("global", "entity:alice") for item in items)
        assert SECRET in chat.build_context(None, QUERY, entity="bob").prompt  # Bob's own context has them
        assert SECRET not in chat.build_context(None, QUERY).prompt  # unrestricted contexts rank global documents
    finally:
        chat.close()


def test_every_search_of_the_brain_as_alice_finds_nothing_of_bob(store):
    seed(store)
    b = brain.Brain(store, start_worker=False)
    for doc_type in (None, "faq", "persona", "summary", "turn", "memory"):
        assert all(SECRET not in h.text for h in b.search(QUERY, type=doc_type, k=20, entity="alice")), doc_type
    assert any(SECRET in h.text for h in b.search(QUERY, type="faq", k=20, entity="bob"))


def test_turns_of_another_scope_under_alices_conversation_id_stay_out_of_her_reads(store):
    seed(store)
    # an operator's write around the chat layer: a turn of Bob's, with its own position, under Alice's id
    store.upsert_docs([{"text": f"Bob whispers {SECRET}", "type": "turn", "conversation_id": "conv-shared",
                        "role": "user", "turn_index": 3, "scope": "entity:bob"}])
    assert [d.text for d in store.conversation_turns("conv-shared", entity="alice")] == [
        "Where are the lockers?", "On the second floor."]
    assert all(SECRET not in d.text for d in store.recent_turns("conv-shared", 10, entity="alice"))
    chat = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
    try:
        assert SECRET not in chat.build_context("conv-shared", QUERY, entity="alice").prompt
        assert all(SECRET not in item.text for item in
                   chat.related_turns_for("conv-shared", QUERY, k=5, entity="alice"))
    finally:
        chat.close()


def test_a_persona_load_leaves_other_scopes_out_of_the_version_it_compares(tmp_path, embedded_store):
    from brain.features.persona import load_persona

    seed(embedded_store)
    path = tmp_path / "persona.md"
    path.write_text("You are Juniper, the office assistant.\n", encoding="utf-8")
    first = load_persona(embedded_store, path)
    assert first.changed and first.removed == 1  # the hand-written global version, not Bob's section
    assert SECRET in embedded_store.retrieve_persona(QUERY, k=5, entity="bob")[0].text


def test_a_summary_holds_the_words_of_its_own_scope_only(store):
    from brain.features.chat.summaries import SummaryJob

    chat = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
    try:
        chat.record_exchange("conv-sum", "Alice plans a garden.", "Tomatoes grow well.", entity="alice")
        store.upsert_docs([{"text": f"Bob whispers {SECRET}", "type": "turn", "conversation_id": "conv-sum",
                            "role": "user", "turn_index": 3, "scope": "entity:bob"}])
        chat.record_exchange("conv-sum", "And basil?", "Basil too.", entity="alice")  # turns 4 and 5
        turns, docs = chat.summary_writer.read_window(SummaryJob("conv-sum", 1, 5, 1))
        assert {d.metadata["scope"] for d in docs} == {"entity:alice"}
        assert all(SECRET not in t.text for t in turns) and len(turns) == 4
    finally:
        chat.close()
