"""Relevance first in the context: a memory or FAQ entry is shown only when it is relevant to the
message, importance orders the relevant ones, an empty section says why, and the floor is
calibrated per embedder and kept with the collection."""

from __future__ import annotations

import json

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.model.provider_names import E5_EMBEDDER, MINILM_EMBEDDER
from brain.rules import relevance
from brain.rules.relevance import METADATA_KEY, Calibration, tuning_for


@pytest.fixture
def chat(embedded_store):
    with ChatMemory(embedded_store, start_worker=False) as memory:
        yield memory


def remember(chat, *facts, entity="dana"):
    return [chat.remember(text, importance=importance, entity=entity) for text, importance in facts]


def test_a_relevant_trivial_memory_beats_an_unrelated_critical_one(chat):
    allergy, passport = remember(
        chat, ("Dana is allergic to peanuts.", 1), ("Dana's passport expires in March 2027.", 5)
    )
    ctx = chat.build_context(None, "Can I eat peanut butter?", entity="dana")
    assert [i.id for i in ctx.memory] == [allergy]  # the reference formula put the passport first
    assert passport not in [i.id for i in ctx.memory]


def test_nothing_relevant_leaves_the_memory_section_empty_and_says_why(chat):
    remember(
        chat,
        ("Dana is allergic to peanuts.", 5),
        ("Dana's passport expires in March 2027.", 5),
        ("Dana cycles to work.", 3),
    )
    ctx = chat.build_context(None, "What is the boiling point of nitrogen?", entity="dana")
    assert ctx.memory == []
    gate = ctx.relevance["memory"]
    assert gate["candidates"] == 3 and gate["below_floor"] == 3 and gate["shown"] == 0
    assert gate["floor"] == pytest.approx(chat.store.retrieval.calibration().floor(tuning_for(MINILM_EMBEDDER).floor_z))
    assert "## What you remember" not in ctx.prompt
    assert ctx.to_dict()["relevance"]["memory"]["below_floor"] == 3


def test_another_persons_memories_are_not_shown(chat):
    remember(
        chat,
        ("Melanie painted a lake sunrise last year.", 4),
        ("Melanie goes camping with her kids.", 3),
        entity="melanie",
    )
    remember(chat, ("Caroline is researching adoption agencies.", 2), entity="caroline")
    ctx = chat.build_context(None, "What is Caroline planning for her family?", entity="melanie")
    assert ctx.memory == [] and ctx.relevance["memory"]["below_floor"] == 2
    ctx = chat.build_context(None, "What is Caroline planning for her family?", entity="caroline")
    assert [i.text for i in ctx.memory] == ["Caroline is researching adoption agencies."]


def test_each_item_says_why_it_is_there(chat):
    remember(chat, ("Dana's passport expires in March 2027.", 5))
    ctx = chat.build_context(None, "When does the passport expire?", entity="dana")  # not in the first person
    (item,) = ctx.memory
    floor = ctx.relevance["memory"]["floor"]
    assert item.scores["similarity"] + item.scores["lexical_part"] >= floor
    assert item.scores["score"] == pytest.approx(
        item.scores["similarity_part"]
        + item.scores["lexical_part"]
        + item.scores["importance_part"]
        + item.scores["recency_part"]
    )
    # importance 5 and a word in common: the memory passed the lowered floor, and says so
    lowered = floor - chat.store.retrieval.memory_weights().floor_importance
    assert item.why.startswith("relevance ") and f">= floor {lowered:.2f}" in item.why and "importance" in item.why
    assert item.to_dict()["why"] == item.why


def test_among_equally_relevant_memories_the_more_important_ranks_first(embedded_store, chat):
    vector = embedded_store.embedder.embed_documents(["Dana's sister lives in Lisbon."])[0]
    # the same vector and no word in common with the message: equally relevant, only importance differs
    ids = embedded_store.upsert_docs(
        [
            {"text": "fact one", "type": "memory", "entity": "dana", "importance": 2, "embedding": vector},
            {"text": "fact two", "type": "memory", "entity": "dana", "importance": 5, "embedding": vector},
            {"text": "fact three", "type": "memory", "entity": "dana", "importance": 3, "embedding": vector},
        ]
    )
    ctx = chat.build_context(None, "Where does my sister live now?", entity="dana")
    assert [i.id for i in ctx.memory] == [ids[1], ids[2], ids[0]]


