"""One table of errors: each of brain's error classes raised under an operation reaches a caller on the store
and a caller beside a server as the same class, with the same message (and problems), and every class has a
status and kind of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain.model.errors as errors
from brain.model.errors import BrainError, Problem, ValidationError
from brain.ops.error_table import WIRE_ERRORS, wire_of
from tests.conftest import local_and_served

BOOM = "mem-raises"


def every_error_class() -> list[type[BrainError]]:
    found = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, BrainError)]
    return sorted(found, key=lambda c: c.__name__)


def instance(cls: type[BrainError]) -> BrainError:
    if cls is errors.DiskSpaceLow:
        return cls("/data", 10 * 2**20, 100 * 2**20)
    if cls is errors.MirrorCorrupt:
        return cls("/data/mirror.db", "database disk image is malformed")
    if cls is errors.EmbeddingProtocolError:
        return cls("dimension_mismatch", "384 numbers expected, got 3", memory_id="m1")
    if issubclass(cls, ValidationError):
        return cls("tags.0: a tag is at most 64 characters", [Problem("tags.0", "a tag is at most 64 characters")])
    return cls(f"a {cls.__name__} for the test: do what the message says")


@pytest.fixture(scope="module")
def both(tmp_path_factory, local_embedder):
    with local_and_served(tmp_path_factory.mktemp("errors"), local_embedder) as (store, local, served, _):
        yield store, local, served


def test_every_error_class_has_a_row_of_its_own_and_no_two_rows_share_a_kind():
    named = {w.error for w in WIRE_ERRORS}
    assert set(every_error_class()) == named
    assert len({w.kind for w in WIRE_ERRORS}) == len(WIRE_ERRORS)


@pytest.mark.parametrize("cls", every_error_class(), ids=lambda c: c.__name__)
def test_an_error_raised_under_an_operation_reaches_both_callers_as_the_same_class(both, monkeypatch, cls):
    store, local, served = both
    raised = instance(cls)
    real_get = store.get

    def get(ids=None, *args, **kwargs):
        if ids == [BOOM]:
            raise raised
        return real_get(ids, *args, **kwargs)

    monkeypatch.setattr(store, "get", get)
    for ops in (local, served):
        with pytest.raises(BrainError) as caught:
            ops.memories.get(BOOM)
        assert type(caught.value) is cls, ops
        assert str(caught.value) == str(raised)
        if isinstance(raised, ValidationError):
            assert caught.value.problems == raised.problems


def test_a_class_the_table_does_not_name_travels_as_its_nearest_named_ancestor():
    class Unnamed(errors.StoreLocked):
        pass

    assert wire_of(Unnamed("x")).error is errors.StoreLocked
    assert wire_of(errors.StoreLocked).kind == "store_locked"


def test_the_http_guide_lists_every_kind():
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "http-api.md").read_text()
    missing = [w.kind for w in WIRE_ERRORS if f"`{w.kind}`" not in guide]
    assert missing == []
