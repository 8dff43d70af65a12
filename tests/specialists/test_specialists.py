"""The specialist registry: YAML validation, vectors in the `specialists` collection, exact scoring,
bands, the request cache and SPECIALIST_REQUEST parsing -- with real Chroma and the real embedder."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.specialists import (
    SpecialistBands,
    SpecialistConfidence,
    SpecialistRegistry,
    SpecialistWeights,
    load_specialists,
    parse_specialist_requests,
    specialists_from_yaml,
)
from brain.model.errors import ConfigError, EmbeddingModelMismatch, ValidationError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "specialists.yaml"

SMALL = """
specialists:
  - id: ocr
    description: Reads text in images.
    semantics:
      canonical: read the words in a photo or scan and return them as text
      predicates: [transcribe a scanned page, copy the text out of a photo]
      objects: [a printed receipt, handwritten notes]
      contexts: [the user sent an image with text]
      not: [what is happening in this picture]
    params:
      - {name: image, type: string, required: true, description: the image}
      - {name: language, type: string}
  - id: calculator
    description: Exact arithmetic.
    semantics:
      canonical: work out a calculation or a percentage
      predicates: [add up numbers, convert between units]
      objects: [an arithmetic formula, a discount]
      not: [run this Python script, what is the exchange rate today]
    params:
      - {name: expression, type: string, required: true}
      - {name: precision, type: integer}
  - id: email
    description: Reads and sends email.
    semantics:
      canonical: send, reply to or search emails in my inbox
      predicates: [send an email to someone, check my inbox]
      objects: [unread emails, an attachment]
    params:
      - {name: action, type: string, required: true}
      - {name: to, type: array}
      - {name: urgent, type: boolean}
      - {name: options, type: object}
      - {name: delay_seconds, type: number}
"""


class CountingEmbedder:
    """The real embedder, counting what is sent to it."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.document_texts = 0
        self.queries = 0

    def embed_documents(self, texts):
        self.document_texts += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.queries += 1
        return self.inner.embed_query(text)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def write_yaml(tmp_path: Path, text: str, name: str = "specialists.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def counting(local_embedder):
    return CountingEmbedder(local_embedder)


@pytest.fixture
def small_yaml(tmp_path) -> Path:
    return write_yaml(tmp_path, SMALL)


@pytest.fixture
def registry(embedded_store, counting, small_yaml):
    reg = SpecialistRegistry(embedded_store, path=small_yaml, embedder=counting)
    reg.register()
    return reg


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, local_embedder):
    """The shipped YAML registered once for the ranking tests."""
    with open_store(
        Settings(data_dir=tmp_path_factory.mktemp("shipped") / "data"), embedder=local_embedder, mirror=False
    ) as opened:
        reg = SpecialistRegistry(opened, path=SHIPPED)
        reg.register()
        yield reg


# ---- YAML validation -----------------------------------------------------------------------------
def test_shipped_yaml_is_valid_and_uses_the_knowledge_base_ids():
    specs = load_specialists(SHIPPED)
    ids = {s.id for s in specs}
    kb_ids = {
        json.loads(line).get("specialist") for line in (ROOT / "config/kb/specialists.jsonl").read_text().splitlines()
    }
    assert kb_ids - {None} <= ids
    assert {"web_search", "ocr", "vision", "docs"} <= ids and len(ids) >= 8
    assert all(s.semantics.not_ and s.params and any(p.required for p in s.params) for s in specs)


