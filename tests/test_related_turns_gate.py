"""The related-turn section under the relevance ranking: shown when the conversation has a turn close to
the message (the embedder's similarity floor), empty and saying why when it has none."""

from __future__ import annotations

import pytest

from brain.features.chat import ChatMemory
from brain.features.chat.related_turns import RELATED_TURN_FLOOR_Z
from brain.app.core import open_store

TRIP = [
    ("I put my passport in the blue folder under the desk.", "Noted: passport, blue folder, under the desk."),
    ("The flight to Lisbon leaves at seven on Friday.", "Seven on Friday, I will remind you."),
    ("My sister will water the tomatoes while we are away.", "Good, the tomatoes will be fine."),
    ("We still need euros for the taxi from the airport.", "Get some at the bank on Thursday."),
    ("Let's plan dinner: pasta or soup?", "Soup tonight."),
    ("And dessert?", "Fruit salad."),
]


def record(chat):
    conv = None
    for user, assistant in TRIP:
        conv = chat.record_exchange(conv, user, assistant).conversation_id
    return conv


@pytest.fixture
def chat(embedded_store):
    with ChatMemory(embedded_store, start_worker=False) as memory:
        yield memory


def test_a_message_the_conversation_has_nothing_on_gets_no_related_turns(chat):
    conv = record(chat)
    ctx = chat.build_context(conv, "What is the boiling point of nitrogen in kelvin?")
    assert ctx.related == []
    gate = ctx.relevance["related"]
    floor = chat.store.retrieval.calibration().floor(RELATED_TURN_FLOOR_Z)
    assert floor == pytest.approx(chat.related_turns.floor())
    assert gate["floor"] == pytest.approx(floor) and gate["best_similarity"] < floor
    assert gate["candidates"] > 0 and gate["below_floor"] == gate["candidates"] and gate["shown"] == 0
    assert "## Earlier turns related to this message" not in ctx.prompt
    assert ctx.to_dict()["relevance"]["related"]["shown"] == 0
    assert chat.related_turns_for(conv, "What is the boiling point of nitrogen in kelvin?") == []


def test_a_message_the_conversation_speaks_of_gets_its_turns_and_says_why(chat):
    conv = record(chat)
    ctx = chat.build_context(conv, "Where did I leave my passport?")
    assert any("passport" in item.text for item in ctx.related)
    gate = ctx.relevance["related"]
    assert gate["best_similarity"] >= gate["floor"] and gate["shown"] == len(ctx.related) and gate["below_floor"] == 0
    # the gate holds for the section, not each turn: the others of the top k come along
    assert len(ctx.related) == min(chat.settings.related_turn_top_k, len(TRIP) * 2 - chat.settings.turn_top_k)
    assert all(f"floor {gate['floor']:.2f}" in item.why for item in ctx.related)
    assert [i.id for i in chat.related_turns_for(conv, "Where did I leave my passport?")] == \
        [i.id for i in sorted(ctx.related, key=lambda i: -i.scores["score"])]


def test_the_reference_ranking_has_no_related_turn_gate(settings, local_embedder):
    reference = settings.model_copy(update={"memory_ranking": "reference"})
    with open_store(reference, embedder=local_embedder) as store, ChatMemory(store, start_worker=False) as chat:
        conv = record(chat)
        ctx = chat.build_context(conv, "What is the boiling point of nitrogen in kelvin?")
        assert len(ctx.related) == chat.settings.related_turn_top_k and "related" not in ctx.relevance
