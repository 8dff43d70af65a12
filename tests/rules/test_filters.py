"""Friendly filters -> Chroma ``where``: exact translations, FilterErrors, and a real Chroma accepting them."""

from __future__ import annotations

from datetime import UTC, datetime

import chromadb
import pytest

from brain.model.errors import FilterError, ValidationError
from brain.model.schemas import validate_metadata
from brain.rules.filters import to_chroma_where


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


# --- exact translations -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "where, expected",
    [
        (None, None),
        ({}, None),
        ({"type": "memory"}, {"type": "memory"}),
        ({"importance": 3}, {"importance": 3}),
        ({"pinned": True}, {"pinned": True}),
        ({"type": "memory", "scope": "global"}, {"$and": [{"type": "memory"}, {"scope": "global"}]}),
        (
            {"type": "memory", "scope": "global", "importance": 5},
            {"$and": [{"type": "memory"}, {"scope": "global"}, {"importance": 5}]},
        ),
        ({"type": ["memory", "faq"]}, {"type": {"$in": ["memory", "faq"]}}),
        ({"type": ("memory", "faq")}, {"type": {"$in": ["memory", "faq"]}}),
        ({"importance": [4, 5]}, {"importance": {"$in": [4, 5]}}),
        ({"tags": "food"}, {"tags": {"$contains": "food"}}),
        ({"tags": ["food"]}, {"tags": {"$contains": "food"}}),
        ({"tags": ["food", "likes"]}, {"$and": [{"tags": {"$contains": "food"}}, {"tags": {"$contains": "likes"}}]}),
        ({"tags": {"$not_contains": "food"}}, {"tags": {"$not_contains": "food"}}),
        ({"importance": {"$gte": 4}}, {"importance": {"$gte": 4}}),
        ({"importance": {"$gte": 2, "$lt": 5}}, {"$and": [{"importance": {"$gte": 2}}, {"importance": {"$lt": 5}}]}),
        ({"role": {"$ne": "user"}}, {"role": {"$ne": "user"}}),
        ({"type": {"$nin": ["turn"]}}, {"type": {"$nin": ["turn"]}}),
        (
            {"timestamp": {"$gte": "2026-01-01T00:00:00Z"}},
            {"ts_epoch": {"$gte": epoch("2026-01-01T00:00:00+00:00")}},
        ),
        (
            {"timestamp": {"$gt": "2026-01-01T02:00:00+02:00", "$lte": "2026-01-31T19:00:00-05:00"}},
            {"$and": [
                {"ts_epoch": {"$gt": epoch("2026-01-01T00:00:00+00:00")}},
                {"ts_epoch": {"$lte": epoch("2026-02-01T00:00:00+00:00")}},
            ]},
        ),
        (
            {"timestamp": {"$lt": datetime(2026, 1, 1, tzinfo=UTC)}},
            {"ts_epoch": {"$lt": epoch("2026-01-01T00:00:00+00:00")}},
        ),
        ({"timestamp": "2026-01-01T01:00:00+01:00"}, {"timestamp": "2026-01-01T00:00:00+00:00"}),
        ({"timestamp": {"$eq": "2026-01-01T00:00:00Z"}}, {"timestamp": {"$eq": "2026-01-01T00:00:00+00:00"}}),
        (
            {"$or": [{"type": "faq"}, {"type": "memory", "importance": {"$gte": 4}}]},
            {"$or": [{"type": "faq"}, {"$and": [{"type": "memory"}, {"importance": {"$gte": 4}}]}]},
        ),
        ({"$or": [{"type": "faq"}]}, {"type": "faq"}),
        ({"$and": [{"type": "faq"}, {"scope": "global"}]}, {"$and": [{"type": "faq"}, {"scope": "global"}]}),
        (
            {"scope": "global", "$or": [{"role": "user"}, {"tags": "x"}]},
            {"$and": [{"scope": "global"}, {"$or": [{"role": "user"}, {"tags": {"$contains": "x"}}]}]},
        ),
    ],
)
def test_translation(where, expected):
    assert to_chroma_where(where) == expected


def test_fixed_conditions_are_anded_first_and_none_ones_dropped():
    assert to_chroma_where(None, type="memory", scope=None) == {"type": "memory"}
    assert to_chroma_where({"importance": 5}, type="memory") == {"$and": [{"type": "memory"}, {"importance": 5}]}
    assert to_chroma_where({}, type="turn", conversation_id="conv-1") == {
        "$and": [{"type": "turn"}, {"conversation_id": "conv-1"}]
    }


def test_input_filter_is_not_mutated():
    where = {"tags": ["a", "b"], "timestamp": {"$gt": "2026-01-01T00:00:00Z"}}
    snapshot = {"tags": ["a", "b"], "timestamp": {"$gt": "2026-01-01T00:00:00Z"}}
    to_chroma_where(where)
    assert where == snapshot


# --- filters Chroma cannot express --------------------------------------------------------------