@pytest.mark.parametrize(
    "edit, specialist, field, words",
    [
        (
            lambda d: d[1]["semantics"].pop("canonical"),
            "specialist 2 (calculator)",
            "semantics.canonical",
            "Field required",
        ),
        (
            lambda d: d[0]["semantics"].update(predicate=["x"]),
            "specialist 1 (ocr)",
            "semantics.predicate",
            "unknown field",
        ),
        (lambda d: d[2]["params"][0].update(type="str"), "specialist 3 (email)", "params.0.type", "'string'"),
        (
            lambda d: d[1]["semantics"].update(objects=[]),
            "specialist 2 (calculator)",
            "semantics.objects",
            "at least 1",
        ),
        (lambda d: d[0].update(id="Web-Search"), "specialist 1 (Web-Search)", "id", "lower_snake_case"),
        (lambda d: d[2].update(id="ocr"), "specialist 3 (ocr)", "id", "duplicate id"),
        (lambda d: d[0]["params"].append({"name": "image"}), "specialist 1 (ocr)", "params", "declared twice"),
        (lambda d: d[0]["params"][0].update(required="yes"), "specialist 1 (ocr)", "params.0.required", "boolean"),
        (
            lambda d: d[0]["semantics"].update(canonical="   "),
            "specialist 1 (ocr)",
            "semantics.canonical",
            "at least 1",
        ),
    ],
)
def test_validation_errors_name_the_specialist_and_the_field(edit, specialist, field, words):
    import yaml

    data = yaml.safe_load(SMALL)["specialists"]
    edit(data)
    with pytest.raises(ValidationError) as caught:
        specialists_from_yaml(yaml.safe_dump({"specialists": data}), source="my.yaml")
    item = int(specialist.split()[1]) - 1  # "specialist 3 (email)" is item 2
    problems = [p for p in caught.value.problems if p.item == item and p.field == field]
    assert problems, caught.value.problems
    assert problems[0].file == "my.yaml" and f"{specialist}: {field}: " in str(caught.value)
    assert words in problems[0].message or words in str(caught.value)
    assert str(caught.value).startswith("my.yaml: ") and "nothing was registered" in str(caught.value)


def test_yaml_syntax_error_gives_the_line_and_a_missing_file_names_the_setting(tmp_path):
    with pytest.raises(ValidationError, match=r"not valid YAML at line 3, column 19: mapping values are not allowed"):
        specialists_from_yaml("specialists:\n  - id: ocr\n    description: a: b\n")
    with pytest.raises(ValidationError, match="unknown top-level keys"):
        specialists_from_yaml("specialist: []\n")
    with pytest.raises(ConfigError, match="BRAIN_SPECIALISTS_PATH"):
        load_specialists(tmp_path / "nope.yaml")


def test_a_bad_specialist_stores_nothing(embedded_store, counting, tmp_path):
    bad = SMALL.replace("      canonical: work out a calculation or a percentage\n", "")
    reg = SpecialistRegistry(embedded_store, path=write_yaml(tmp_path, bad), embedder=counting)
    with pytest.raises(ValidationError, match=r"specialist 2 \(calculator\): semantics.canonical"):
        reg.register()
    assert counting.document_texts == 0 and reg.col.count() == 0 and len(reg) == 0


# ---- registration ------------------------------------------------------------------------------------
def test_registration_stores_three_vectors_and_the_not_examples(registry, embedded_store, local_embedder):
    assert embedded_store.count() == 0  # nothing in the conversations collection
    assert registry.col.metadata["embedder"] == local_embedder.name
    got = registry.col.get(include=["metadatas", "embeddings", "documents"])
    by_id = {
        i: (m, np.asarray(e), d)
        for i, m, e, d in zip(got["ids"], got["metadatas"], got["embeddings"], got["documents"])
    }
    per = {}
    for meta, _, _ in by_id.values():
        per.setdefault(meta["specialist"], []).append(meta["kind"])
    assert sorted(per["ocr"]) == ["canonical", "not", "objects", "predicates"]
    assert sorted(per["calculator"]) == ["canonical", "not", "not", "objects", "predicates"]
    assert sorted(per["email"]) == ["canonical", "objects", "predicates"]

    spec = registry.get("calculator")
    canonical = local_embedder.embed_documents([spec.semantics.canonical])[0]
    assert np.allclose(by_id["calculator#canonical"][1], canonical, atol=1e-5)
    mean = local_embedder.embed_documents(spec.semantics.predicates).mean(axis=0)
    predicates = by_id["calculator#predicates"][1]
    assert np.isclose(np.linalg.norm(predicates), 1.0, atol=1e-5)  # the mean is renormalised
    assert np.allclose(predicates, mean / np.linalg.norm(mean), atol=1e-5)
    assert by_id["calculator#not-1"][2] == "what is the exchange rate today"
    assert np.allclose(
        by_id["calculator#not-1"][1], local_embedder.embed_documents(["what is the exchange rate today"])[0], atol=1e-5
    )


def test_unchanged_yaml_embeds_nothing(registry, counting):
    before = counting.document_texts
    report = registry.register()
    assert counting.document_texts == before
    assert report.embedded == 0 and not report.changed and sorted(report.unchanged) == ["calculator", "email", "ocr"]


