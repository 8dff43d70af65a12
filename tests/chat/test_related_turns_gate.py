"""The related-turn section under the relevance ranking: shown when the conversation has a turn close to
the message (the embedder's similarity floor), empty and saying why when it has none."""

from __future__ import annotations

import pytest

from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.features.chat.related_turns import RELATED_TURN_FLOOR_Z

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
    assert [i.id for i in chat.related_turns_for(conv, "Where did I leave my passport?")] == [
        i.id for i in sorted(ctx.related, key=lambda i: -i.scores["score"])
    ]


def test_the_reference_ranking_has_no_related_turn_gate(settings, local_embedder):
    reference = settings.model_copy(update={"memory_ranking": "reference"})
    with open_store(reference, embedder=local_embedder) as store, ChatMemory(store, start_worker=False) as chat:
        conv = record(chat)
        ctx = chat.build_context(conv, "What is the boiling point of nitrogen in kelvin?")
        assert len(ctx.related) == chat.settings.related_turn_top_k and "related" not in ctx.relevance


EVENING = [
    ("What should I cook for dinner tonight?", "How about a mushroom risotto?"),
    ("Emma is coming over, she doesn't eat meat.", "Then the risotto is perfect for Emma too."),
    ("Should I make a starter as well?", "A simple tomato bruschetta would go well."),
    ("Emma loves chocolate, any dessert ideas?", "A chocolate mousse is easy and can be made ahead."),
    ("Great, I'll buy the ingredients after work.", "Enjoy the evening with Emma!"),
]


@pytest.mark.parametrize(
    "message",
    [
        "I'm so tired after work, any tips for sleeping during the day?",
        "How do I renew my driving licence?",
        "What's the best way to learn to touch type?",
    ],
)
def test_a_message_about_something_else_gets_no_related_turns_from_a_conversation_about_dinner(chat, message):
    conv = None
    for user, assistant in EVENING:
        conv = chat.record_exchange(conv, user, assistant).conversation_id
    ctx = chat.build_context(conv, message)
    assert ctx.related == [], [i.text for i in ctx.related]
    assert ctx.relevance["related"]["best_similarity"] < ctx.relevance["related"]["floor"]


@pytest.mark.parametrize(
    "message, needle",
    [
        ("Which dessert did you suggest for Emma?", "mousse"),
        ("What was the starter you recommended?", "bruschetta"),
        ("What did we decide to cook for dinner?", "risotto"),
    ],
)
def test_a_message_about_an_earlier_turn_still_gets_it(chat, message, needle):
    conv = None
    for user, assistant in EVENING:
        conv = chat.record_exchange(conv, user, assistant).conversation_id
    for filler in range(4):  # the turns asked about leave the recent window
        conv = chat.record_exchange(
            conv, f"Unrelated note number {filler} about the weather.", "Noted."
        ).conversation_id
    ctx = chat.build_context(conv, message)
    assert any(needle in item.text for item in ctx.related), (ctx.relevance["related"], [i.text for i in ctx.related])


def test_a_message_naming_one_of_the_speakers_opens_the_section_at_the_lower_floor(chat):
    conv = None
    for user, assistant in TRIP:
        conv = chat.record_exchange(conv, user, assistant, user_name="Nadia", assistant_name="Ada").conversation_id
    floor, named = chat.related_turns.floor(), chat.related_turns.named_floor()
    assert named < floor
    message = "What did Nadia say about the tomatoes?"
    ctx = chat.build_context(conv, message)
    gate = ctx.relevance["related"]
    assert gate["floor"] == pytest.approx(named if gate["best_similarity"] < floor else floor)
    assert any("tomatoes" in item.text for item in ctx.related)


def test_an_exchange_written_to_a_searched_conversation_is_indexed_before_the_next_message(chat, monkeypatch):
    import brain.rules.turn_search as turn_search

    conv = record(chat)
    chat.build_context(conv, "Where did I leave my passport?")  # the conversation is searched once
    chat.record_exchange(conv, "The spare key is under the flowerpot.", "Under the flowerpot, noted.")
    # the next message searches that index: nothing is rebuilt, no vector read back from Chroma
    monkeypatch.setattr(turn_search, "TurnIndex", lambda *a, **k: pytest.fail("the index was rebuilt"))
    real_get = chat.store.get
    vector_reads = []
    monkeypatch.setattr(
        chat.store, "get", lambda *a, **k: vector_reads.append(a) if k.get("include_embeddings") else real_get(*a, **k)
    )
    ctx = chat.build_context(conv, "Where did I leave my passport?")
    assert vector_reads == [] and any("passport" in item.text for item in ctx.related)