@pytest.mark.parametrize(
    "where, key, rule",
    [
        ({"type": None}, "type", "value must be a string, number or boolean, got None"),
        ({"type": "memory", "scope": None}, "scope", "value must be a string, number or boolean, got None"),
        ({"importance": {"$gt": "3"}}, "importance", "$gt takes a number, got '3'"),
        ({"importance": {"$lte": True}}, "importance", "$lte takes a number, got True"),
        ({"role": {"$gte": "a"}}, "role", "$gte takes a number"),
        ({"timestamp": {"$gt": "yesterday"}}, "timestamp", "must be an ISO 8601 time"),
        ({"timestamp": {"$lt": "2026-01-01T00:00:00"}}, "timestamp", "has no timezone"),
        ({"importance": {"$foo": 3}}, "importance", "unknown operator '$foo'"),
        ({"importance": {"gt": 3}}, "importance", "unknown operator 'gt'"),
        ({"importance": {"$regex": "x"}}, "importance", "unknown operator '$regex'"),
        ({"type": ["memory", 1]}, "type", "$in values must all be of one type"),
        ({"type": {"$in": [True, 1]}}, "type", "$in values must all be of one type"),
        ({"type": {"$nin": ["a", 2.5]}}, "type", "$nin values must all be of one type"),
        ({"type": []}, "type", "$in needs a non-empty list"),
        ({"type": {"$in": []}}, "type", "$in needs a non-empty list"),
        ({"type": {"$in": "memory"}}, "type", "$in needs a non-empty list"),
        ({"type": {"$in": [None]}}, "type", "value must be a string, number or boolean, got None"),
        ({"type": {"$eq": ["memory"]}}, "type", "value must be a string, number or boolean"),
        ({"type": {"$ne": {"a": 1}}}, "type", "value must be a string, number or boolean"),
        ({"type": {}}, "type", "empty operator dict"),
        ({"tags": []}, "tags", "tags filter must be a tag or a non-empty list of tags"),
        ({"tags": ["a", 1]}, "tags", "tags filter must be a tag or a non-empty list of tags"),
        ({"tags": None}, "tags", "tags filter must be a tag or a non-empty list of tags"),
        ({"$where": "1"}, "$where", "unknown key or operator '$where'"),
        ({"$not": {"type": "faq"}}, "$not", "unknown key or operator '$not'"),
        ({"$in": ["a"]}, "$in", "unknown key or operator '$in'"),
        ({"": "x"}, "", "unknown key or operator ''"),
        ({"$or": []}, "$or", "$or needs a non-empty list of filters"),
        ({"$or": {"type": "faq"}}, "$or", "$or needs a non-empty list of filters"),
        ({"$and": "type=faq"}, "$and", "$and needs a non-empty list of filters"),
        ({"$or": [{}]}, "$or", "each item must be a non-empty filter dict"),
        ({"$or": [{"type": "faq"}, "memory"]}, "$or", "each item must be a non-empty filter dict"),
        ({"$or": [{"type": "faq"}, {"role": None}]}, "role", "value must be a string, number or boolean"),
    ],
)
def test_unexpressible_filter_raises_filter_error_naming_the_key(where, key, rule):
    with pytest.raises(FilterError) as info:
        to_chroma_where(where)
    err = info.value
    assert isinstance(err, ValidationError)
    assert str(err).startswith(f"where[{key!r}]: ")
    assert rule in str(err)
    assert err.problems[0]["field"] == f"where.{key}"


@pytest.mark.parametrize("where", ["type=memory", ["type", "memory"], 5, ("a", "b")])
def test_non_dict_where_raises_filter_error(where):
    with pytest.raises(FilterError, match=f"where must be a dict, got {type(where).__name__}"):
        to_chroma_where(where)


def test_bad_fixed_condition_raises_filter_error():
    with pytest.raises(FilterError, match=r"where\['type'\]"):
        to_chroma_where(None, type={"$bogus": 1})


@pytest.mark.parametrize(
    "where, key",
    [
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"timestamp": {"$eq": "yesterday"}}, "timestamp"),
        ({"timestamp": {"$ne": "2026-01-01T00:00:00"}}, "timestamp"),
        ({"created": datetime(2026, 1, 1)}, "created"),
    ],
)
def test_bad_timestamp_equality_raises_filter_error(where, key):
    with pytest.raises(FilterError) as info:
        to_chroma_where(where)
    assert str(info.value).startswith(f"where[{key!r}]")


# --- a real Chroma accepts the translations -----------------------------------------------------