def test_changed_specialists_are_re_embedded_and_removed_ones_deleted(registry, counting, small_yaml):
    small_yaml.write_text(SMALL.replace("add up numbers", "sum a column of numbers"))
    counting.document_texts = 0
    report = registry.register()
    assert report.updated == ["calculator"] and sorted(report.unchanged) == ["email", "ocr"]
    assert counting.document_texts == report.embedded == len(registry.get("calculator").embedded_texts)
    assert "sum a column of numbers" in registry.col.get(ids=["calculator#predicates"])["documents"][0]

    # description only: rewritten, nothing embedded
    small_yaml.write_text(
        SMALL.replace("add up numbers", "sum a column of numbers").replace("Exact arithmetic.", "Sums, exactly.")
    )
    counting.document_texts = 0
    report = registry.register()
    assert report.updated == ["calculator"] and report.embedded == 0 and counting.document_texts == 0
    assert registry.get("calculator").description == "Sums, exactly."

    # one not example fewer: its record goes
    small_yaml.write_text(
        SMALL.replace("not: [run this Python script, what is the exchange rate today]", "not: [run this Python script]")
    )
    registry.register()
    assert registry.col.get(ids=["calculator#not-1"])["ids"] == []
    assert registry.col.get(ids=["calculator#not-0"])["ids"] == ["calculator#not-0"]

    # a specialist no longer listed: kept with prune=False, deleted by default
    only_two = SMALL[: SMALL.index("  - id: email")]
    small_yaml.write_text(only_two)
    report = registry.register(prune=False)
    assert report.removed == [] and registry.get("email") is not None
    report = registry.register()
    assert report.removed == ["email"] and registry.get("email") is None
    assert registry.col.get(where={"specialist": "email"})["ids"] == []


def test_reopening_loads_the_specialists_without_embedding(settings, local_embedder, small_yaml):
    with open_store(settings, embedder=local_embedder) as first:
        SpecialistRegistry(first, path=small_yaml).register()
        before = [
            (m.id, round(m.score, 5))
            for m in SpecialistRegistry(first, path=small_yaml).find_specialists("copy the words from this photo", k=3)
        ]
    with open_store(settings, embedder=local_embedder) as again:
        counting = CountingEmbedder(local_embedder)
        reg = SpecialistRegistry(again, path=small_yaml, embedder=counting)
        assert sorted(s.id for s in reg.list_specialists()) == ["calculator", "email", "ocr"]
        assert reg.register().embedded == 0 and counting.document_texts == 0
        assert [
            (m.id, round(m.score, 5)) for m in reg.find_specialists("copy the words from this photo", k=3)
        ] == before


def test_an_interrupted_registration_is_completed_by_the_next(registry, counting, embedded_store, small_yaml):
    registry.col.delete(ids=["ocr#objects"])  # as if the run had stopped half-way
    reopened = SpecialistRegistry(embedded_store, path=small_yaml, embedder=counting)
    assert reopened.get("ocr") is None and reopened.get("email") is not None
    counting.document_texts = 0
    report = reopened.register()
    assert report.added == ["ocr"] and counting.document_texts == len(reopened.get("ocr").embedded_texts)


def test_another_embedders_collection_is_refused(registry, embedded_store, small_yaml):
    registry.col.modify(metadata={**registry.col.metadata, "embedder": "ollama/nomic-embed-text"})
    with pytest.raises(EmbeddingModelMismatch, match="BRAIN_SPECIALISTS_COLLECTION"):
        SpecialistRegistry(embedded_store, path=small_yaml)


def test_registry_on_embedded_and_server_chroma(store, local_embedder, small_yaml):
    name = f"specialists-{uuid.uuid4().hex[:8]}"
    reg = SpecialistRegistry(store, path=small_yaml, collection=name)
    assert reg.register().embedded == 6 + 7 + 5  # canonical, predicates, objects, not examples
    counting = CountingEmbedder(local_embedder)
    again = SpecialistRegistry(store, path=small_yaml, collection=name, embedder=counting)
    assert len(again) == 3 and again.register().embedded == 0 and counting.document_texts == 0
    assert again.find_specialists("transcribe this receipt photo", k=1)[0].id == "ocr"


# ---- finding -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "request_text, expected",
    [("look this up online", "web_search"), ("read the text in this photo", "ocr")],
)
def test_the_issue_examples_rank_first(shipped, request_text, expected):
    matches = shipped.find_specialists(request_text, k=3)
    assert matches[0].id == expected
    assert matches[0].score > matches[1].score
    assert matches[0].confidence > 2 * matches[1].confidence  # well ahead of the runner-up


