"""The specialist bands: read from a match's confidence (a logistic in the score and the request's
length), with coefficients and thresholds from the settings -- real Chroma and the real embedder."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from brain.app.core import open_store
from brain.config import SPECIALIST_CONFIDENCE_DEFAULTS, Settings
from brain.features.specialists import (
    CONFIDENCE_MAX_WORDS,
    SpecialistBands,
    SpecialistConfidence,
    SpecialistRegistry,
    request_words,
)
from brain.model.errors import ConfigError

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "specialists.yaml"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, local_embedder):
    with open_store(
        Settings(data_dir=tmp_path_factory.mktemp("bands") / "data"), embedder=local_embedder, mirror=False
    ) as opened:
        reg = SpecialistRegistry(opened, path=SHIPPED)
        reg.register()
        yield reg


@pytest.fixture(scope="module")
def scored(shipped):
    """The shipped specialists without their labelled requests: the score-and-length confidence."""
    return SpecialistRegistry(shipped.store, path=SHIPPED, use_examples=False)


# ---- the rule, without a store ---------------------------------------------------------------------------
def test_confidence_is_the_documented_logistic():
    conf = SpecialistConfidence()
    assert (conf.intercept, conf.score, conf.length) == tuple(SPECIALIST_CONFIDENCE_DEFAULTS.values())
    for score, words in [(0.29, 6), (0.1, 1), (0.6, 25), (-0.2, 3)]:
        z = -6.30 + 13.75 * score + 1.36 * math.log(words)
        assert conf(score, words) == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-12)
    assert 0.0 < conf(-1.0, 1) < conf(0.3, 5) < conf(1.0, 40) < 1.0


def test_a_longer_request_needs_a_lower_score_up_to_the_word_cap():
    conf = SpecialistConfidence()
    assert conf(0.3, 5) < conf(0.3, 12) < conf(0.3, CONFIDENCE_MAX_WORDS)
    # beyond the cap the development sets hold almost no requests: the length term stops growing
    assert conf(0.3, CONFIDENCE_MAX_WORDS) == conf(0.3, 500)
    # without the length term, only the score counts
    flat = SpecialistConfidence(length=0.0)
    assert flat(0.3, 3) == flat(0.3, 30)


def test_request_words_counts_runs_of_letters_and_digits():
    assert request_words("what's 17 percent of 2,340") == 7  # what, s, 17, percent, of, 2, 340
    assert request_words("   ") == 1 and request_words("?!") == 1
    assert request_words("date,kwh\n2024-03-01,11.2") == 7


@pytest.mark.parametrize("kwargs", [{"score": -1.0}, {"intercept": float("nan")}, {"length": float("inf")}])
def test_bad_confidence_coefficients_are_named(kwargs):
    with pytest.raises(ConfigError, match="confidence coefficients"):
        SpecialistConfidence(**kwargs)


def test_band_settings_are_confidences_between_0_and_1():
    with pytest.raises(ConfigError, match="BRAIN_SPECIALIST_BAND_STRONG"):
        Settings(specialist_band_strong=1.5)
    with pytest.raises(ConfigError, match="BRAIN_SPECIALIST_BAND_POSSIBLE"):
        Settings(specialist_band_possible=-0.1)


# ---- the shipped specialists ----------------------------------------------------------------------------
@pytest.mark.parametrize("request_text", ["work out 15% of 240", "what is 12.5% of 1,600", "what's 250 divided by 8"])
def test_a_clear_calculator_request_is_strong_or_good(shipped, request_text):
    top = shipped.find_specialists(request_text, k=1)[0]
    assert top.id == "calculator"
    assert top.band in ("strong", "good")
    # a raw score in MiniLM's usual range: the old score bands would not have called every one good
    assert top.score < 0.7 and top.confidence >= shipped.bands.good


@pytest.mark.parametrize(
    "request_text", ["tell me a joke", "how are you doing today?", "tell me a bedtime story about a dragon"]
)
def test_chit_chat_no_specialist_serves_is_weak(shipped, request_text):
    top = shipped.find_specialists(request_text, k=1)[0]
    assert top.band == "weak" and top.confidence < shipped.bands.possible


def test_every_match_is_banded_by_its_confidence(shipped, scored):
    request = "can you check the forecast for Leeds and then email it to my sister"
    words = request_words(request)
    for m in scored.find_specialists(request, k=len(scored)):
        assert m.confidence == pytest.approx(SpecialistConfidence()(m.score, words), abs=1e-12)
        assert m.band == scored.bands.band(m.confidence)
        assert m.to_dict()["confidence"] == m.confidence
    # with the labelled requests the confidence is the classifier's probability: ordered, summing to at most 1
    learnt = shipped.find_specialists(request, k=len(shipped))
    assert [m.confidence for m in learnt] == sorted((m.confidence for m in learnt), reverse=True)
    assert 0.0 < sum(m.confidence for m in learnt) <= 1.0 + 1e-9
    for m in learnt:
        assert m.band == shipped.bands.band(m.confidence)
        assert m.to_dict()["confidence"] == m.confidence


def test_settings_thresholds_and_coefficients_are_applied(scored):
    request = "what's 250 divided by 8"
    default = scored.find_specialists(request, k=1)[0]
    assert default.band == "strong"
    # thresholds from the settings: a strong cut above this confidence makes it good, a possible cut
    # above it makes it weak
    for strong, good, possible, band in [(0.999, 0.5, 0.5, "good"), (0.9999, 0.9999, 0.9999, "weak")]:
        settings = Settings(specialist_band_strong=strong, specialist_band_good=good, specialist_band_possible=possible)
        reg = SpecialistRegistry.from_settings(scored.store, settings, path=SHIPPED, use_examples=False)
        assert reg.bands == SpecialistBands(strong, good, possible)
        assert reg.find_specialists(request, k=1)[0].band == band
    # coefficients from the settings: a lower intercept lowers every confidence, and the band with it
    settings = Settings(specialist_confidence_intercept=-12.0, specialist_confidence_length=0.0)
    reg = SpecialistRegistry.from_settings(scored.store, settings, path=SHIPPED, use_examples=False)
    top = reg.find_specialists(request, k=1)[0]
    assert reg.confidence == SpecialistConfidence(-12.0, 13.75, 0.0)
    assert top.id == default.id and top.score == pytest.approx(default.score, abs=1e-9)  # the ranking is untouched
    assert top.confidence == pytest.approx(1 / (1 + math.exp(12.0 - 13.75 * top.score)), abs=1e-12)
    assert top.band == "weak"
