"""Who said a turn: display names on the chat path (library and HTTP), their defaults, old turns
without names, and the LoCoMo bench measuring exactly what ``build_context`` relates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.features.persona import load_persona, name_in
from brain.model.errors import ValidationError
from brain.providers.summarizers import ExtractiveSummarizer
from tests.bench_scripts import bench_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def chat(store):
    with ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as memory:
        yield memory


def speakers(store, conversation_id):
    return [(t.metadata["role"], t.metadata.get("speaker")) for t in store.conversation_turns(conversation_id)]


def write_persona(store, tmp_path, text):
    path = tmp_path / "persona.md"
    path.write_text(text, encoding="utf-8")
    return load_persona(store, path)


# ---- names given, and their validation ---------------------------------------------------------

def test_given_names_are_stored_on_each_turn(chat, store):
    ex = chat.record_exchange("conv-names", "I painted a sunrise.", "Lovely!", user_name="Caroline",
                              assistant_name="Melanie")
    assert speakers(store, "conv-names") == [("user", "Caroline"), ("assistant", "Melanie")]
    assert store.get([ex.user_turn_id])[0].metadata["speaker"] == "Caroline"


@pytest.mark.parametrize("field", ["user_name", "assistant_name"])
@pytest.mark.parametrize("bad, says", [
    ("", "is empty"),
    ("   ", "is empty"),
    (" Alice", "starts or ends with a space"),
    ("Alice\nBob", "control character"),
    ("x" * 129, "at most 128"),
    (42, "must be a display name"),
])
def test_a_bad_name_is_a_clear_error_and_nothing_is_written(chat, store, field, bad, says):
    chat.record_exchange("conv-bad", "first", "reply", user_name="Ann", assistant_name="Brain")
    with pytest.raises(ValidationError, match=says) as caught:
        chat.record_exchange("conv-bad", "second", "reply", **{field: bad})
    assert caught.value.problems[0].field == field
    assert len(store.conversation_turns("conv-bad")) == 2  # the first exchange only


def test_speaker_cannot_be_smuggled_in_through_metadata(chat, store):
    with pytest.raises(ValidationError, match="user_name / assistant_name"):
        chat.record_exchange("conv-meta", "hi", "hello", metadata={"speaker": "Eve"})
    assert store.conversation_turns("conv-meta") == []


def test_a_turn_written_directly_has_its_speaker_checked_by_the_schema(store):
    with pytest.raises(ValidationError, match="speaker"):
        store.upsert_docs([{"text": "hi", "type": "turn", "conversation_id": "conv-direct", "role": "user",
                            "speaker": "two\nlines"}])
    assert store.conversation_turns("conv-direct") == []


# ---- defaults --------------------------------------------------------------------------------------

def test_the_user_defaults_to_the_entity_and_the_assistant_to_the_persona(chat, store, tmp_path):
    write_persona(store, tmp_path, "You are Brain, the household's assistant.\n\n## Tone\nWarm.\n")
    chat.record_exchange("conv-defaults", "Book the train", "Booked.", entity="alice")
    assert speakers(store, "conv-defaults") == [("user", "alice"), ("assistant", "Brain")]
    chat.record_exchange("conv-defaults", "Thanks", "Any time.", entity="alice", user_name="Alice A.",
                         assistant_name="Bea")  # given names win
    assert speakers(store, "conv-defaults")[2:] == [("user", "Alice A."), ("assistant", "Bea")]


def test_without_entity_or_persona_name_a_turn_has_no_speaker(chat, store, tmp_path):
    chat.record_exchange("conv-anon", "hi", "hello")
    assert speakers(store, "conv-anon") == [("user", None), ("assistant", None)]
    write_persona(store, tmp_path, "You are a helpful assistant.\n")  # names no one
    chat.record_exchange("conv-anon", "hi again", "hello again")
    assert speakers(store, "conv-anon")[2:] == [("user", None), ("assistant", None)]


def test_a_reloaded_persona_names_the_next_turns(chat, store, tmp_path):
    write_persona(store, tmp_path, "You are Brain.\n")
    chat.record_exchange("conv-reload", "one", "two")
    write_persona(store, tmp_path, "name: Juniper\nYou are Brain's successor.\n")
    chat.record_exchange("conv-reload", "three", "four")
    assert [s for _, s in speakers(store, "conv-reload")] == [None, "Brain", None, "Juniper"]


@pytest.mark.parametrize("core, name", [
    ("You are Brain, the assistant of a household.", "Brain"),
    ("You are Dr Ada Byron. You help.", "Dr Ada Byron"),
    ("Name: Juniper\nYou are Brain, an assistant.", "Juniper"),  # the explicit line wins
    ("You are a helpful assistant.", None),
    ("You are Warm and plain", None),
    ("Be brief.", None),
])
def test_how_the_persona_name_is_found(core, name):
    assert name_in(core) == name


def test_a_persona_whose_name_line_is_not_a_name_is_refused(embedded_store, tmp_path):
    with pytest.raises(ValidationError, match="is empty"):
        write_persona(embedded_store, tmp_path, "name:\nYou are Brain.\n")
    assert embedded_store.get(type="persona") == []


def test_the_shipped_persona_names_the_assistant(embedded_store):
    load_persona(embedded_store, ROOT / "persona.md")
    with ChatMemory(embedded_store, start_worker=False) as memory:
        memory.record_exchange("conv-shipped", "hi", "hello")
    assert speakers(embedded_store, "conv-shipped")[1] == ("assistant", "Brain")


# ---- one-sided exchanges ---------------------------------------------------------------------------

def test_an_exchange_may_have_one_side(chat, store):
    opened = chat.record_exchange("conv-open", None, "Good morning! How was the trip?", assistant_name="Brain")
    assert opened.user_turn_id is None and opened.user_turn_index is None and opened.assistant_turn_index == 1
    answered = chat.record_exchange("conv-open", "Long, but fine.", "Glad to hear it.", user_name="Ann")
    assert (answered.user_turn_index, answered.assistant_turn_index) == (2, 3)
    left = chat.record_exchange("conv-open", "Bye for now.", None, user_name="Ann")
    assert left.assistant_turn_id is None and left.user_turn_index == 4
    assert speakers(store, "conv-open") == [("assistant", "Brain"), ("user", "Ann"), ("assistant", None),
                                            ("user", "Ann")]
    with pytest.raises(ValidationError, match="both are None"):
        chat.record_exchange("conv-open", None, None)
    assert len(store.conversation_turns("conv-open")) == 4


# ---- turn search uses the names; old turns keep working ----------------------------------------------

def test_related_turns_favour_the_named_speaker_and_old_turns_still_rank(chat, store):
    # turns written before names existed, then named ones, in one conversation
    store.upsert_turn("conv-mixed", "We should plan the garden this spring.", "Tomatoes and basil, then.")
    chat.record_exchange("conv-mixed", "I adopted a puppy named Oscar.", "What a lovely name!",
                         user_name="Caroline", assistant_name="Melanie")
    chat.record_exchange("conv-mixed", "My own dog hates baths.", "Oscar loves them, oddly.",
                         user_name="Caroline", assistant_name="Melanie")
    for _ in range(4):  # the recent window the context shows anyway
        chat.record_exchange("conv-mixed", "ok", "sure", user_name="Caroline", assistant_name="Melanie")
    named = chat.related_turns_for("conv-mixed", "What pet does Caroline have?", k=6)
    # both of Caroline's turns about her dog answer it, ahead of everything else
    assert {item.text for item in named[:2]} == {"I adopted a puppy named Oscar.", "My own dog hates baths."}
    assert {item.metadata.get("speaker") for item in named} >= {"Caroline", "Melanie", None}
    for item in named:  # the bonus goes to the named speaker's turns alone
        assert (item.scores["speaker_part"] > 0) == (item.metadata.get("speaker") == "Caroline")
    garden = chat.related_turns_for("conv-mixed", "what did we plan to grow in the garden", k=2)
    assert garden[0].text == "We should plan the garden this spring."  # an old turn, no speaker
    assert "speaker" not in garden[0].metadata


def test_related_turns_leave_the_speakers_names_out_of_the_dense_signal(chat, store):
    painting = [("I've been busy painting - here's a sunset I just finished.", "Wow, Caroline, that is awesome!"),
                ("Thanks! How are the kids?", "Caroline, the kids are great, we went camping."),
                ("I love hiking in the woods.", "Caroline! You are the best friend ever.")]
    for user, assistant in painting + [("ok", "sure")] * 2:  # the last two: the recent window
        chat.record_exchange("conv-art", user, assistant, user_name="Caroline", assistant_name="Melanie")
    embed = chat.store.embedder.embed_documents
    calls = []
    chat.store.embedder.embed_documents = lambda texts: calls.append(list(texts)) or embed(texts)
    try:
        hits = chat.related_turns_for("conv-art", "What has Caroline painted?", k=6)
        chat.record_exchange("conv-art", "ok", "sure", user_name="Caroline", assistant_name="Melanie")
        again = chat.related_turns_for("conv-art", "What has Caroline painted?", k=6)  # a new index, the same names
    finally:
        del chat.store.embedder.embed_documents
    # each name embedded once, as a document (the other calls embed the turns and the calibration texts)
    assert [texts for texts in calls if set(texts) & {"Caroline", "Melanie"}] == [["Caroline", "Melanie"]]
    assert hits[0].text.startswith("I've been busy painting") and again[0].id == hits[0].id
    for item in hits:  # the dense part compares what is left once the names are out; the raw cosine is reported
        assert item.scores["content_similarity"] != pytest.approx(item.scores["similarity"], abs=1e-3)
    vocative = next(i for i in hits if i.text == "Caroline! You are the best friend ever.")
    assert vocative.scores["content_similarity"] < vocative.scores["similarity"] - 0.2


# ---- HTTP --------------------------------------------------------------------------------------------

def test_http_exchanges_take_the_two_names(live, api_store, tmp_path):
    write_persona(api_store, tmp_path, "You are Brain, an assistant.\n")
    given = live.post("/v1/exchanges", json={"user_text": "hi", "assistant_text": "hello", "user_name": "Ann",
                                             "assistant_name": "Bea"})
    assert given.status_code == 201, given.text
    defaults = live.post("/v1/exchanges", json={"user_text": "hi", "assistant_text": "hello", "entity": "bob"})
    assert defaults.status_code == 201, defaults.text
    assert speakers(api_store, given.json()["conversation_id"]) == [("user", "Ann"), ("assistant", "Bea")]
    assert speakers(api_store, defaults.json()["conversation_id"]) == [("user", "bob"), ("assistant", "Brain")]
    bad = live.post("/v1/exchanges", json={"conversation_id": "conv-http-bad", "user_text": "hi",
                                           "assistant_text": "hello", "assistant_name": "line\nbreak"})
    assert bad.status_code == 422 and "assistant_name" in bad.text and "control character" in bad.text
    assert live.get("/v1/conversations/conv-http-bad/turns").status_code == 404
    schema = live.get("/openapi.json").json()["components"]["schemas"]["ExchangeRequest"]["properties"]
    assert {"user_name", "assistant_name"} <= set(schema)


# ---- the bench measures what build_context relates ---------------------------------------------------

SESSIONS = [
    ("1:56 pm on 8 May, 2023", [
        ("Nadia", "I started pottery classes last week.", None),
        ("Omar", "Nice! What did you make first?", None),
        ("Nadia", "A lopsided bowl, here it is.", "a photo of a blue ceramic bowl"),
        ("Omar", "It has character. I am training for a marathon in October.", None),
        ("Nadia", "Which city is the marathon in?", None),
    ]),
    ("10:15 am on 2 June, 2023", [
        ("Omar", "Morning! The marathon is in Lisbon.", None),  # a session the assistant opens
        ("Nadia", "Lisbon in October sounds perfect.", None),
        ("Omar", "My sister Leila is coming to cheer.", None),
        ("Nadia", "My pottery teacher says the bowl should be fired again.", None),
        ("Omar", "Fire it twice then!", None),
        ("Nadia", "Will do. Talk soon.", None),
        ("Omar", "Bye!", None),
    ]),
]
QUESTIONS = ["What did Nadia make in her pottery class?", "Where is Omar's marathon?",
             "When did Nadia start pottery classes?", "Who is coming to cheer Omar on?"]


def locomo_sample() -> list[dict]:
    conversation = {"speaker_a": "Nadia", "speaker_b": "Omar"}
    for n, (date, turns) in enumerate(SESSIONS, start=1):
        conversation[f"session_{n}_date_time"] = date
        conversation[f"session_{n}"] = [
            {"speaker": who, "dia_id": f"D{n}:{i}", "text": text, **({"blip_caption": cap} if cap else {})}
            for i, (who, text, cap) in enumerate(turns, start=1)]
    qa = [{"question": q, "answer": "-", "evidence": ["D1:1"], "category": 4} for q in QUESTIONS]
    return [{"sample_id": "conv-pottery", "conversation": conversation, "qa": qa}]


def test_build_context_relates_exactly_what_the_locomo_bench_measures(tmp_path, local_embedder):
    bench = bench_script("locomo.py")
    (tmp_path / "locomo.json").write_text(json.dumps(locomo_sample()), encoding="utf-8")
    [conv] = bench.load(tmp_path / "locomo.json")
    settings = bench.bench_settings(tmp_path / "data").model_copy(
        update={"related_turn_top_k": bench.TOP, "context_max_chars": 1_000_000})
    with open_store(settings, embedder=local_embedder) as store, \
            ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat:
        assert bench.ingest(chat, conv) == 12
        turns = store.conversation_turns(conv.id)
        assert [(t.metadata["role"], t.metadata["speaker"]) for t in turns[5:7]] == [("assistant", "Omar"),
                                                                                     ("user", "Nadia")]
        assert [t.metadata["timestamp"][:10] for t in (turns[0], turns[-1])] == ["2023-05-08", "2023-06-02"]
        assert "[shares a photo: a photo of a blue ceramic bowl]" in turns[2].text
        for question in QUESTIONS:
            measured = bench.retrieve(chat, conv.id, question, store.embedder.embed_query(question))
            context = chat.build_context(conv.id, question)
            # the context shows them in conversation order; ranked by their score they are the bench's list
            best_first = sorted(context.related, key=lambda i: (-i.scores["score"], i.metadata["turn_index"]))
            assert [item.id for item in best_first] == measured
            assert [i.metadata["turn_index"] for i in context.related] == sorted(
                i.metadata["turn_index"] for i in context.related)
            assert 0 < len(measured) <= bench.TOP
            assert not {t.id for t in turns[-settings.turn_top_k:]} & set(measured)
        assert len(conv.dia_by_turn_id) == 12
