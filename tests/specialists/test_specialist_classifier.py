"""The confidence learnt from labelled requests (brain.features.specialists.classifier) and the registry's use of it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.specialists import (
    MIN_EXAMPLES,
    SpecialistClassifier,
    SpecialistConfidence,
    SpecialistRegistry,
    examples_path,
    load_examples,
    request_words,
)
from brain.model.errors import ConfigError
from tests.specialists.test_specialists import SMALL

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "specialists.yaml"

EXAMPLES = {
    "ocr": [
        "type out the text on this receipt photo",
        "transcribe this scanned letter for me",
        "what does the handwriting on this note say, copy it out",
        "read the words on this sign [photo]",
        "turn this screenshot of a table into text",
        "copy the ingredients list from this photo of the box",
    ],
    "calculator": [
        "what's 18% of 240",
        "add 12.50, 8.99 and 4.20",
        "convert 10 km to miles",
        "split 96 pounds between 4 people",
        "what is 7 times 13",
        "how much is a 15 percent tip on 62",
    ],
    "email": [
        "email my landlord that the boiler is broken",
        "any new mail from the bank in my inbox?",
        "reply to Sarah's email saying yes to Friday",
        "forward the invoice email to my accountant",
        "search my inbox for the flight confirmation",
        "draft an email to the school about Monday",
    ],
    None: [
        "thanks, that's all",
        "tell me a joke",
        "how are you today?",
        "what's your favourite film?",
        "give me some tips for sleeping better",
        "who wrote pride and prejudice?",
    ],
}


def write_examples(yaml_path: Path, examples: dict) -> Path:
    rows = [{"request": r, "expected": label} for label, requests in examples.items() for r in requests]
    path = examples_path(yaml_path)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def small_yaml(tmp_path) -> Path:
    path = tmp_path / "specialists.yaml"
    path.write_text(SMALL, encoding="utf-8")
    return path


class CountingQueries:
    """The real embedder, counting the texts embedded as queries (the examples are)."""

    def __init__(self, inner):
        self.inner = inner
        self.name, self.dimension = inner.name, inner.dimension
        self.query_texts = 0

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.query_texts += 1
        return self.inner.embed_query(text)

    def embed_queries(self, texts):
        self.query_texts += len(texts)
        return self.inner.embed_queries(texts)


# ---- the model alone -------------------------------------------------------------------------------------
def test_a_fitted_classifier_separates_its_classes_and_is_deterministic():
    rng = np.random.default_rng(0)
    centres = np.eye(4)[:, :3] * 4  # three specialists and none, one centre each
    labels = ["a", "b", "c", None] * 25
    x = np.stack([centres[["a", "b", "c", None].index(label)] + rng.normal(0, 0.5, 3) for label in labels])
    model = SpecialistClassifier.fit(x, labels, ["a", "b", "c"])
    p = model.probabilities(x)
    assert p.shape == (100, 4) and np.allclose(p.sum(axis=1), 1.0)
    predicted = [(["a", "b", "c", None])[i] for i in p.argmax(axis=1)]
    assert np.mean([a == b for a, b in zip(predicted, labels)]) > 0.95
    again = SpecialistClassifier.fit(x, labels, ["a", "b", "c"])
    assert np.array_equal(again.probabilities(x), p)


def test_the_examples_file_sits_beside_the_yaml_and_bad_lines_are_named(tmp_path):
    assert examples_path(tmp_path / "mine.yaml") == tmp_path / "mine_examples.jsonl"
    path = tmp_path / "x_examples.jsonl"
    path.write_text(
        '{"request": "add 2 and 2", "expected": "calculator"}\n\n{"request": "hi", "expected": null}\n',
        encoding="utf-8",
    )
    assert [(e.request, e.expected) for e in load_examples(path)] == [("add 2 and 2", "calculator"), ("hi", None)]
    path.write_text(
        '{"request": "ok", "expected": null}\n{"request": ""}\nnot json\n{"request": "a", "expected": 3, "why": "x"}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        load_examples(path)
    message = str(err.value)
    assert str(path) in message and "3 bad line(s)" in message
    assert "line 2" in message and "line 3" in message and "line 4" in message and "line 1:" not in message
    assert '"expected": "<specialist id>" or null' in message


# ---- the registry ----------------------------------------------------------------------------------------
def test_labelled_requests_give_the_confidence_and_are_embedded_once(tmp_path, small_yaml, local_embedder):
    write_examples(small_yaml, EXAMPLES)
    counting = CountingQueries(local_embedder)
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store:
        reg = SpecialistRegistry(store, path=small_yaml, embedder=counting)
        report = reg.register()
        assert report.embedded == 18 + 24  # the specialists' phrases, then the 24 labelled requests
        top = reg.find_specialists("please copy out the text in this photo of a receipt", k=3)
        assert top[0].id == "ocr" and top[0].band == "strong"
        assert [m.confidence for m in top] == sorted((m.confidence for m in top), reverse=True)
        chat = reg.find_specialists("tell me a funny story", k=1)[0]
        assert chat.band == "weak"
        # not the score-and-length confidence: that one is what the model learnt from
        plain = SpecialistRegistry(store, path=small_yaml, use_examples=False).find_specialists(
            "tell me a funny story", k=1
        )[0]
        assert plain.confidence == pytest.approx(
            SpecialistConfidence()(plain.score, request_words("tell me a funny story"))
        )
        assert chat.confidence != pytest.approx(plain.confidence, abs=1e-3)
        # unchanged files embed nothing, and another registry on the store learns the same model from what is stored
        assert reg.register().embedded == 0
        before = counting.query_texts
        other = SpecialistRegistry(store, path=small_yaml, embedder=counting)
        again = other.find_specialists("please copy out the text in this photo of a receipt", k=3)
        assert counting.query_texts == before + 1  # the request itself
        assert [(m.id, m.confidence) for m in again] == [(m.id, m.confidence) for m in top]


def test_a_changed_examples_file_embeds_only_its_new_requests(tmp_path, small_yaml, local_embedder):
    write_examples(small_yaml, EXAMPLES)
    counting = CountingQueries(local_embedder)
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store:
        reg = SpecialistRegistry(store, path=small_yaml, embedder=counting)
        reg.register()
        more = {**EXAMPLES, "email": EXAMPLES["email"][1:] + ["let my boss know by email that I'm late"]}
        write_examples(small_yaml, more)
        assert reg.register().embedded == 1
        stored = [i for i in reg.chroma.ids() if i.startswith("example#")]
        assert len(stored) == 24  # the dropped request's record is deleted


def test_too_few_examples_keep_the_score_confidence_and_say_which(tmp_path, small_yaml, local_embedder, caplog):
    write_examples(small_yaml, {**EXAMPLES, "email": EXAMPLES["email"][: MIN_EXAMPLES - 1]})
    with (
        open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store,
        caplog.at_level(logging.WARNING, logger="brain.features.specialists.registry"),
    ):
        reg = SpecialistRegistry(store, path=small_yaml)
        reg.register()
        request = "copy the text from this receipt"
        for m in reg.find_specialists(request, k=3):
            assert m.confidence == pytest.approx(SpecialistConfidence()(m.score, request_words(request)), abs=1e-12)
    assert any("email" in r.getMessage() and "labelled requests" in r.getMessage() for r in caplog.records)


def test_a_bad_examples_file_stores_nothing(tmp_path, small_yaml, local_embedder):
    examples_path(small_yaml).write_text(
        '{"request": "add 2 and 2", "expected": "calculator"}\n{"oops": 1}\n', encoding="utf-8"
    )
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store:
        reg = SpecialistRegistry(store, path=small_yaml)
        with pytest.raises(ConfigError, match="line 2"):
            reg.register()
        assert len(reg) == 0 and reg.chroma.ids() == []


def test_examples_of_specialists_not_registered_are_left_out(tmp_path, small_yaml, local_embedder):
    write_examples(small_yaml, {**EXAMPLES, "weather": ["will it rain in Leeds tomorrow"] * 1 + ["forecast for Oslo"]})
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store:
        reg = SpecialistRegistry(store, path=small_yaml)
        assert reg.register().embedded == 18 + 24
        assert {m.id for m in reg.find_specialists("will it rain in Leeds tomorrow", k=10)} == {
            "ocr",
            "calculator",
            "email",
        }


@pytest.mark.slow
def test_the_shipped_specialists_call_a_plain_percentage_strong(tmp_path, local_embedder):
    # like the request a blind writer found banded weak under the score-and-length confidence ("what's
    # 17 percent of 2,340"), which the examples file holds; this one it does not
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store:
        reg = SpecialistRegistry(store, path=SHIPPED)
        reg.register()
        top = reg.find_specialists("what's 23 percent of 1,870", k=1)[0]
        assert (top.id, top.band) == ("calculator", "strong")
        assert reg.find_specialists("tell me a bedtime story about a dragon", k=1)[0].band == "weak"


def test_a_list_of_specialists_keeps_the_stored_examples_and_a_file_without_them_removes_them(
    tmp_path, small_yaml, local_embedder
):
    write_examples(small_yaml, EXAMPLES)
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store:
        reg = SpecialistRegistry(store, path=small_yaml)
        reg.register()
        request = "please copy out the text in this photo of a receipt"
        learnt = reg.find_specialists(request, k=1)[0].confidence
        assert reg.register(reg.list_specialists()).embedded == 0
        assert reg.find_specialists(request, k=1)[0].confidence == learnt
        assert len([i for i in reg.chroma.ids() if i.startswith("example#")]) == 24
        bare = tmp_path / "other" / "specialists.yaml"
        bare.parent.mkdir()
        bare.write_text(SMALL, encoding="utf-8")
        reg.register(bare)
        assert [i for i in reg.chroma.ids() if i.startswith("example#")] == []
        top = reg.find_specialists(request, k=1)[0]
        assert top.confidence == pytest.approx(SpecialistConfidence()(top.score, request_words(request)), abs=1e-12)
