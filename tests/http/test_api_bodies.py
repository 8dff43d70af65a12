"""A write route hands its body to its operation as keyword arguments (``_Body.arguments``): every field of the
body is a parameter of that operation, so a field added to one and not the other fails here, not as a 500."""

from __future__ import annotations

import inspect

import pytest

from brain.ops.local import LocalConversations, LocalMemories
from brain.shells.api.models import ExchangeRequest, MemoryCreate, MemoryPatch, MemorySupersede

ROUTES = [
    (MemoryCreate, LocalMemories.add),
    (MemoryPatch, LocalMemories.update),
    (MemorySupersede, LocalMemories.supersede),
    (ExchangeRequest, LocalConversations.record),
]


@pytest.mark.parametrize(("body", "operation"), ROUTES, ids=lambda x: getattr(x, "__qualname__", ""))
def test_each_field_of_a_body_is_a_parameter_of_its_operation(body, operation):
    parameters = inspect.signature(operation).parameters
    by_keyword = {n for n, p in parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    assert set(body.model_fields) <= by_keyword - {"self"}


def test_the_arguments_are_the_fields_as_given_with_their_defaults():
    body = MemoryPatch.model_validate({"text": "Alice now lives in Lyon", "tags": ["home"]})
    assert body.arguments() == {
        "text": "Alice now lives in Lyon",
        "importance": None,
        "tags": ["home"],
        "metadata": None,
        "replace_metadata": False,
        "status": None,
    }
