"""The memory rules (brain/rules/memories.py) as properties: the merge of versions of a memory, and which
scopes an entity sees; then the store, consolidation and the memory index following them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from brain.features.consolidate import consolidate_memories
from brain.model.errors import ValidationError
from brain.model.schemas import GLOBAL_SCOPE, INACTIVE_STATUSES, STATUSES, DocType, entity_scope, validate_metadata
from brain.rules.memories import (
    created,
    is_inactive,
    is_part,
    may_change,
    may_read,
    merge_duplicate,
    merge_near_duplicates,
    merged_fields,
    readable_scopes,
    same_text,
    search_scopes,
    visible_scopes,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)

times = st.integers(min_value=0, max_value=10**8).map(lambda s: T0 + timedelta(seconds=s))
ids = st.text("abcdef0123456789", min_size=1, max_size=6).map(lambda s: f"doc-{s}")
names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=("Cc", "Cs")),
                min_size=1, max_size=12)


@st.composite
def memories(draw, scope=None):
    """Valid memory metadata, every optional field sometimes present."""
    timestamp = draw(times)
    data = {
        "timestamp": timestamp,
        "importance": draw(st.integers(1, 5)),
        "tags": draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=4)),
        "scope": scope or GLOBAL_SCOPE,
        "source": draw(st.sampled_from(["chat", "system", "import"])),
    }
    if draw(st.booleans()):
        data["created_at"] = timestamp - timedelta(seconds=draw(st.integers(0, 10**7)))
    if draw(st.booleans()):
        data["last_used"] = float(draw(st.integers(0, 2 * 10**9)))
    if draw(st.booleans()):
        data["merged_from"] = draw(st.lists(ids, max_size=3, unique=True))
    if draw(st.booleans()):
        data["conversation_id"] = draw(st.sampled_from(["conv-1", "conv-2"]))
    return validate_metadata(DocType.MEMORY, data)


# ---- merge --------------------------------------------------------------------------------------


@given(memories(), memories())
def test_merging_a_duplicate_is_idempotent(a, b):
    merged = merge_duplicate(a, b)
    assert merge_duplicate(merged, merged) == merged
    assert merge_duplicate(merged, b) == merged  # the same write once more changes nothing


@given(memories())
def test_a_memory_merged_with_itself_is_itself(a):
    assert merge_duplicate(a, a) == a


@given(memories(), memories())
def test_merging_keeps_the_earliest_creation_and_the_united_fields(a, b):
    merged = merge_duplicate(a, b)
    assert created(merged) == min(created(a), created(b))
    assert merged.timestamp == max(a.timestamp, b.timestamp)
    assert merged.importance == max(a.importance, b.importance)
    assert merged.tags[: len(a.tags)] == a.tags and set(merged.tags) == set(a.tags) | set(b.tags)
    used = [m.last_used for m in (a, b) if m.last_used is not None]
    assert merged.last_used == (max(used) if used else None)
    assert set(merged.merged_from or []) == set(a.merged_from or []) | set(b.merged_from or [])
    # fields outside the rule: the newer write's, else the older one's
    assert merged.source == b.source
    assert merged.conversation_id == (b.conversation_id or a.conversation_id)


@given(memories(), memories())
def test_creation_is_recorded_only_once_it_differs_from_the_timestamp(a, b):
    merged = merge_duplicate(a, b)
    if a.created_at is None and b.created_at is None and created(merged) == merged.timestamp:
        assert merged.created_at is None
    else:
        assert merged.created_at == min(created(a), created(b))


@given(memories(), st.dictionaries(ids, memories(), min_size=1, max_size=4))
def test_near_duplicates_keep_the_kept_memory_and_list_every_absorbed_id(kept, absorbed):
    merged = merge_near_duplicates(kept, absorbed)
    everyone = [kept, *absorbed.values()]
    assert created(merged) == min(created(m) for m in everyone)
    assert merged.timestamp == max(m.timestamp for m in everyone)
    assert merged.importance == max(m.importance for m in everyone)
    assert merged.tags[: len(kept.tags)] == kept.tags
    assert set(merged.merged_from) == {i for m in everyone for i in m.merged_from or []} | set(absorbed)
    assert (merged.source, merged.scope, merged.conversation_id) == (kept.source, kept.scope, kept.conversation_id)
    fields = merged_fields(everyone)  # what a dry run reports
    assert (fields["tags"], fields["importance"], fields["timestamp"]) == (merged.tags, merged.importance,
                                                                          merged.timestamp)
    assert fields["created_at"] == created(merged)


def test_a_merge_that_breaks_the_schema_is_refused():
    a = validate_metadata(DocType.MEMORY, {"timestamp": T0, "tags": [f"a{i}" for i in range(60)]})
    b = validate_metadata(DocType.MEMORY, {"timestamp": T0, "tags": [f"b{i}" for i in range(60)]})
    with pytest.raises(ValidationError, match=r"tags: 120 tags given"):
        merge_duplicate(a, b)
    with pytest.raises(ValidationError, match=r"tags: 120 tags given"):
        merge_near_duplicates(a, {"doc-b": b})
    with pytest.raises(ValueError, match="at least one version"):
        merged_fields([])


@given(st.text(min_size=1, max_size=40), st.data())
def test_same_text_ignores_case_and_whitespace_only(text, data):
    spaced = data.draw(st.sampled_from(["  ", "\t", ""])) + text.upper() + " "
    assert same_text(text, spaced) == same_text(text.lower(), spaced.lower())
    assert same_text(text, text) and same_text(f"{text} x", f"{text}  X")
    assert not same_text(f"{text} x", f"{text} y")


# ---- visibility ---------------------------------------------------------------------------------


@given(names, names)
def test_visibility_never_includes_another_entitys_scope(me, other):
    try:
        mine, theirs = entity_scope(me), entity_scope(other)
    except ValueError:
        return  # not entity names (checked elsewhere)
    seen = visible_scopes(me)
    assert seen == {GLOBAL_SCOPE, mine} and readable_scopes(me) == seen and search_scopes(me) == seen
    assert may_read(mine, me) and may_read(GLOBAL_SCOPE, me) and may_change(mine, me)
    assert not may_change(GLOBAL_SCOPE, me)  # a shared memory is the admin's to change
    if other != me:
        assert theirs not in seen and not may_read(theirs, me) and not may_change(theirs, me)


def test_without_an_entity_searches_rank_global_memories_but_reads_are_unrestricted():
    assert visible_scopes(None) == search_scopes(None) == {GLOBAL_SCOPE}
    assert readable_scopes(None) is None and search_scopes("alice", all_scopes=True) is None
    assert may_read("entity:bob", None) and may_change("entity:bob", None) and may_change(GLOBAL_SCOPE, None)
    with pytest.raises(ValidationError, match="entity"):
        visible_scopes(" alice")


@pytest.mark.parametrize("status", STATUSES)
def test_each_status_and_part_of(status):
    assert is_inactive({"status": status}) == (status in INACTIVE_STATUSES)
    assert status in ("active", "deprecated") or is_inactive({"status": status})
    assert not is_inactive({}) and not is_inactive({"status": 7})  # absent or unreadable: active
    assert is_part({"part_of": "doc-1"}) and not is_part({}) and not is_part({"part_of": ""})
    # the old adapter strings mean nothing any more (stores holding them are migrated on open)
    assert not is_part({"xaibo.chunk": 2, "xaibo.kind": "vector"}) and not is_inactive({"pam_status": "archived"})


# ---- the store and consolidation follow the rules -----------------------------------------------

ENTITIES = ["alice", "bob", "Zoë"]


@pytest.fixture(scope="module")
def scoped_store(tmp_path_factory, local_embedder):
    from brain.app.core import open_store
    from brain.config import Settings

    s = open_store(Settings(data_dir=tmp_path_factory.mktemp("memories") / "data"), embedder=local_embedder)
    s.upsert_memory("The office opens at nine")
    for name in ENTITIES:
        s.upsert_memory(f"{name} keeps a diary about the garden", entity=name, importance=5)
    s.upsert_docs([{"text": "alice's retired note about the garden", "type": "memory", "scope": "entity:alice",
                    "status": "archived"}])
    yield s
    s.close()


@pytest.mark.parametrize("entity", [None, *ENTITIES])
def test_every_store_read_shows_an_entity_its_visible_scopes_only(scoped_store, entity):
    seen = visible_scopes(entity)
    hits = scoped_store.retrieve_memories("garden diary", k=20, entity=entity, relevance=False)  # every memory eligible
    assert {h.metadata["scope"] for h in hits} == seen
    assert all(h.metadata.get("status") != "archived" for h in hits)
    if entity is not None:
        got = scoped_store.get(type="memory", entity=entity)
        assert {d.metadata["scope"] for d in got} == seen
        others = [d.id for d in scoped_store.get(type="memory") if d.metadata["scope"] not in seen]
        assert others and scoped_store.get(others, entity=entity) == []
    everything = scoped_store.retrieve_memories("garden", k=20, all_scopes=True, relevance=False)
    assert any(h.metadata.get("status") == "archived" for h in everything)


def test_consolidation_keeps_what_absorbed_memories_had_absorbed(embedded_store):
    v = np.zeros(embedded_store.embedder.dimension, dtype=np.float32)
    v[0] = 1.0
    w = v.copy()
    w[1] = 0.05
    kept, absorbed = embedded_store.upsert_docs([
        {"text": "The user's cat is Miso", "type": "memory", "embedding": v, "importance": 5,
         "timestamp": "2024-01-01T00:00:00+00:00", "merged_from": ["doc-earlier"]},
        {"text": "User has a cat called Miso", "type": "memory", "embedding": w, "importance": 2,
         "timestamp": "2024-01-01T00:00:00+00:00", "merged_from": ["doc-older", "doc-earlier"]},
    ])
    report = consolidate_memories(embedded_store, threshold=0.9)
    assert [(m.kept_id, m.merged_ids) for m in report.merges] == [(kept, [absorbed])]
    meta = embedded_store.get_one(kept).metadata
    assert meta["merged_from"] == ["doc-earlier", "doc-older", absorbed]
    assert "created_at" not in meta  # both written at the same time: the creation is the timestamp
    assert embedded_store.get([absorbed]) == []


@hypothesis_settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(spellings=st.lists(st.sampled_from(["Tea at four", "tea at FOUR", "  Tea  at four ", "TEA AT FOUR"]),
                          min_size=2, max_size=4),
       offsets=st.lists(st.integers(-10**6, 10**6), min_size=4, max_size=4))
def test_the_store_keeps_the_first_text_and_the_earliest_creation(embedded_store, spellings, offsets):
    embedded_store.delete(type="memory")
    stamps = [T0 + timedelta(seconds=o) for o in offsets[: len(spellings)]]
    doc_ids = {embedded_store.upsert_memory(text, timestamp=ts) for text, ts in zip(spellings, stamps)}
    (doc_id,) = doc_ids
    (doc,) = embedded_store.get([doc_id])
    assert doc.text == spellings[0]
    meta = validate_metadata(DocType.MEMORY, {k: v for k, v in doc.metadata.items() if k != "ts_epoch"})
    # (the timestamp need not move: a write that adds nothing but a later time writes nothing)
    assert created(meta) == min(stamps)
