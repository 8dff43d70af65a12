"""A person writes in another language than their memories, with the real multilingual-e5-small embedder
(cases of tests/fixtures/multilingual_memories.json, measured in full by bench/bench_multilingual.py).

What holds today: the right memory is the nearest of the person's memories for these questions, an important
one reaches the prompt (through the always-shown facts), another person's memory never does, and unrelated
messages leave the memory section empty. A German question in the first person ("ich", "mein") reaches the
English memory through the first-person rule, where it stands out among the person's memories. What does not
yet: a Japanese one: e5's similarities across languages are too alike for the memory to stand out, the
calibrated floor (mean + 5 sd of unrelated pairs) sits above them, and e5 has no floor across languages (the
unrelated pairs across languages sit as high as the related ones). That case is a strict xfail, so that the
test says so when the ranking changes (local/use-multilingual-v3 finds it: tests/chat/test_crosslingual_context.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.model.provider_names import E5_EMBEDDER
from brain.providers.embeddings import LocalE5Embedder
from brain.providers.summarizers import ExtractiveSummarizer
from tests.conftest import isolate

pytestmark = pytest.mark.slow  # the e5 model's calibration and writes take seconds

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "multilingual_memories.json"
#: three people with an allergy each, so that a leak of one person's allergy into another's prompt would show
PEOPLE = ("anna", "grace", "mateo")
ALLERGY = "Anna is allergic to peanuts and always carries an adrenaline pen."
BUDGET = "Mateo is saving for a flat and spends at most 200 euros a month on going out."


def question(entity: str, target: str, language: str) -> str:
    person = next(p for p in json.loads(DATA.read_text(encoding="utf-8"))["people"] if p["entity"] == entity)
    memory = next(m for m in person["memories"] if m["text"] == target)
    return next(q["text"] for q in memory["questions"] if q["language"] == language)


@pytest.fixture(scope="module")
def e5_chat(tmp_path_factory):
    """Anna's, Grace's and Mateo's memories in one store embedded by multilingual-e5-small; per entity,
    memory text -> id."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    root = tmp_path_factory.mktemp("multilingual")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root, tmp_path_factory.mktemp("xdg-state"))
        settings = Settings(data_dir=root / "data", embedder=E5_EMBEDDER, summary_every_n=1000)
        with (
            open_store(settings, embedder=LocalE5Embedder()) as store,
            ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat,
        ):
            ids = {
                p["entity"]: {
                    m["text"]: chat.remember(m["text"], importance=m["importance"], entity=p["entity"])
                    for m in p["memories"]
                }
                for p in data["people"]
                if p["entity"] in PEOPLE
            }
            yield chat, ids


def shown(chat: ChatMemory, message: str, entity: str) -> tuple[list[str], list[str], str]:
    ctx = chat.build_context(None, message, entity=entity)
    return [i.id for i in ctx.memory], [i.id for i in ctx.core], ctx.prompt


@pytest.mark.parametrize(
    "entity, target, language",
    [("anna", ALLERGY, "ja"), ("anna", ALLERGY, "pt"), ("mateo", BUDGET, "de"), ("mateo", BUDGET, "nl")],
)
def test_the_english_memory_is_the_nearest_of_the_persons_memories_to_a_question_in_another_language(
    e5_chat, entity, target, language
):
    chat, ids = e5_chat
    texts = list(ids[entity])
    docs = np.asarray(chat.store.embedder.embed_documents(texts), dtype=np.float64)
    query = np.asarray(chat.store.embedder.embed_query(question(entity, target, language)), dtype=np.float64)
    similarity = (docs / np.linalg.norm(docs, axis=1, keepdims=True)) @ (query / np.linalg.norm(query))
    assert texts[int(np.argmax(similarity))] == target


@pytest.mark.parametrize("language", ["de", "ja"])
def test_a_german_or_japanese_question_about_the_english_allergy_has_it_in_annas_prompt_and_in_no_one_elses(
    e5_chat, language
):
    chat, ids = e5_chat
    message = question("anna", ALLERGY, language)
    memory, core, prompt = shown(chat, message, "anna")
    assert ids["anna"][ALLERGY] in memory + core  # importance 5: among the facts always kept in mind
    assert ALLERGY in prompt
    assert set(memory + core) <= set(ids["anna"].values())
    for other in ("grace", "mateo"):
        memory, core, prompt = shown(chat, message, other)
        assert set(memory + core) <= set(ids[other].values())
        assert "peanut" not in prompt.lower()


@pytest.mark.parametrize(
    "message", ["Wer hat die Relativitätstheorie entwickelt?", "光の速さはどのくらい？", "长城有多长？"]
)
def test_an_unrelated_message_in_any_language_leaves_the_memory_section_empty(e5_chat, message):
    chat, _ = e5_chat
    for entity in PEOPLE:
        memory, _, _ = shown(chat, message, entity)
        assert memory == [], entity


def test_a_german_question_in_the_first_person_has_the_english_memory_in_the_section(e5_chat):
    chat, ids = e5_chat
    memory, _, _ = shown(chat, question("mateo", BUDGET, "de"), "mateo")
    assert ids["mateo"][BUDGET] in memory
    assert set(memory) <= set(ids["mateo"].values())


@pytest.mark.xfail(
    strict=True,
    reason="e5's similarities across languages are alike (unrelated 0.75 +- 0.03, related 0.73-0.81 here): the "
    "memory neither stands out among the person's nor reaches the floor (mean + 5 sd, 0.83): "
    "see bench/MULTILINGUAL_RESULTS.md",
)
def test_the_relevance_ranked_section_shows_the_english_memory_for_a_japanese_question(e5_chat):
    chat, ids = e5_chat
    memory, _, _ = shown(chat, question("anna", ALLERGY, "ja"), "anna")
    assert ids["anna"][ALLERGY] in memory
