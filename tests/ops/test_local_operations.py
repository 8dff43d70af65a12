"""brain.ops on a store this process opened: the memories by exact scope and by id, the caller's rules fixed
when the operations are opened, and the admin-only operations refused to a bound caller."""

from __future__ import annotations

import pytest

from brain.app.core import Brain
from brain.model.errors import Forbidden, NotFound
from brain.ops import ADMIN, Caller, LocalOperations, Operations


@pytest.fixture
def ops(embedded_store):
    with Brain(embedded_store, start_worker=False) as brain:
        yield LocalOperations(brain)


def test_both_implementations_satisfy_the_protocol(ops):
    from brain.ops import ServedOperations
    from brain.ops.served import ServerLink

    assert isinstance(ops, Operations)
    with ServedOperations(ServerLink("http://127.0.0.1:9")) as served:
        assert isinstance(served, Operations)


def test_add_returns_the_memory_as_stored_and_merges_the_same_text(ops):
    first = ops.memories.add("Ada takes her tea without sugar", scope="entity:ada", tags=["tea"])
    assert first.metadata["scope"] == "entity:ada" and first.metadata["importance"] == 3
    again = ops.memories.add("Ada takes her tea without sugar", entity="ada", importance=5, tags=["drinks"])
    assert again.id == first.id
    assert again.metadata["importance"] == 5 and set(again.metadata["tags"]) == {"tea", "drinks"}


def test_a_scope_filter_is_exact_and_tags_must_all_match(ops):
    ada = ops.memories.add("Ada likes chess", entity="ada", tags=["games", "chess"])
    office = ops.memories.add("The office closes at six", tags=["games"])
    assert [d.id for d in ops.memories.list(scope="entity:ada")] == [ada.id]
    assert [d.id for d in ops.memories.list(tags=["games", "chess"])] == [ada.id]
    assert {d.id for d in ops.memories.list(entity="ada")} == {ada.id, office.id}
    assert [d.id for d in ops.memories.list(entity="bob")] == [office.id]
    assert len(ops.memories.list()) == 2 and len(ops.memories.list(limit=1)) == 1
    with pytest.raises(Exception, match="scope 'entity:ada' is not one entity 'bob' reads"):
        ops.memories.list(entity="bob", scope="entity:ada")


def test_get_refuses_another_types_id_and_another_entitys_memory(ops, embedded_store):
    turn_id, _ = embedded_store.upsert_turn("conv-1", "hi", "hello")
    with pytest.raises(NotFound, match="no memory with id"):
        ops.memories.get(turn_id)
    memory = ops.memories.add("Remember the milk", entity="ada")
    assert ops.memories.get(memory.id).text == "Remember the milk"
    with pytest.raises(NotFound):
        ops.memories.get(memory.id, entity="bob")


def test_delete_is_all_or_none(ops):
    shared = ops.memories.add("Shared fact")
    own = ops.memories.add("Ada's own fact", entity="ada")
    with pytest.raises(Forbidden):
        ops.memories.delete([own.id, shared.id], entity="ada")
    with pytest.raises(NotFound):
        ops.memories.delete([own.id, "doc-missing"])
    assert {d.id for d in ops.memories.list()} == {shared.id, own.id}
    assert ops.memories.delete([own.id, own.id], entity="ada") == [own.id]


def test_a_bound_caller_acts_for_its_entity_only(ops):
    alice = ops.bound_to(Caller("alice"))
    mine = alice.memories.add("Alice is allergic to peanuts", importance=5)
    assert mine.metadata["scope"] == "entity:alice"
    with pytest.raises(Forbidden, match="bound to entity 'alice'"):
        alice.memories.add("Bob likes tea", entity="bob")
    with pytest.raises(Forbidden, match="needs the admin"):
        alice.maintenance.stats()
    with pytest.raises(Forbidden, match="needs the admin"):
        alice.documents.get([mine.id])
    with pytest.raises(Forbidden, match="needs the admin"):
        alice.maintenance.consolidate(dry_run=True)
    # the admin's operations are unchanged by the binding
    assert ops.caller is ADMIN and ops.memories.get(mine.id).id == mine.id


def test_the_history_and_the_context_go_through_the_same_rules(ops):
    old = ops.memories.add("Dave lives in Berlin", entity="dave", importance=4)
    done = ops.memories.supersede(old.id, "Dave lives in Lisbon", entity="dave")
    chain = ops.memories.history(done.new.id, entity="dave")
    assert [d.text for d in chain] == ["Dave lives in Berlin", "Dave lives in Lisbon"]
    with pytest.raises(NotFound):
        ops.memories.history(done.new.id, entity="erin")
    context = ops.conversations.context(None, "Where does Dave live?", entity="dave")
    shown = [item.text for item in [*context.core, *context.memory]]
    assert "Dave lives in Lisbon" in shown and "Dave lives in Berlin" not in shown