def test_a_request_that_names_its_subject_is_strong_and_one_that_does_not_is_less_sure(shipped):
    # "look this up online" names no subject ("this" is in the conversation, not the request): the
    # classifier puts web_search first but leaves the caller room to ask what to look up
    vague = shipped.find_specialists("look this up online", k=1)[0]
    clear = shipped.find_specialists("look up online who won the champions league final last night", k=1)[0]
    assert (vague.id, clear.id) == ("web_search", "web_search")
    assert clear.band == "strong" and vague.confidence < clear.confidence


def test_score_is_the_documented_formula_and_exact(shipped, local_embedder):
    request = "how many miles is a marathon"
    # without labelled requests the ranking is in score order, and the confidence is the score's
    matches = SpecialistRegistry(shipped.store, path=SHIPPED, use_examples=False).find_specialists(
        request, k=len(shipped)
    )
    assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)
    learnt = shipped.find_specialists(request, k=len(shipped))
    assert {m.id: m.score for m in learnt} == pytest.approx({m.id: m.score for m in matches}, abs=1e-9)
    assert len(matches) == len(shipped) and len(shipped.find_specialists(request, k=2)) == 2
    q = local_embedder.embed_query(request.lower())
    got = shipped.col.get(include=["embeddings", "metadatas", "documents"])
    vec = {i: np.asarray(e) for i, e in zip(got["ids"], got["embeddings"])}
    for m in matches:
        assert m.canonical == pytest.approx(float(vec[f"{m.id}#canonical"] @ q), abs=1e-5)
        assert m.predicates == pytest.approx(float(vec[f"{m.id}#predicates"] @ q), abs=1e-5)
        assert m.objects == pytest.approx(float(vec[f"{m.id}#objects"] @ q), abs=1e-5)
        nots = [float(vec[i] @ q) for i in vec if i.startswith(f"{m.id}#not-")]
        assert m.not_similarity == pytest.approx(max(nots), abs=1e-5)
        assert m.penalty == pytest.approx(1.0 * max(0.0, max(nots) - 0.50), abs=1e-6)
        assert m.score == pytest.approx(
            0.5 * m.canonical + 0.3 * m.predicates + 0.2 * m.objects - m.penalty + 0.2 * m.lexical, abs=1e-6
        )
        words = len(request.split())  # plain words here, so the confidence's count is the split's
        assert m.confidence == pytest.approx(
            1 / (1 + math.exp(-(-6.30 + 13.75 * m.score + 1.36 * math.log(words)))), abs=1e-9
        )
        assert m.band == SpecialistBands().band(m.confidence)
    # the lexical shares: BM25 of the request against each specialist's words, as shares of the total
    from brain.text import BM25Index as LexicalIndex
    from brain.text import tokenize

    specs = {s.id: s for s in shipped.list_specialists()}
    order = sorted(specs)
    bm25 = LexicalIndex(
        [
            tokenize(
                " ".join([specs[i].semantics.canonical, *specs[i].semantics.predicates, *specs[i].semantics.objects])
            )
            for i in order
        ]
    ).scores(tokenize(request))
    assert bm25.sum() > 0
    for m in matches:
        assert m.lexical == pytest.approx(bm25[order.index(m.id)] / max(bm25.sum(), 4.0), abs=1e-9)
    assert sum(m.lexical for m in matches) == pytest.approx(min(1.0, bm25.sum() / 4.0))


@pytest.mark.slow
def test_without_the_lexical_share_the_score_is_the_dense_formula(embedded_store, local_embedder):
    registry = SpecialistRegistry(embedded_store, path=SHIPPED, lexical_weight=0.0)
    registry.register()
    for m in registry.find_specialists("convert 30 celsius to fahrenheit please", k=10):
        assert m.score == pytest.approx(0.5 * m.canonical + 0.3 * m.predicates + 0.2 * m.objects - m.penalty, abs=1e-6)