def test_a_critical_memory_is_not_pushed_out_by_a_marginally_closer_trivial_one(embedded_store, local_embedder):
    settings = embedded_store.settings.model_copy(update={"memory_top_k": 1})
    message = local_embedder.embed_query("Where does my sister live now?")
    base = local_embedder.embed_documents(["Dana's sister lives in Lisbon."])[0]
    noise = np.random.default_rng(3).standard_normal(base.shape[0]).astype(np.float32)
    # two vectors a little apart in similarity to the message (the trivial one closer by under 0.05)
    close = base + 0.02 * message
    close /= np.linalg.norm(close)
    farther = base + 0.3 * noise / np.linalg.norm(noise)
    farther /= np.linalg.norm(farther)
    gap = float(close @ message - farther @ message)
    assert 0 < gap < 0.05
    trivial, critical = embedded_store.upsert_docs(
        [
            {"text": "note one", "type": "memory", "entity": "dana", "importance": 1, "embedding": close},
            {"text": "note two", "type": "memory", "entity": "dana", "importance": 5, "embedding": farther},
        ]
    )
    with ChatMemory(embedded_store, settings, start_worker=False) as chat:
        ctx = chat.build_context(None, "Where does my sister live now?", entity="dana")
    assert [i.id for i in ctx.memory] == [critical]


def test_the_reference_formula_stays_available(settings, local_embedder):
    reference = settings.model_copy(update={"memory_ranking": "reference"})
    with open_store(reference, embedder=local_embedder) as store, ChatMemory(store, start_worker=False) as chat:
        allergy, passport = remember(
            chat, ("Dana is allergic to peanuts.", 1), ("Dana's passport expires in March 2027.", 5)
        )
        ctx = chat.build_context(None, "Can I eat peanut butter?", entity="dana")
        assert [i.id for i in ctx.memory][0] == passport  # importance outweighs similarity
        assert ctx.relevance == {}
        assert store.retrieval.memory_weights().floor is None


def test_the_faq_section_shows_only_relevant_entries(chat):
    chat.store.upsert_docs(
        [
            {"text": "To reset your password, open Settings, then Account, and choose Reset password.", "type": "faq"},
            {"text": "The office is closed on public holidays.", "type": "faq"},
        ]
    )
    ctx = chat.build_context(None, "What's a good recipe for chocolate cake?")
    assert ctx.faq == [] and ctx.relevance["faq"]["below_floor"] == 2
    ctx = chat.build_context(None, "How do I reset my password?")
    assert [i.text for i in ctx.faq][:1] == [
        "To reset your password, open Settings, then Account, and choose Reset password."
    ]


def test_an_explicit_floor_setting_wins_over_the_calibration(settings, local_embedder):
    with (
        open_store(settings.model_copy(update={"relevance_floor": -1.0}), embedder=local_embedder) as store,
        ChatMemory(store, start_worker=False) as chat,
    ):
        remember(chat, ("Dana cycles to work.", 3))
        ctx = chat.build_context(None, "What is the boiling point of nitrogen?", entity="dana")
        assert len(ctx.memory) == 1 and ctx.relevance["memory"]["floor"] == -1.0


# ---- calibration ---------------------------------------------------------------------------------------
def test_the_calibration_is_measured_once_and_kept_with_the_collection(backend_settings, local_embedder, monkeypatch):
    settings = backend_settings  # embedded and a `chroma run` server: the metadata write works on both
    with open_store(settings, embedder=local_embedder) as store:
        cal = store.retrieval.calibration()
        recorded = json.loads(store.col.metadata[METADATA_KEY])
    assert recorded["embedder"] == local_embedder.name and recorded["pairs"] >= 30
    assert 0 < cal.sd < 0.5 and cal.related_median > cal.floor(2.0)  # related pairs sit far above unrelated ones

    def fail(*args, **kwargs):
        raise AssertionError("calibrated again although the collection records it")

    monkeypatch.setattr("brain.store.retrieval.calibrate", fail)
    with open_store(settings, embedder=local_embedder) as store:
        assert store.retrieval.calibration() == cal
        assert store.retrieval.memory_weights().floor == pytest.approx(cal.floor(tuning_for(cal.embedder).floor_z))


