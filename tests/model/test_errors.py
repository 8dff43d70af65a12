"""brain.model.errors: one hierarchy of named errors, importable where callers found them, and one Problem type."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import brain
import brain.model.errors as errors
from brain.model.errors import BrainError, FilterError, Problem, ValidationError


def test_every_error_class_of_brain_lives_in_brain_errors():
    import importlib
    import pkgutil

    defined_elsewhere = []
    for info in pkgutil.walk_packages(brain.__path__, "brain."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BrainError)
                and value.__module__ == info.name
                and info.name != "brain.model.errors"
            ):
                defined_elsewhere.append(f"{info.name}.{name}")
    assert not defined_elsewhere, defined_elsewhere


@pytest.mark.parametrize(
    "where, names",
    [
        ("brain.features.mirror", ["MirrorCorrupt", "EmbeddingProtocolError", "REBUILD_COMMAND"]),
        ("brain.features.mirror.integrity", ["MirrorCorrupt", "REBUILD_COMMAND"]),
        ("brain.features.mirror.protocol", ["EmbeddingProtocolError"]),
        ("brain.providers.summarizers", ["SummarizerError", "SummarizerUnavailable"]),
        ("brain.providers.summarizers.base", ["SummarizerError", "SummarizerUnavailable"]),
        (
            "brain.errors",
            ["EmbeddingProtocolError", "SummarizerError", "SummarizerUnavailable", "ValidationError", "Backoff"],
        ),
        ("brain.errors", ["FormationAnswerError", "ExtractorError", "ExtractorUnavailable"]),
        ("brain", ["BrainError"]),
    ],
)
def test_errors_stay_importable_from_where_callers_import_them(where, names):
    import importlib

    module = importlib.import_module(where)
    for name in names:
        assert getattr(module, name) is getattr(errors, name), (where, name)


def test_the_hierarchy_says_what_a_caller_does():
    assert issubclass(errors.MirrorCorrupt, errors.StoreUnavailable)  # the API answers 503 for both
    assert issubclass(errors.SummarizerUnavailable, errors.SummarizerError)
    assert issubclass(errors.EmbeddingProtocolError, ValueError) and issubclass(ValidationError, ValueError)
    assert issubclass(FilterError, ValidationError)
    assert issubclass(errors.FormationAnswerError, ValidationError)  # a refused answer: nothing was written
    assert issubclass(errors.ExtractorUnavailable, errors.ExtractorError)
    for value in vars(errors).values():
        if inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == "brain.model.errors":
            assert issubclass(value, BrainError) and value.__doc__, value


def test_a_problem_is_frozen_and_serialises_to_the_api_shape():
    problem = Problem("metadata.tags", "tags must be a list", 3)
    assert problem.to_dict() == {"item": 3, "field": "metadata.tags", "message": "tags must be a list"}
    assert Problem("x", "y").to_dict() == {"item": None, "field": "x", "message": "y"}
    assert Problem("x", "y", file="a.json").to_dict() == {"item": None, "field": "x", "message": "y", "file": "a.json"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.message = "changed"  # type: ignore[misc]


def test_a_problem_reads_as_its_dict():
    problem = Problem("scope", "bad scope", 0)
    assert problem["field"] == "scope" and problem.get("item") == 0 and problem.get("file") is None
    assert dict(problem) == problem.to_dict() and {**problem, "item": 1}["item"] == 1
    assert problem == {"item": 0, "field": "scope", "message": "bad scope"} and problem != Problem("scope", "bad scope")
    assert problem == Problem("scope", "bad scope", 0) and len({problem, Problem("scope", "bad scope", 0)}) == 1
    with pytest.raises(KeyError):
        problem["file"]


def test_validation_error_reads_mappings_as_problems():
    exc = ValidationError(
        "two things",
        [Problem("a", "first", 0), {"item": 1, "field": "b", "message": "second"}, {"field": "c", "message": "third"}],
    )
    assert all(isinstance(p, Problem) for p in exc.problems)
    assert [(p.item, p.field, p.message) for p in exc.problems] == [
        (0, "a", "first"),
        (1, "b", "second"),
        (None, "c", "third"),
    ]
    assert ValidationError("nothing listed").problems == []
    one = ValidationError.of("k", "k must be positive", item=2)
    assert str(one) == "k must be positive" and one.problems == [Problem("k", "k must be positive", 2)]


def test_library_errors_carry_problems():
    from brain.model.schemas import validate_metadata
    from brain.rules.filters import to_chroma_where

    with pytest.raises(ValidationError) as caught:
        validate_metadata("memory", {"importance": 9, "tags": "not-a-list"})
    assert {p.field for p in caught.value.problems} >= {"importance", "tags"}
    assert all(isinstance(p, Problem) and p.item is None for p in caught.value.problems)
    with pytest.raises(FilterError) as caught:
        to_chroma_where({"importance": {"$regex": "x"}})
    assert caught.value.problems[0].field == "where.importance"