@pytest.mark.slow
def test_a_not_example_lowers_the_score(shipped, embedded_store):
    request = "type out the words printed in this image"  # one of vision's not examples
    plain = SpecialistRegistry(shipped.store, path=SHIPPED, not_penalty=0.0)
    with_not = {m.id: m for m in shipped.find_specialists(request, k=len(shipped))}
    without = {m.id: m for m in plain.find_specialists(request, k=len(plain))}
    vision = with_not["vision"]
    assert vision.closest_not == request and vision.not_similarity == pytest.approx(1.0, abs=1e-4)
    assert vision.penalty == pytest.approx(1.0 - 0.50, abs=1e-4)
    assert vision.score == pytest.approx(without["vision"].score - vision.penalty, abs=1e-6)
    assert shipped.find_specialists(request, k=1)[0].id == "ocr"
    # stronger penalty, lower score; weights are normalised, so 5/3/2 is the default
    harsh = SpecialistRegistry(shipped.store, path=SHIPPED, not_penalty=2.0, weights=SpecialistWeights(5, 3, 2))
    harsh_vision = next(m for m in harsh.find_specialists(request, k=len(harsh)) if m.id == "vision")
    assert harsh_vision.score == pytest.approx(without["vision"].score - 2 * vision.penalty, abs=1e-6)


@pytest.mark.slow
def test_bands_follow_the_thresholds(shipped):
    bands = SpecialistBands(strong=0.90, good=0.80, possible=0.70)
    assert [bands.band(s) for s in (0.95, 0.90, 0.85, 0.80, 0.75, 0.70, 0.69)] == [
        "strong",
        "good",
        "good",
        "good",
        "possible",
        "possible",
        "weak",
    ]
    top = shipped.find_specialists("read the text in this photo", k=1)[0]
    # the bands are read from the confidence, not the raw score
    for cut, band in [(top.confidence - 0.01, "strong"), (top.confidence + 0.01, "weak")]:
        reg = SpecialistRegistry(shipped.store, path=SHIPPED, bands=SpecialistBands(strong=cut, good=cut, possible=cut))
        assert reg.find_specialists("read the text in this photo", k=1)[0].band == band
    reg = SpecialistRegistry(
        shipped.store, path=SHIPPED, bands=SpecialistBands(strong=1.0, good=top.confidence, possible=0.0)
    )
    assert reg.find_specialists("read the text in this photo", k=1)[0].band == "good"
    with pytest.raises(ConfigError, match="possible <= good <= strong"):
        SpecialistBands(strong=0.5, good=0.6, possible=0.1)
    with pytest.raises(ConfigError, match="positive sum"):
        SpecialistWeights(0, 0, 0)


def test_a_request_that_matches_nothing_is_weak(shipped):
    # MiniLM is not perfect here (bench/SPECIALISTS_RESULTS.md: "good evening, how was your day?"
    # reaches weather's "possible"); these two are clear of every specialist
    matched = min(
        shipped.find_specialists(r, k=1)[0].score for r in ("look this up online", "read the text in this photo")
    )
    for request in ("tell me a bedtime story about a dragon", "tell me a joke"):
        top = shipped.find_specialists(request, k=1)[0]
        assert top.band == "weak" and top.score < matched


def test_bad_find_arguments(registry):
    for bad in ("", "   ", None):
        with pytest.raises(ValidationError, match="request"):
            registry.find_specialists(bad)
    for k in (0, 1001, True, "3"):
        with pytest.raises(ValidationError, match="k must be"):
            registry.find_specialists("hello", k=k)


# ---- the cache ---------------------------------------------------------------------------------------
def test_cache_hits_normalise_expire_and_clear_on_registration(embedded_store, counting, small_yaml):
    clock = Clock()
    reg = SpecialistRegistry(embedded_store, path=small_yaml, embedder=counting, clock=clock, cache_ttl=300)
    reg.register()
    first = reg.find_specialists("Copy the text from this receipt", k=2)
    assert counting.queries == 1
    assert reg.find_specialists("  copy THE text   from this receipt ", k=3)[:2] == first
    assert counting.queries == 1 and reg.cache_info()["hits"] == 1
    clock.now += 299
    reg.find_specialists("copy the text from this receipt")
    assert counting.queries == 1
    clock.now += 2  # past the TTL
    assert reg.find_specialists("copy the text from this receipt", k=2) == first
    assert counting.queries == 2
    small_yaml.write_text(SMALL.replace("copy the text out of a photo", "copy the text from a picture"))
    reg.register()
    changed = reg.find_specialists("copy the text from this receipt", k=2)
    assert counting.queries == 3 and changed[0].predicates != first[0].predicates


