"""brain.app.memory_admin: memories by exact scope and by id, as `brain memory ...` handles them."""

from __future__ import annotations

import pytest

from brain.model.errors import NotFound
from brain.app.memory_admin import MemoryRemoval, add_memory, get_memory, list_memories, remove_memories
from brain.shells.cli.reports import removal_text


def test_add_returns_the_memory_as_stored_and_merges_the_same_text(embedded_store):
    first = add_memory(embedded_store, "Ada takes her tea without sugar", scope="entity:ada", tags=["tea"])
    assert first.metadata["scope"] == "entity:ada" and first.metadata["importance"] == 3
    again = add_memory(embedded_store, "Ada takes her tea without sugar", scope="entity:ada", importance=5,
                       tags=["drinks"])
    assert again.id == first.id
    assert again.metadata["importance"] == 5 and set(again.metadata["tags"]) == {"tea", "drinks"}


def test_a_scope_filter_is_exact_and_tags_must_all_match(embedded_store):
    ada = add_memory(embedded_store, "Ada likes chess", scope="entity:ada", tags=["games", "chess"])
    add_memory(embedded_store, "The office closes at six", tags=["games"])
    assert [d.id for d in list_memories(embedded_store, scope="entity:ada")] == [ada.id]
    assert [d.id for d in list_memories(embedded_store, tags=["games", "chess"])] == [ada.id]
    assert len(list_memories(embedded_store)) == 2
    assert len(list_memories(embedded_store, limit=1)) == 1


def test_get_memory_refuses_another_types_id(embedded_store):
    turn_id, _ = embedded_store.upsert_turn("conv-1", "hi", "hello")
    with pytest.raises(NotFound, match="no memory with id"):
        get_memory(embedded_store, turn_id)
    memory = add_memory(embedded_store, "Remember the milk")
    assert get_memory(embedded_store, memory.id).text == "Remember the milk"


def test_remove_reports_what_it_removed_and_leaves_other_ids_alone(embedded_store):
    turn_id, _ = embedded_store.upsert_turn("conv-1", "hi", "hello")
    keep = add_memory(embedded_store, "Keep me")
    drop = add_memory(embedded_store, "Drop me")
    report = remove_memories(embedded_store, [drop.id, turn_id, drop.id, "doc-missing"])
    assert report == MemoryRemoval(removed=[drop.id], not_found=[turn_id, "doc-missing"])
    assert not report.ok
    assert report.to_dict() == {"removed": [drop.id], "not_found": [turn_id, "doc-missing"]}
    assert removal_text(report) == f"removed {drop.id}"
    assert "doc-missing" in str(report.error())
    assert embedded_store.get([turn_id]) and [d.id for d in list_memories(embedded_store)] == [keep.id]
    assert remove_memories(embedded_store, [keep.id]).ok