def test_a_calibration_of_another_embedder_or_other_data_is_not_used(local_embedder, tmp_path):
    cal = relevance.calibrate(local_embedder)
    other = Calibration(**{**json.loads(cal.to_json()), "embedder": "ollama/nomic-embed-text"})
    assert relevance.recorded({METADATA_KEY: cal.to_json()}, local_embedder) == cal
    assert relevance.recorded({METADATA_KEY: other.to_json()}, local_embedder) is None
    assert relevance.recorded({METADATA_KEY: "not json"}, local_embedder) is None
    changed = tmp_path / "pairs.json"
    changed.write_text(json.dumps({"pairs": [{"message": f"m{i}", "fact": f"f{i}"} for i in range(5)]}))
    assert relevance.recorded({METADATA_KEY: cal.to_json()}, local_embedder, changed) is None


def test_unreadable_calibration_data_is_a_named_error(local_embedder, tmp_path):
    from brain.model.errors import CalibrationError

    broken = tmp_path / "pairs.json"
    broken.write_text("{")
    with pytest.raises(CalibrationError, match="RAG_RELEVANCE_FLOOR"):
        relevance.calibrate(local_embedder, broken)


def test_the_relevance_settings_are_read_from_the_environment_and_checked(monkeypatch):
    from brain.model.errors import ConfigError

    monkeypatch.setenv("RAG_MEMORY_RANKING", "reference")
    monkeypatch.setenv("RAG_RELEVANCE_FLOOR", "0.4")
    settings = Settings()
    assert settings.memory_ranking == "reference" and settings.relevance_floor == 0.4
    monkeypatch.setenv("RAG_MEMORY_RANKING", "fancy")
    with pytest.raises(ConfigError, match="RAG_MEMORY_RANKING"):
        Settings()
    monkeypatch.setenv("RAG_MEMORY_RANKING", "relevance")
    monkeypatch.setenv("RAG_RELEVANCE_MARGIN", "-1")
    with pytest.raises(ConfigError, match="RAG_RELEVANCE_MARGIN"):
        Settings()


def test_searches_rank_as_the_context_and_can_ask_for_the_reference_formula(embedded_store):
    embedded_store.upsert_memory("Dana is allergic to peanuts.", importance=1, entity="dana")
    embedded_store.upsert_memory("Dana's passport expires in March 2027.", importance=5, entity="dana")
    searched = embedded_store.retrieve_memories("Can I eat peanut butter?", 2, "dana")
    assert [h.text for h in searched] == ["Dana is allergic to peanuts."]  # relevance first, the same floor
    assert searched.below_floor == 1 and searched.candidates == 2
    assert searched[0].floor is not None and searched[0].similarity_part > 0
    reference = embedded_store.retrieve_memories("Can I eat peanut butter?", 2, "dana", relevance=False)
    assert [h.text for h in reference][0].startswith("Dana's passport")  # 0.5 * importance outweighs similarity


def test_a_reindex_for_another_embedder_calibrates_it_again(settings, local_embedder):
    from brain.app import reindex
    from tests.ollama_stub import OllamaStub

    with OllamaStub() as stub:
        switched = settings.model_copy(update={"ollama_host": stub.url})
        with open_store(switched, embedder=local_embedder) as store:
            store.upsert_memory("Dana is allergic to peanuts.", entity="dana")
            local = store.retrieval.calibration()
            nomic = reindex.embedder_named(switched, "ollama/nomic-embed-text")
            reindex.run(store, nomic, progress=False)
            cal = store.retrieval.calibration()
            assert cal.embedder == "ollama/nomic-embed-text" and (cal.mean, cal.sd) != (local.mean, local.sd)
            assert json.loads(store.col.metadata[METADATA_KEY])["embedder"] == "ollama/nomic-embed-text"
            assert store.retrieval.memory_weights().floor == pytest.approx(cal.floor(tuning_for(cal.embedder).floor_z))