# ---- SPECIALIST_REQUEST markers -----------------------------------------------------------------------
def test_parse_finds_every_marker_with_nested_json(registry):
    text = (
        'Let me check.\nSPECIALIST_REQUEST[email:{"action": "send", "to": ["a@x.org", "b@y.org"], '
        '"options": {"cc": [{"name": "C [boss]"}], "note": "braces } and ] inside"}, "urgent": false}]\n'
        'and SPECIALIST_REQUEST[calculator: {"expression": "(2+3)*4", "precision": 2} ] done'
    )
    found = registry.parse_specialist_request(text)
    assert [(name, params) for name, params, *_ in found] == [
        (
            "email",
            {
                "action": "send",
                "to": ["a@x.org", "b@y.org"],
                "options": {"cc": [{"name": "C [boss]"}], "note": "braces } and ] inside"},
                "urgent": False,
            },
        ),
        ("calculator", {"expression": "(2+3)*4", "precision": 2}),
    ]
    assert (
        text[found[1].start : found[1].end].startswith("SPECIALIST_REQUEST[calculator")
        and text[found[1].end - 1] == "]"
    )
    assert registry.parse_specialist_request("no markers here") == []


@pytest.mark.parametrize(
    "text, field, words",
    [
        (
            'SPECIALIST_REQUEST[weather:{"location": "Porto"}]',
            "name",
            "unknown specialist 'weather'; known specialists: calculator, email, ocr",
        ),
        (
            'x\nSPECIALIST_REQUEST[ocr:{"image": "a.png",}]',
            "params",
            "bad JSON for 'ocr': Expecting property name enclosed in double quotes at line 2, column 42",
        ),
        ('SPECIALIST_REQUEST[ocr:{"language": "pt"}]', "params.image", "ocr needs the parameter 'image'"),
        ('SPECIALIST_REQUEST[ocr:{"image": 7}]', "params.image", "ocr.image must be a string, got 7"),
        (
            'SPECIALIST_REQUEST[calculator:{"expression": "1+1", "precision": true}]',
            "params.precision",
            "must be an integer",
        ),
        (
            'SPECIALIST_REQUEST[calculator:{"expression": "1+1", "precision": 2.5}]',
            "params.precision",
            "must be an integer",
        ),
        ('SPECIALIST_REQUEST[email:{"action": "send", "to": "a@x.org"}]', "params.to", "must be an array"),
        ('SPECIALIST_REQUEST[email:{"action": "send", "urgent": "yes"}]', "params.urgent", "must be a boolean"),
        ('SPECIALIST_REQUEST[email:{"action": "send", "options": []}]', "params.options", "must be an object"),
        (
            'SPECIALIST_REQUEST[email:{"action": "send", "delay_seconds": "5"}]',
            "params.delay_seconds",
            "must be a number",
        ),
        ('SPECIALIST_REQUEST[email:{"action": "send", "cc": []}]', "params.cc", "email has no parameter 'cc'"),
        ('SPECIALIST_REQUEST[ocr:["a.png"]]', "params", "must be a JSON object"),
        ('SPECIALIST_REQUEST[ocr:{"image": "a.png"} and more', "params", "expected ']'"),
        ("SPECIALIST_REQUEST[ocr]", "name", "expected ':'"),
    ],
)
def test_parse_errors(registry, text, field, words):
    with pytest.raises(ValidationError) as caught:
        registry.parse_specialist_request(text)
    problem = caught.value.problems[0]
    assert problem["field"] == field and words in problem["message"], problem
    assert problem["message"].startswith("marker 1 at line ")


def test_parse_reports_every_bad_marker_and_accepts_numbers(registry):
    ok = registry.parse_specialist_request('SPECIALIST_REQUEST[email:{"action": "send", "delay_seconds": 5}]')
    assert ok[0].params["delay_seconds"] == 5
    with pytest.raises(ValidationError) as caught:
        parse_specialist_requests(
            "SPECIALIST_REQUEST[ocr:{}] then SPECIALIST_REQUEST[nope:{}]", registry.list_specialists()
        )
    assert [p["item"] for p in caught.value.problems] == [0, 1]


