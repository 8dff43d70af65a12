"""The two implementations of brain.ops.protocol.Operations offer the same operations with the same
parameters, noun by noun, so a caller never learns which one it holds."""

from __future__ import annotations

import inspect

import pytest

from brain.ops import local, protocol, served

NOUNS = {
    "memories": (protocol.MemoryOperations, local.LocalMemories, served.ServedMemories),
    "conversations": (protocol.ConversationOperations, local.LocalConversations, served.ServedConversations),
    "knowledge": (protocol.KnowledgeOperations, local.LocalKnowledge, served.ServedKnowledge),
    "documents": (protocol.DocumentOperations, local.LocalDocuments, served.ServedDocuments),
    "entities": (protocol.EntityOperations, local.LocalEntities, served.ServedEntities),
    "maintenance": (protocol.MaintenanceOperations, local.LocalMaintenance, served.ServedMaintenance),
    "specialists": (protocol.SpecialistOperations, local.LocalSpecialists, served.ServedSpecialists),
}


def operations(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_")
    }


def parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("noun", NOUNS)
def test_each_noun_has_the_protocols_operations_with_its_parameters(noun):
    declared, *implementations = NOUNS[noun]
    wanted = operations(declared)
    assert wanted, noun
    for implementation in implementations:
        offered = operations(implementation)
        assert set(wanted) <= set(offered), (implementation.__name__, set(wanted) - set(offered))
        for name, signature in wanted.items():
            assert parameters(offered[name]) == parameters(signature), f"{implementation.__name__}.{name}"


def test_the_operations_name_every_noun():
    nouns = {name for name, member in vars(protocol.Operations).items() if isinstance(member, property)}
    assert nouns == set(NOUNS)