def test_a_critical_memory_with_words_in_common_has_a_lower_bar(embedded_store, local_embedder, chat):
    message = "Where does her sister live now?"  # not in the first person: the first-person floor is tested apart
    q = local_embedder.embed_query(message)
    q = q / np.linalg.norm(q)
    other = np.random.default_rng(9).standard_normal(q.shape[0])
    other -= (other @ q) * q
    other /= np.linalg.norm(other)
    weights = embedded_store.retrieval.memory_weights()
    # similarity between the importance-5 floor and the importance-1 floor; "sisterhood" meets "sister"
    # by stem prefix only, so the lexical part (exact stems) stays 0
    sim = weights.floor - 0.5 * weights.floor_importance
    vector = (sim * q + np.sqrt(1 - sim**2) * other).astype(np.float32)
    trivial, critical, unrelated = embedded_store.upsert_docs(
        [
            {"text": "a note on sisterhood", "type": "memory", "entity": "dana", "importance": 1, "embedding": vector},
            {
                "text": "another note on sisterhood",
                "type": "memory",
                "entity": "dana",
                "importance": 5,
                "embedding": vector,
            },
            # as close and as critical, but no word in common: as likely to be someone else's fact
            {"text": "note on Tuesday", "type": "memory", "entity": "dana", "importance": 5, "embedding": vector},
        ]
    )
    ctx = chat.build_context(None, message, entity="dana")
    assert [i.id for i in ctx.memory] == [critical]
    assert ctx.relevance["memory"]["below_floor"] == 2
    (item,) = ctx.memory
    assert item.scores["lexical_part"] == 0.0 and f">= floor {weights.floor - weights.floor_importance:.2f}" in item.why


def test_a_critical_fact_asked_about_in_other_words_reaches_the_context(chat):
    # similarity 0.38, under the floor of a trivial memory; "allergies" and "allergic" share a stem prefix
    (alice,) = remember(chat, ("Alice is allergic to peanuts", 5), entity="alice")
    remember(chat, ("Alice is allergic to peanuts", 1), entity="carol")
    ctx = chat.build_context(None, "Which allergies should I know about?", entity="alice")
    assert [i.id for i in ctx.memory] == [alice]
    # carol's trivial copy has no lower bar (asked in the first person, her own memory would be about her)
    assert chat.build_context(None, "Which allergies should we know about?", entity="carol").memory == []


def test_a_critical_fact_on_the_conversations_topic_has_the_lower_bar(chat):
    # similarity 0.43 and no word in common with the message; the conversation is about bees
    (hana,) = remember(chat, ("Hana is allergic to bee stings", 5), entity="hana")
    message = "What should we know before visiting the hives?"  # not in the first person: no first-person floor
    assert chat.build_context(None, message, entity="hana").memory == []
    exchange = chat.record_exchange(None, "I keep bees, did I tell you?", "You did!", entity="hana")
    ctx = chat.build_context(exchange.conversation_id, message, entity="hana")
    assert [i.id for i in ctx.memory] == [hana]


def test_the_gate_s_distances_are_the_embedder_s_own_unless_set(settings, local_embedder):
    assert tuning_for(E5_EMBEDDER).similarity_floor_z > tuning_for(MINILM_EMBEDDER).similarity_floor_z
    assert tuning_for("ollama/nomic-embed-text") == tuning_for(MINILM_EMBEDDER)
    with open_store(settings, embedder=local_embedder) as store:
        assert store.retrieval.tuning() == tuning_for(MINILM_EMBEDDER)
    explicit = settings.model_copy(
        update={"relevance_floor_z": 4.0, "relevance_similarity_floor_z": 7.0, "relevance_margin": 1.0}
    )
    with open_store(explicit, embedder=local_embedder) as store:
        cal = store.retrieval.calibration()
        weights = store.retrieval.memory_weights()
        assert weights.floor == pytest.approx(cal.floor(4.0)) and weights.margin == pytest.approx(cal.margin(1.0))
        assert store.retrieval.similarity_floor() == pytest.approx(cal.floor(7.0))
