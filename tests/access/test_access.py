"""brain.access.policy: the caller rules as a library, without HTTP."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.access.policy import ADMIN, ENTITY_PATTERN, Access, Caller, may_change, may_read, may_use_conversation
from brain.app.core import Brain
from brain.features.chat import ChatMemory
from brain.model.errors import Forbidden, NotFound, ValidationError
from brain.model.schemas import valid_name as check_entity_name
from brain.model.schemas.values import canonical_name
from brain.ops.local import LocalOperations
from brain.providers.summarizers import ExtractiveSummarizer


@given(st.text(max_size=140) | st.sampled_from(["", " a", "a ", "a\x01b", "Mary Ann", "x" * 128, "x" * 129]))
def test_the_published_entity_pattern_is_the_rule_the_library_enforces(name):
    try:
        check_entity_name(name)
        valid = True
    except ValidationError:
        valid = False
    # the pattern is the shape a JSON Schema can say; the library refuses more (a scope prefix, a path, a name
    # whose canonical form breaks the shape), never less
    assert not valid or re.fullmatch(ENTITY_PATTERN, name) is not None
    if re.fullmatch(ENTITY_PATTERN, name) and "entity:" not in name.casefold() and not {"/", "\\", "."} & set(name) \
            and re.fullmatch(ENTITY_PATTERN, canonical_name(name)):
        assert valid


def test_an_empty_entity_is_named_as_empty():
    with pytest.raises(ValidationError, match="entity is empty"):
        check_entity_name("")


def test_a_bound_caller_always_acts_as_its_entity():
    alice = Caller("alice")
    assert alice.acting_as(None) == "alice" and alice.acting_as("alice") == "alice"
    with pytest.raises(Forbidden, match="bound to entity 'alice'"):
        alice.acting_as("bob")
    assert ADMIN.acting_as(None) is None and ADMIN.acting_as("bob") == "bob"
    with pytest.raises(ValidationError):
        ADMIN.acting_as("")


def test_scope_rules():
    assert may_read("global", "alice") and may_read("entity:alice", "alice") and not may_read("entity:bob", "alice")
    assert may_read("entity:bob", None)
    assert may_change("entity:alice", "alice") and not may_change("global", "alice")
    assert not may_change("entity:bob", "alice") and may_change("global", None)
    assert may_use_conversation({"entity:alice"}, "alice")
    assert not may_use_conversation({"entity:alice", "entity:bob"}, "alice")
    assert not may_use_conversation({"global"}, "alice") and may_use_conversation({"global"}, None)
    assert not may_use_conversation(set(), None)


def test_access_over_the_library(embedded_store):
    with ChatMemory(embedded_store, summarizer=ExtractiveSummarizer(), start_worker=False) as chat:
        opened = Brain(embedded_store, chat=chat)
        alice = LocalOperations(opened, Caller("alice"))
        bob = LocalOperations(opened, Caller("bob"))
        mine = alice.memories.add("Alice likes tea")
        assert mine.metadata["scope"] == "entity:alice"
        with pytest.raises(NotFound):
            bob.memories.get(mine.id)
        with pytest.raises(NotFound):
            bob.memories.delete([mine.id])
        exchange = alice.conversations.record(None, "hello", "hi Alice")
        with pytest.raises(NotFound):
            bob.conversations.turns(exchange.conversation_id)
        with pytest.raises(NotFound):
            bob.conversations.record(exchange.conversation_id, "I am Alice", "hello")
        assert len(alice.conversations.turns(exchange.conversation_id)) == 2
        with pytest.raises(ValidationError, match="metadata.scope"):
            alice.memories.update(mine.id, metadata={"scope": "global"})
        with pytest.raises(Forbidden):
            Access(embedded_store, Caller("alice")).require_unrestricted("writing documents")
        Access(embedded_store).require_unrestricted("writing documents")
