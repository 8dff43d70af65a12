"""Each operation is written once, as a method of its noun's class in brain.ops.local; the served client is
derived from those classes, so both offer the same operations with the same parameters and a caller never
learns which one it holds."""

from __future__ import annotations

import inspect

import pytest

from brain.access.policy import ADMIN
from brain.ops import local, protocol, served
from brain.ops.calls import operations_of


def public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_")
    }


def parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values() if p.name != "self"]


class _NoLink:
    """Building the served nouns sends nothing."""


@pytest.fixture(scope="module")
def served_ops():
    return served.ServedOperations(_NoLink(), ADMIN)  # type: ignore[arg-type]


@pytest.mark.parametrize("noun", local.NOUNS)
def test_every_public_method_of_a_noun_is_an_operation_or_has_a_served_body_of_its_own(noun):
    cls = local.NOUNS[noun]
    own = {name for name in vars(served._OWN.get(noun, served._Noun)) if not name.startswith("_")}
    unmarked = set(public(cls)) - set(operations_of(cls)) - own
    assert not unmarked, f"{cls.__name__}: mark these @operation, or give the served client a body: {unmarked}"


@pytest.mark.parametrize("noun", local.NOUNS)
def test_the_served_noun_has_each_operation_with_its_parameters(noun, served_ops):
    offered = getattr(served_ops, noun)
    for name, signature in public(local.NOUNS[noun]).items():
        method = getattr(offered, name)
        assert parameters(inspect.signature(method)) == parameters(signature), f"{noun}.{name}"


def test_the_operations_name_every_noun():
    nouns = {name for name, member in vars(protocol.Operations).items() if isinstance(member, property)}
    assert nouns == set(local.NOUNS)