def test_from_settings_reads_the_proposed_fields(embedded_store, small_yaml):
    from types import SimpleNamespace

    from brain.features.specialists import SETTINGS_FIELDS

    values = dict(
        specialists_path=small_yaml,
        specialists_collection="spx",
        specialist_weight_canonical=1.0,
        specialist_weight_predicates=0.0,
        specialist_weight_objects=0.0,
        specialist_not_penalty=2.0,
        specialist_not_margin=0.6,
        specialist_band_strong=0.8,
        specialist_band_good=0.5,
        specialist_band_possible=0.3,
        specialist_cache_ttl_seconds=10.0,
        specialist_cache_size=7,
        specialist_weight_lexical=0.4,
        specialist_confidence_intercept=-1.0,
        specialist_confidence_score=2.0,
        specialist_confidence_length=0.5,
    )
    assert set(values) == set(SETTINGS_FIELDS)
    reg = SpecialistRegistry.from_settings(embedded_store, SimpleNamespace(chroma_url=None, **values))
    assert (reg.path, reg.collection_name, reg.weights.normalised(), reg.not_penalty, reg.not_margin) == (
        small_yaml,
        "spx",
        (1.0, 0.0, 0.0),
        2.0,
        0.6,
    )
    assert (
        reg.bands == SpecialistBands(0.8, 0.5, 0.3)
        and reg.cache_info()["ttl"] == 10.0
        and reg.cache_info()["maxsize"] == 7
    )
    assert reg.lexical_weight == 0.4 and reg.confidence == SpecialistConfidence(-1.0, 2.0, 0.5)
    plain = SpecialistRegistry.from_settings(embedded_store)  # today's Settings: the documented defaults
    assert plain.bands == SpecialistBands() and plain.collection_name == "specialists"
    assert plain.confidence == SpecialistConfidence()


TWINS = """
specialists:
  - id: alpha
    description: Household helper A.
    semantics:
      canonical: help with a household task
      predicates: [recalibrate the zorblat meter]
      objects: [the zorblat meter]
  - id: beta
    description: Household helper B.
    semantics:
      canonical: help with a household task
      predicates: [tidy the kitchen cupboard]
      objects: [the kitchen cupboard]
"""


def test_the_lexical_share_decides_between_specialists_that_read_alike(embedded_store, tmp_path):
    """Two specialists the embedder barely tells apart: the request's decisive word picks one."""
    path = tmp_path / "twins.yaml"
    path.write_text(TWINS, encoding="utf-8")
    request = "my zorblat is acting up again, can you look at it"
    dense_only = SpecialistRegistry(embedded_store, path=path, lexical_weight=0.0, collection="twins-dense")
    dense_only.register()
    dense = {m.id: m.score for m in dense_only.find_specialists(request, k=2)}
    hybrid = SpecialistRegistry(embedded_store, path=path, collection="twins-hybrid")
    hybrid.register()
    top, other = hybrid.find_specialists(request, k=2)
    assert top.id == "alpha" and top.lexical > 0 and other.lexical == 0.0
    assert top.score == pytest.approx(dense["alpha"] + 0.2 * top.lexical, abs=1e-6)
    assert other.score == pytest.approx(dense["beta"], abs=1e-6)
    assert top.score - other.score > abs(dense["alpha"] - dense["beta"])  # the margin grows by the share


# ---- one band rule; scoring without a store ------------------------------------------------------------
@pytest.mark.parametrize(
    "strong, good, possible, ok",
    [
        (0.67, 0.48, 0.30, True),
        (0.5, 0.5, 0.5, True),
        (0.6, 0.6, 0.1, True),
        (0.6, 0.2, 0.2, True),
        (0.5, 0.6, 0.1, False),
        (0.6, 0.2, 0.3, False),
        (0.2, 0.5, 0.6, False),
    ],
)
def test_settings_and_bands_share_one_order_rule(strong, good, possible, ok):
    from brain.config import specialist_bands_in_order

    assert specialist_bands_in_order(strong, good, possible) is ok
    if ok:
        bands = SpecialistBands(strong=strong, good=good, possible=possible)
        settings = Settings(specialist_band_strong=strong, specialist_band_good=good, specialist_band_possible=possible)
        assert (settings.specialist_band_strong, settings.specialist_band_good, settings.specialist_band_possible) == (
            bands.strong,
            bands.good,
            bands.possible,
        )
    else:
        with pytest.raises(ConfigError, match="possible <= good <= strong"):
            SpecialistBands(strong=strong, good=good, possible=possible)
        with pytest.raises(ConfigError, match="BRAIN_SPECIALIST_BAND_STRONG >= BRAIN_SPECIALIST_BAND_GOOD"):
            Settings(specialist_band_strong=strong, specialist_band_good=good, specialist_band_possible=possible)