DOCS = {
    "mem-bob": ("memory", {"timestamp": "2026-01-01T00:00:00+00:00", "importance": 5, "tags": ["food", "likes"],
                           "scope": "entity:bob", "source": "chat"}),
    "mem-food": ("memory", {"timestamp": "2026-01-05T12:00:00+02:00", "importance": 2, "tags": ["food"]}),
    "mem-late": ("memory", {"timestamp": "2026-02-01T00:00:00Z", "importance": 4, "score": 2.5}),
    "faq-calc": ("faq", {"timestamp": "2025-12-31T23:00:00-01:00", "topic": "billing", "_specialist_name": "calc"}),
    "turn-1": ("turn", {"timestamp": "2026-01-03T00:00:00+00:00", "conversation_id": "conv-1", "role": "user",
                        "turn_index": 1}),
    "turn-2": ("turn", {"timestamp": "2026-01-03T00:01:00+00:00", "conversation_id": "conv-1", "role": "assistant",
                        "turn_index": 2}),
    "sum-1": ("summary", {"timestamp": "2026-01-04T00:00:00+00:00", "conversation_id": "conv-1",
                          "turn_range": "1-2", "summary_index": 1}),
}


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    client = chromadb.PersistentClient(path=str(tmp_path_factory.mktemp("filters-chroma")))
    col = client.create_collection(
        "filters-test", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    ids = list(DOCS)
    metadatas = [validate_metadata(t, m).to_chroma() for t, m in DOCS.values()]
    # the stored metadata really has list-valued tags and numeric ts_epoch
    assert metadatas[0]["tags"] == ["food", "likes"]
    assert all(isinstance(m["ts_epoch"], float) for m in metadatas)
    col.add(
        ids=ids,
        embeddings=[[1.0, 0.1 * i, 0.0, 0.5] for i in range(len(ids))],
        metadatas=metadatas,
        documents=[f"document {i}" for i in ids],
    )
    return col


def ids_for(col, where) -> set[str]:
    return set(col.get(where=to_chroma_where(where))["ids"])


ALL = set(DOCS)


@pytest.mark.parametrize(
    "where, expected",
    [
        ({"type": "memory"}, {"mem-bob", "mem-food", "mem-late"}),
        ({"type": "memory", "scope": "global"}, {"mem-food", "mem-late"}),
        ({"type": ["faq", "summary"]}, {"faq-calc", "sum-1"}),
        ({"tags": "food"}, {"mem-bob", "mem-food"}),
        ({"tags": ["food", "likes"]}, {"mem-bob"}),
        ({"tags": ["food", "nothing"]}, set()),
        ({"tags": {"$not_contains": "likes"}}, ALL - {"mem-bob"}),
        ({"importance": {"$gte": 4}}, {"mem-bob", "mem-late"}),
        ({"importance": {"$gt": 4.5}}, {"mem-bob"}),
        ({"importance": [2, 4]}, {"mem-food", "mem-late"}),
        ({"score": {"$gt": 1}}, {"mem-late"}),
        ({"timestamp": {"$gte": "2026-01-01T00:00:00Z", "$lt": "2026-01-05T12:00:00+02:00"}},
         {"mem-bob", "faq-calc", "turn-1", "turn-2", "sum-1"}),
        ({"timestamp": {"$gt": "2026-01-01T00:00:00+00:00"}}, {"mem-food", "mem-late", "turn-1", "turn-2", "sum-1"}),
        ({"timestamp": {"$lt": datetime(2026, 1, 3, 0, 0, 30, tzinfo=UTC)}},
         {"mem-bob", "faq-calc", "turn-1"}),
        ({"timestamp": "2026-01-01T01:00:00+01:00"}, {"mem-bob", "faq-calc"}),
        ({"timestamp": {"$ne": "2026-01-01T00:00:00Z"}}, ALL - {"mem-bob", "faq-calc"}),
        ({"$or": [{"type": "faq"}, {"importance": {"$lte": 2}}]}, {"faq-calc", "mem-food"}),
        ({"$or": [{"role": "assistant"}, {"type": "memory", "tags": "likes"}]}, {"turn-2", "mem-bob"}),
        ({"conversation_id": "conv-1", "type": {"$ne": "summary"}}, {"turn-1", "turn-2"}),
        ({"conversation_id": "conv-1", "turn_index": {"$gte": 2}}, {"turn-2"}),
        ({"_specialist_name": "calc"}, {"faq-calc"}),
        ({"entity": "bob"}, {"mem-bob"}),
        ({"source": "chat"}, {"mem-bob"}),
        ({"type": {"$nin": ["memory", "turn"]}}, {"faq-calc", "sum-1"}),
        ({"role": "user", "$or": [{"turn_index": 1}, {"turn_index": 3}]}, {"turn-1"}),
    ],
)
def test_real_chroma_returns_expected_ids(collection, where, expected):
    assert ids_for(collection, where) == expected


def test_real_chroma_fixed_conditions(collection):
    where = to_chroma_where({"tags": "food"}, type="memory", scope="global")
    assert set(collection.get(where=where)["ids"]) == {"mem-food"}


@pytest.mark.parametrize("where", [{"score": {"$in": [1, 2.5]}}, {"importance": [5, 4.0]}])
def test_int_float_mixed_list_is_filter_error_or_accepted_by_chroma(collection, where):
    try:
        translated = to_chroma_where(where)
    except FilterError:
        return
    collection.get(where=translated)


@pytest.mark.parametrize(
    "where",
    [{"timestamp": ["2026-01-01T01:00:00+01:00"]}, {"timestamp": {"$in": ["2026-01-01T00:00:00Z"]}}],
)
def test_timestamp_membership_is_normalised(collection, where):
    assert ids_for(collection, where) == {"mem-bob", "faq-calc"}