def test_equal_thresholds_leave_the_band_between_them_empty():
    bands = SpecialistBands(strong=0.5, good=0.5, possible=0.5)
    assert [bands.band(s) for s in (0.51, 0.5, 0.49)] == ["strong", "good", "weak"]
    bands = SpecialistBands(strong=0.6, good=0.3, possible=0.3)
    assert [bands.band(s) for s in (0.61, 0.6, 0.3, 0.29)] == ["strong", "good", "good", "weak"]
    with pytest.raises(ConfigError, match="possible <= good <= strong"):
        SpecialistBands(strong=float("nan"), good=0.5, possible=0.3)


def test_band_defaults_are_written_once():
    from brain.config import SPECIALIST_BAND_DEFAULTS, SPECIALIST_EMBEDDER_DEFAULTS, SPECIALIST_REFERENCE_EMBEDDER

    assert SpecialistBands() == SpecialistBands(**SPECIALIST_BAND_DEFAULTS)
    assert SPECIALIST_BAND_DEFAULTS == SPECIALIST_EMBEDDER_DEFAULTS[SPECIALIST_REFERENCE_EMBEDDER]["bands"]
    # unset in the settings: each embedder's own thresholds apply
    default = Settings.model_fields
    assert all(default[f"specialist_band_{b}"].default is None for b in ("strong", "good", "possible"))
    # the shipped env file shows the reference's for people reading it, commented out; it must say the same
    env = dict(
        line.removeprefix("# ").split("=", 1)
        for line in (ROOT / "config" / "defaults.env").read_text().splitlines()
        if line.startswith("# BRAIN_SPECIALIST_BAND_")
    )
    assert {
        k.removeprefix("BRAIN_SPECIALIST_BAND_").lower(): float(v) for k, v in env.items()
    } == SPECIALIST_BAND_DEFAULTS


def test_scoring_table_ranks_exactly_what_the_registry_does(registry, local_embedder):
    from brain.features.specialists import ScoringParams, ScoringTable, SpecialistVectors

    specs = specialists_from_yaml(SMALL)
    table = ScoringTable(
        [SpecialistVectors.from_embeddings(s, local_embedder.embed_documents(s.embedded_texts)) for s in specs],
        local_embedder.dimension,
    )
    assert table.ids == ["calculator", "email", "ocr"] and len(table) == 3
    request = "copy the text from this receipt"
    ranked = table.rank(local_embedder.embed_query(request), request, ScoringParams())
    found = registry.find_specialists(request, k=3)
    # the registry scores with Chroma's copy of the vectors, equal to the embedder's but for the last bits
    assert [(m.id, m.band, m.closest_not) for m in ranked] == [(m.id, m.band, m.closest_not) for m in found]
    for fields in ("score", "canonical", "predicates", "objects", "penalty", "lexical", "confidence"):
        assert [getattr(m, fields) for m in ranked] == pytest.approx([getattr(m, fields) for m in found], abs=1e-6)
    no_words = table.rank(local_embedder.embed_query(request), "", ScoringParams())
    assert all(m.lexical == 0.0 for m in no_words)
    assert (
        ScoringTable([], local_embedder.dimension).rank(local_embedder.embed_query(request), request, ScoringParams())
        == ()
    )
    ocr = SpecialistVectors.from_embeddings(specs[0], local_embedder.embed_documents(specs[0].embedded_texts))
    assert specs[0].id == "ocr" and ocr.nots.shape == (1, local_embedder.dimension)
    for part in (ocr.canonical, ocr.predicates, ocr.objects):
        assert float(np.linalg.norm(part)) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"not_penalty": -1.0}, "not_penalty must be >= 0"),
        ({"not_margin": 1.5}, "not_margin must be between -1 and 1"),
        ({"lexical_weight": 1.2}, "lexical_weight must be between 0 and 1"),
        ({"lexical_weight": float("nan")}, "lexical_weight must be between 0 and 1"),
    ],
)
def test_scoring_params_are_checked_by_the_registry_too(embedded_store, kwargs, words):
    from brain.features.specialists import ScoringParams

    with pytest.raises(ConfigError, match=words):
        ScoringParams(**kwargs)
    with pytest.raises(ConfigError, match=words):
        SpecialistRegistry(embedded_store, **kwargs)


def test_clear_cache_forgets_every_ranking(registry, counting):
    first = registry.find_specialists("copy the text from this receipt")
    registry.find_specialists("copy the text from this receipt")
    assert counting.queries == 1 and registry.cache_info()["size"] == 1
    registry.clear_cache()
    assert registry.cache_info()["size"] == 0
    assert registry.find_specialists("copy the text from this receipt") == first and counting.queries == 2
