"""Metadata models: validation rules, error messages and the flat dict stored in Chroma."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import chromadb
import pytest

from brain.model.errors import BrainError, ValidationError
from brain.model.schemas import (
    DOC_TYPES,
    MAX_KEY_LENGTH,
    MAX_LIST_ITEM_LENGTH,
    MAX_LIST_ITEMS,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_KEYS,
    MAX_STRING_LENGTH,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    DocType,
    FAQMetadata,
    MemoryMetadata,
    PersonaMetadata,
    SummaryMetadata,
    TurnMetadata,
    from_chroma,
    get_all_schemas,
    schema_info,
    validate_metadata,
)

TS = "2026-01-02T03:04:05+02:00"
TS_UTC = "2026-01-02T01:04:05+00:00"
TS_EPOCH = datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC).timestamp()

MINIMAL = {
    "persona": {"timestamp": TS, "version": "v1"},
    "faq": {"timestamp": TS},
    "memory": {"timestamp": TS},
    "turn": {"timestamp": TS, "conversation_id": "conv-1", "role": "user"},
    "summary": {"timestamp": TS, "conversation_id": "conv-1"},
}


def invalid(doc_type, meta) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        validate_metadata(doc_type, meta)
    return info.value


# --- the stored dict, type by type ------------------------------------------------------------


def test_doc_types_are_exactly_the_five_of_the_spec():
    assert DOC_TYPES == ("persona", "faq", "memory", "turn", "summary")


def test_memory_minimal_to_chroma_exact():
    assert validate_metadata("memory", {"timestamp": TS}).to_chroma() == {
        "type": "memory",
        "timestamp": TS_UTC,
        "ts_epoch": TS_EPOCH,
        "source": "system",
        "scope": "global",
        "importance": 3,
    }


def test_memory_full_to_chroma_exact():
    meta = validate_metadata(
        "memory",
        {
            "timestamp": TS,
            "source": "chat",
            "scope": "entity:ann lee",
            "importance": 5,
            "tags": ["food", "likes"],
            "conversation_id": "conv-42",
        },
    )
    assert isinstance(meta, MemoryMetadata)
    assert meta.to_chroma() == {
        "type": "memory",
        "timestamp": TS_UTC,
        "ts_epoch": TS_EPOCH,
        "source": "chat",
        "scope": "entity:ann lee",
        "importance": 5,
        "tags": ["food", "likes"],
        "entity": "ann lee",
        "conversation_id": "conv-42",
    }


def test_persona_to_chroma_exact():
    meta = validate_metadata("persona", {"timestamp": TS, "version": "2.1", "topic": "tone", "source": "kb"})
    assert isinstance(meta, PersonaMetadata)
    assert meta.to_chroma() == {
        "type": "persona",
        "timestamp": TS_UTC,
        "ts_epoch": TS_EPOCH,
        "source": "kb",
        "scope": "global",
        "version": "2.1",
        "topic": "tone",
    }


def test_persona_topic_is_optional_and_absent_when_not_given():
    stored = validate_metadata("persona", {"timestamp": TS, "version": "1"}).to_chroma()
    assert "topic" not in stored
    assert stored["version"] == "1"


def test_faq_to_chroma_uses_underscore_keys_and_default_version():
    meta = validate_metadata("faq", {"timestamp": TS, "topic": "billing", "_specialist_name": "calculator"})
    assert isinstance(meta, FAQMetadata)
    assert meta.to_chroma() == {
        "type": "faq",
        "timestamp": TS_UTC,
        "ts_epoch": TS_EPOCH,
        "source": "system",
        "scope": "global",
        "topic": "billing",
        "_specialist_name": "calculator",
        "_version": "auto",
    }


def test_turn_to_chroma_exact():
    meta = validate_metadata(
        "turn", {"timestamp": TS, "conversation_id": "conv-7", "role": "assistant", "turn_index": 3, "source": "chat"}
    )
    assert isinstance(meta, TurnMetadata)
    assert meta.to_chroma() == {
        "type": "turn",
        "timestamp": TS_UTC,
        "ts_epoch": TS_EPOCH,
        "source": "chat",
        "scope": "global",
        "conversation_id": "conv-7",
        "role": "assistant",
        "turn_index": 3,
    }


def test_summary_to_chroma_exact():
    meta = validate_metadata(
        "summary", {"timestamp": TS, "conversation_id": "conv-7", "turn_range": "1-8", "summary_index": 1}
    )
    assert isinstance(meta, SummaryMetadata)
    assert meta.to_chroma() == {
        "type": "summary",
        "timestamp": TS_UTC,
        "ts_epoch": TS_EPOCH,
        "source": "system",
        "scope": "global",
        "conversation_id": "conv-7",
        "turn_range": "1-8",
        "summary_index": 1,
    }


@pytest.mark.parametrize("doc_type", DOC_TYPES)
def test_stored_values_are_plain_python_types(doc_type):
    stored = validate_metadata(doc_type, MINIMAL[doc_type]).to_chroma()
    assert type(stored["type"]) is str and stored["type"] == doc_type
    assert type(stored["source"]) is str
    assert type(stored["timestamp"]) is str
    assert type(stored["ts_epoch"]) is float


def test_doc_type_enum_and_matching_type_key_are_accepted():
    assert validate_metadata(DocType.MEMORY, {"timestamp": TS}).to_chroma()["type"] == "memory"
    assert validate_metadata("memory", {"timestamp": TS, "type": "memory"}).to_chroma()["type"] == "memory"


def test_type_key_that_contradicts_doc_type_is_rejected():
    err = invalid("memory", {"timestamp": TS, "type": "faq"})
    assert "type" in str(err) and "'faq'" in str(err) and "'memory'" in str(err)
    assert err.problems[0]["field"] == "type"


@pytest.mark.parametrize("meta", [[1], "timestamp=now", 5])
def test_non_mapping_metadata_is_rejected(meta):
    err = invalid("memory", meta)
    assert "metadata must be a mapping" in str(err)


# --- timestamps -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, stored",
    [
        ("2026-01-02T01:04:05Z", "2026-01-02T01:04:05+00:00"),
        ("2026-01-02T01:04:05+00:00", "2026-01-02T01:04:05+00:00"),
        ("2026-01-02T03:04:05+02:00", "2026-01-02T01:04:05+00:00"),
        ("2026-01-01T20:04:05-05:00", "2026-01-02T01:04:05+00:00"),
        ("2026-01-02T06:34:05.250+05:30", "2026-01-02T01:04:05.250000+00:00"),
        (datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC), "2026-01-02T01:04:05+00:00"),
        (datetime(2026, 1, 1, 17, 4, 5, tzinfo=timezone(timedelta(hours=-8))), "2026-01-02T01:04:05+00:00"),
        (0, "1970-01-01T00:00:00+00:00"),
    ],
)
def test_timestamp_is_normalised_to_utc_and_ts_epoch_matches(given, stored):
    out = validate_metadata("memory", {"timestamp": given}).to_chroma()
    assert out["timestamp"] == stored
    assert out["timestamp"].endswith("+00:00")
    assert out["ts_epoch"] == datetime.fromisoformat(stored).timestamp()


@pytest.mark.parametrize(
    "given, rule",
    [
        ("2026-01-02T03:04:05", "has no timezone"),
        ("2026-01-02", "has no timezone"),
        (datetime(2026, 1, 2, 3, 4, 5), "has no timezone"),
        ("not a time", "must be an ISO 8601 time"),
        ("", "must be an ISO 8601 time"),
        ("02/01/2026 03:04", "must be an ISO 8601 time"),
        (True, "must be an ISO 8601 time"),
        (None, "must be an ISO 8601 time"),
        ([2026, 1, 2], "must be an ISO 8601 time"),
    ],
)
def test_naive_or_unparsable_timestamp_is_rejected(given, rule):
    err = invalid("memory", {"timestamp": given})
    assert str(err).startswith("timestamp ")
    assert rule in str(err)
    assert err.problems == [{"item": None, "field": "timestamp", "message": str(err)}]


# --- required fields, unknown types -----------------------------------------------------------


@pytest.mark.parametrize(
    "doc_type, meta, missing",
    [
        ("memory", {}, ["timestamp"]),
        ("faq", {"_specialist_name": "x"}, ["timestamp"]),
        ("persona", {"timestamp": TS}, ["version"]),
        ("turn", {"timestamp": TS}, ["conversation_id", "role"]),
        ("turn", {"timestamp": TS, "conversation_id": "conv-1"}, ["role"]),
        ("turn", {"timestamp": TS, "role": "user"}, ["conversation_id"]),
        ("summary", {"timestamp": TS, "turn_range": "1-2"}, ["conversation_id"]),
    ],
)
def test_missing_required_field_is_named(doc_type, meta, missing):
    err = invalid(doc_type, meta)
    assert [p["field"] for p in err.problems] == missing
    for field in missing:
        assert f"{field} is required" in str(err)


def test_none_metadata_means_empty_and_reports_missing_timestamp():
    err = invalid("memory", None)
    assert str(err) == "timestamp is required"


@pytest.mark.parametrize("doc_type", ["bogus", "Memory", "memories", "", None, 3, ["memory"]])
def test_unknown_document_type_is_rejected(doc_type):
    err = invalid(doc_type, {"timestamp": TS})
    assert f"unknown document type {doc_type!r}" in str(err)
    assert "persona, faq, memory, turn, summary" in str(err)
    assert err.problems[0]["field"] == "type"


def test_validation_error_is_a_brain_error_and_a_value_error():
    err = invalid("memory", {"timestamp": TS, "importance": 9})
    assert isinstance(err, BrainError) and isinstance(err, ValueError)


# --- source and scope -------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["chat", "kb", "system", "import"])
def test_every_source_is_accepted(source):
    assert validate_metadata("memory", {"timestamp": TS, "source": source}).to_chroma()["source"] == source


@pytest.mark.parametrize("source", ["web", "Chat", "", None, 1])
def test_unknown_source_is_rejected(source):
    err = invalid("memory", {"timestamp": TS, "source": source})
    assert "source must be one of chat, kb, system, import" in str(err)
    assert err.problems[0]["field"] == "source"


@pytest.mark.parametrize(
    "scope, entity",
    [("global", None), ("entity:bob", "bob"), ("entity:ann lee", "ann lee"), ("entity:x", "x"), ("entity:a:b", "a:b")],
)
def test_valid_scopes_and_derived_entity(scope, entity):
    meta = validate_metadata("memory", {"timestamp": TS, "scope": scope})
    stored = meta.to_chroma()
    assert stored["scope"] == scope
    assert meta.entity == entity
    assert stored.get("entity") == entity


@pytest.mark.parametrize(
    "scope",
    [
        "user:x",
        "entity:",
        "entity: padded ",
        "entity: x",
        "entity:x ",
        "Global",
        "GLOBAL",
        "",
        "entity",
        "entity:a\tb",
        " global",
        None,
        5,
    ],
)
def test_malformed_scope_is_rejected(scope):
    err = invalid("memory", {"timestamp": TS, "scope": scope})
    assert "scope must be 'global' or 'entity:<name>'" in str(err)
    assert repr(scope) in str(err)
    assert err.problems[0]["field"] == "scope"


@pytest.mark.parametrize("doc_type", ["persona", "faq", "turn", "summary"])
def test_scope_is_validated_for_every_type(doc_type):
    err = invalid(doc_type, {**MINIMAL[doc_type], "scope": "user:x"})
    assert err.problems[0]["field"] == "scope"


@pytest.mark.parametrize(
    "doc_type, meta, field",
    [
        ("memory", {"timestamp": TS, "scope": "entity:bob\n"}, "scope"),
        ("memory", {"timestamp": TS, "conversation_id": "conv-1\n"}, "conversation_id"),
        ("summary", {"timestamp": TS, "conversation_id": "conv-1", "turn_range": "1-8\n"}, "turn_range"),
    ],
)
def test_trailing_newline_is_rejected(doc_type, meta, field):
    err = invalid(doc_type, meta)
    assert err.problems[0]["field"] == field


# --- memory -----------------------------------------------------------------------------------


@pytest.mark.parametrize("given, stored", [(1, 1), (5, 5), (2.0, 2)])
def test_importance_accepted(given, stored):
    out = validate_metadata("memory", {"timestamp": TS, "importance": given}).to_chroma()
    assert out["importance"] == stored and type(out["importance"]) is int


@pytest.mark.parametrize(
    "given, message",
    [
        (0, "importance must be between 1 and 5, got 0"),
        (6, "importance must be between 1 and 5, got 6"),
        (-1, "importance must be between 1 and 5, got -1"),
        ("high", "importance must be an integer between 1 and 5, got 'high'"),
        ("5", "importance must be an integer between 1 and 5, got '5'"),
        (3.5, "importance must be an integer between 1 and 5, got 3.5"),
        (True, "importance must be an integer between 1 and 5, got True"),
        (False, "importance must be an integer between 1 and 5, got False"),
        (None, "importance must be an integer between 1 and 5, got None"),
        ([3], "importance must be an integer between 1 and 5, got [3]"),
        (float("nan"), "importance must be an integer between 1 and 5, got nan"),
    ],
)
def test_bad_importance_is_rejected_with_field_and_rule(given, message):
    err = invalid("memory", {"timestamp": TS, "importance": given})
    assert str(err) == message
    assert err.problems == [{"item": None, "field": "importance", "message": message}]


def test_tags_are_stripped_and_deduplicated_in_order():
    out = validate_metadata("memory", {"timestamp": TS, "tags": [" food ", "likes", "food", ""]}).to_chroma()
    assert out["tags"] == ["food", "likes"]


@pytest.mark.parametrize("tags", [[], None, ["", "  "]])
def test_empty_tags_are_not_stored_and_read_back_as_empty_list(tags):
    out = validate_metadata("memory", {"timestamp": TS, "tags": tags}).to_chroma()
    assert "tags" not in out
    assert from_chroma(out)["tags"] == []


@pytest.mark.parametrize("tags", ["food", ["food", 1], [None], [["a"]], {"a": 1}, 5, [b"x"]])
def test_non_string_tags_are_rejected(tags):
    err = invalid("memory", {"timestamp": TS, "tags": tags})
    assert str(err).startswith("tags must be a list of strings")
    assert err.problems[0]["field"] == "tags"


def test_entity_alone_is_the_scope():
    out = validate_metadata("memory", {"timestamp": TS, "entity": "bob"}).to_chroma()
    assert out["entity"] == "bob" and out["scope"] == "entity:bob"


def test_a_global_memory_has_no_entity():
    err = invalid("memory", {"timestamp": TS, "scope": "global", "entity": "bob"})
    assert str(err) == (
        "entity 'bob' and scope 'global' disagree: a memory about 'bob' is stored in scope "
        "'entity:bob'; give only the entity, or only the scope"
    )
    assert err.problems[0]["field"] == "entity"
    assert "entity" not in validate_metadata("memory", {"timestamp": TS}).to_chroma()


@pytest.mark.parametrize(
    "entity, message",
    [("", "entity is empty"), ("  ", "entity is empty"), (7, "must be an entity name"), ("a\x1bb", "U+001B")],
)
def test_bad_entity_is_named(entity, message):
    err = invalid("memory", {"timestamp": TS, "entity": entity})
    assert message in str(err) and err.problems[0]["field"] == "entity"


def test_entity_equal_to_scope_is_accepted():
    out = validate_metadata("memory", {"timestamp": TS, "scope": "entity:bob", "entity": "bob"}).to_chroma()
    assert out["entity"] == "bob"


def test_entity_contradicting_scope_is_rejected():
    err = invalid("memory", {"timestamp": TS, "scope": "entity:bob", "entity": "alice"})
    assert "entity 'alice' and scope 'entity:bob' disagree" in str(err)


@pytest.mark.parametrize("conv", ["c1", "conv-", "conv_1", "conv-!x", "", 7])
def test_memory_conversation_id_must_look_like_conv(conv):
    err = invalid("memory", {"timestamp": TS, "conversation_id": conv})
    assert "conversation_id must look like 'conv-<id>'" in str(err)
    assert err.problems[0]["field"] == "conversation_id"


def test_from_chroma_keeps_stored_tags():
    stored = validate_metadata("memory", {"timestamp": TS, "tags": ["x"]}).to_chroma()
    assert from_chroma(stored)["tags"] == ["x"]
    assert "tags" not in from_chroma({"type": "faq"})


# --- persona, faq -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "version, rule",
    [("", "version must be a non-empty string"), ("   ", "version must be a non-empty string"), (1, "valid string")],
)
def test_persona_bad_version(version, rule):
    err = invalid("persona", {"timestamp": TS, "version": version})
    assert rule in str(err)
    assert err.problems[0]["field"] == "version"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"_specialist_name": "calc", "_version": "v2"},
        {"specialist_name": "calc", "version": "v2"},
        {"_specialist_name": "calc", "version": "v2"},
        {"specialist_name": "calc", "_version": "v2"},
    ],
)
def test_faq_accepts_underscore_and_plain_keyword_arguments(kwargs):
    direct = FAQMetadata(type="faq", timestamp=TS, **kwargs)
    validated = validate_metadata("faq", {"timestamp": TS, **kwargs})
    for meta in (direct, validated):
        assert meta.specialist_name == "calc"
        assert meta.version == "v2"
        stored = meta.to_chroma()
        assert stored["_specialist_name"] == "calc"
        assert stored["_version"] == "v2"
        assert "specialist_name" not in stored and "version" not in stored


def test_faq_without_specialist_has_no_specialist_key():
    stored = validate_metadata("faq", {"timestamp": TS}).to_chroma()
    assert "_specialist_name" not in stored
    assert stored["_version"] == "auto"


# --- turn, summary ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", "User", "", None, "tool"])
def test_turn_role_must_be_user_or_assistant(role):
    err = invalid("turn", {"timestamp": TS, "conversation_id": "conv-1", "role": role})
    assert f"role must be 'user' or 'assistant', got {role!r}" in str(err)
    assert err.problems[0]["field"] == "role"


@pytest.mark.parametrize(
    "index, rule",
    [
        (0, "greater than or equal to 1"),
        (-3, "greater than or equal to 1"),
        ("abc", "valid integer"),
        (1.5, "valid integer"),
    ],
)
def test_turn_index_must_be_int_at_least_1(index, rule):
    err = invalid("turn", {"timestamp": TS, "conversation_id": "conv-1", "role": "user", "turn_index": index})
    assert str(err).startswith("turn_index")
    assert rule in str(err)
    assert err.problems[0]["field"] == "turn_index"


def test_turn_index_is_optional():
    assert "turn_index" not in validate_metadata("turn", MINIMAL["turn"]).to_chroma()


def test_turn_conversation_id_is_checked():
    err = invalid("turn", {"timestamp": TS, "conversation_id": "chat-1", "role": "user"})
    assert "conversation_id must look like 'conv-<id>'" in str(err)


@pytest.mark.parametrize("turn_range", ["1-1", "1-8", "3-12", "10-10"])
def test_summary_valid_turn_range(turn_range):
    stored = validate_metadata("summary", {**MINIMAL["summary"], "turn_range": turn_range}).to_chroma()
    assert stored["turn_range"] == turn_range


@pytest.mark.parametrize(
    "turn_range, rule",
    [
        ("5-3", "turn_range must have 1 <= start <= end, got '5-3'"),
        ("0-4", "turn_range must have 1 <= start <= end, got '0-4'"),
        ("1..8", "turn_range must look like '<start>-<end>'"),
        ("a-b", "turn_range must look like '<start>-<end>'"),
        ("1-", "turn_range must look like '<start>-<end>'"),
        (" 1-8", "turn_range must look like '<start>-<end>'"),
        (18, "turn_range must look like '<start>-<end>'"),
    ],
)
def test_summary_bad_turn_range(turn_range, rule):
    err = invalid("summary", {**MINIMAL["summary"], "turn_range": turn_range})
    assert rule in str(err)
    assert err.problems[0]["field"] == "turn_range"


@pytest.mark.parametrize("index", [0, -1])
def test_summary_index_must_be_at_least_1(index):
    err = invalid("summary", {**MINIMAL["summary"], "summary_index": index})
    assert str(err) == f"summary_index: input should be greater than or equal to 1, got {index}"


# --- extra metadata ---------------------------------------------------------------------------


def test_storable_extras_are_kept_exactly():
    extras = {
        "lang": "en",
        "count": 7,
        "score": 0.25,
        "pinned": True,
        "ids": [1, 2],
        "names": ["a", "b"],
        "ratios": [0.5, 1.5],
        "flags": [True, False],
    }
    stored = validate_metadata("memory", {"timestamp": TS, **extras}).to_chroma()
    for key, value in extras.items():
        assert stored[key] == value and type(stored[key]) is type(value)


@pytest.mark.parametrize(
    "value",
    [{"a": 1}, [1, None], [1, "a"], [True, 1], [1, 2.5], [], None, [[1]], b"bytes", object()],
    ids=["dict", "none-in-list", "mixed", "bool-int", "int-float", "empty", "none", "nested-list", "bytes", "object"],
)
def test_unstorable_extras_are_rejected_naming_the_key(value):
    err = invalid("memory", {"timestamp": TS, "my_extra": value})
    assert "metadata field 'my_extra' must be a string, number, boolean or a non-empty list" in str(err)


def test_reserved_key_cannot_be_overridden_by_extra():
    err = invalid("memory", {"timestamp": TS, "ts_epoch": 5})
    assert "metadata field 'ts_epoch' is reserved" in str(err)


@pytest.mark.parametrize("doc_type", ["persona", "faq", "turn", "summary"])
def test_extras_are_checked_for_every_type(doc_type):
    err = invalid(doc_type, {**MINIMAL[doc_type], "nested": {"a": 1}})
    assert "'nested'" in str(err)


@pytest.fixture
def chroma_collection(tmp_path):
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    return client.create_collection(
        "schemas-test", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )


def test_real_chroma_stores_to_chroma_output_of_every_type_unchanged(chroma_collection):
    metas = {
        "p": validate_metadata("persona", {"timestamp": TS, "version": "1", "topic": "tone"}),
        "f": validate_metadata("faq", {"timestamp": TS, "specialist_name": "calc"}),
        "m": validate_metadata(
            "memory",
            {
                "timestamp": TS,
                "scope": "entity:bob",
                "tags": ["a", "b"],
                "importance": 4,
                "ratios": [0.5, 1.5],
                "pinned": True,
            },
        ),
        "t": validate_metadata("turn", {**MINIMAL["turn"], "turn_index": 2}),
        "s": validate_metadata("summary", {**MINIMAL["summary"], "turn_range": "1-2", "summary_index": 1}),
    }
    ids = list(metas)
    stored = [m.to_chroma() for m in metas.values()]
    chroma_collection.add(ids=ids, embeddings=[[1.0, float(i), 0.5] for i in range(len(ids))], metadatas=stored)
    got = chroma_collection.get(ids=ids)
    assert dict(zip(got["ids"], got["metadatas"])) == dict(zip(ids, stored))


def test_tuple_extra_is_stored_as_a_list_chroma_accepts(chroma_collection):
    stored = validate_metadata("memory", {"timestamp": TS, "pair": (1, 2)}).to_chroma()
    assert stored["pair"] == [1, 2] and type(stored["pair"]) is list
    chroma_collection.add(ids=["x"], embeddings=[[1.0, 0.0, 0.0]], metadatas=[stored])


@pytest.mark.parametrize("key", ["chroma:document", "$weird", "#weird"])
def test_extra_keys_chroma_refuses_are_rejected(key, chroma_collection):
    try:
        stored = validate_metadata("memory", {"timestamp": TS, key: "x"}).to_chroma()
    except ValidationError as err:
        assert repr(key) in str(err)
        return
    # accepted: then Chroma must be able to store it
    chroma_collection.add(ids=["x"], embeddings=[[1.0, 0.0, 0.0]], metadatas=[stored])


# --- JSON schemas -----------------------------------------------------------------------------


def test_get_all_schemas_covers_every_type_and_is_json():
    schemas = get_all_schemas()
    assert list(schemas) == list(DOC_TYPES)
    json.dumps(schemas)
    for name, schema in schemas.items():
        assert schema["type"] == "object"
        assert schema["properties"]["type"]["const"] == name
        for base in ("type", "timestamp", "source", "scope"):
            assert base in schema["properties"]
        assert {"type", "timestamp"} <= set(schema["required"])


def test_faq_schema_uses_stored_underscore_names():
    props = get_all_schemas()["faq"]["properties"]
    assert "_specialist_name" in props and "_version" in props
    assert "specialist_name" not in props and "version" not in props
    assert props["_version"]["default"] == "auto"


def test_source_enum_in_schema():
    schema = get_all_schemas()["memory"]
    assert schema["$defs"]["Source"]["enum"] == ["chat", "kb", "system", "import"]


@pytest.mark.parametrize(
    "doc_type, required",
    [
        ("persona", ["type", "timestamp", "version"]),
        ("faq", ["type", "timestamp"]),
        ("memory", ["type", "timestamp"]),
        ("turn", ["type", "timestamp", "conversation_id", "role"]),
        ("summary", ["type", "timestamp", "conversation_id"]),
    ],
)
def test_schema_info_required_fields(doc_type, required):
    info = schema_info(doc_type)
    assert set(info) == {"document_type", "schema", "fields", "required_fields"}
    assert info["document_type"] == doc_type
    assert info["required_fields"] == required
    assert info["schema"] == get_all_schemas()[doc_type]
    assert [k for k, f in info["fields"].items() if f["required"]] == required


def test_schema_info_fields_describe_defaults_and_types():
    memory = schema_info(DocType.MEMORY)["fields"]
    assert memory["importance"]["type"] == "integer"
    assert memory["importance"]["default"] == 3
    assert memory["scope"]["default"] == "global"
    assert memory["source"]["default"] == "system"
    assert memory["tags"]["type"] == "array"
    assert memory["importance"]["description"]
    faq = schema_info("faq")["fields"]
    assert faq["_version"]["default"] == "auto"
    assert faq["_specialist_name"]["required"] is False


def test_schema_info_of_unknown_type_raises():
    with pytest.raises(ValidationError, match="unknown document type 'nope'"):
        schema_info("nope")


def test_a_field_given_twice_under_both_names_is_refused():
    with pytest.raises(ValidationError, match="given twice"):
        validate_metadata("faq", {"timestamp": "2026-01-01T00:00:00Z", "_version": "v2", "version": "v3"})


@pytest.mark.parametrize("field", ["turn_index", "summary_index"])
def test_positions_refuse_booleans(field):
    doc_type = "turn" if field == "turn_index" else "summary"
    meta = {"timestamp": "2026-01-01T00:00:00Z", "conversation_id": "conv-1", field: True}
    if doc_type == "turn":
        meta["role"] = "user"
    with pytest.raises(ValidationError, match=field):
        validate_metadata(doc_type, meta)


# --- times out of range -----------------------------------------------------------------------


@pytest.mark.parametrize("ts", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", 1e20, -1e20])
def test_times_outside_the_utc_range_are_validation_errors(ts):
    err = invalid("memory", {"timestamp": ts})
    assert err.problems[0]["field"] == "timestamp" and "out of range" in str(err)


# --- limits -----------------------------------------------------------------------------------


def test_limits_leave_room_below_chromas_breaking_point():
    # Chroma's compaction fails at ~5,460 metadata rows (keys plus list items) in one document
    assert MAX_METADATA_ENTRIES < 5000 and MAX_LIST_ITEMS < MAX_METADATA_ENTRIES and MAX_TAGS <= MAX_LIST_ITEMS
    assert MAX_METADATA_KEYS < MAX_METADATA_ENTRIES


@pytest.mark.parametrize(
    "meta, field, message",
    [
        (
            {"tags": [f"t{i}" for i in range(5470)]},
            "tags",
            f"tags: 5470 tags given; a memory has at most {MAX_TAGS} (MAX_TAGS)",
        ),
        ({"tags": ["x" * (MAX_TAG_LENGTH + 1)]}, "tags", f"at most {MAX_TAG_LENGTH} (MAX_TAG_LENGTH)"),
        (
            {"big": list(range(6000))},
            "big",
            "'big' must be a string, number, boolean or a non-empty list of one of those, got [0, 1, 2, 3",
        ),
        ({"big": list(range(6000))}, "big", f"a list of 6000 items; at most {MAX_LIST_ITEMS} (MAX_LIST_ITEMS)"),
        (
            {"names": ["n" * (MAX_LIST_ITEM_LENGTH + 1)]},
            "names",
            f"at most {MAX_LIST_ITEM_LENGTH} (MAX_LIST_ITEM_LENGTH)",
        ),
        ({"note": "x" * (MAX_STRING_LENGTH + 1)}, "note", f"at most {MAX_STRING_LENGTH} (MAX_STRING_LENGTH)"),
        ({"k" * (MAX_KEY_LENGTH + 1): 1}, "k" * MAX_KEY_LENGTH, f"at most {MAX_KEY_LENGTH} (MAX_KEY_LENGTH)"),
        (
            {f"k{i}": i for i in range(MAX_METADATA_KEYS + 1)},
            "metadata",
            f"at most {MAX_METADATA_KEYS} (MAX_METADATA_KEYS)",
        ),
        (
            {f"k{i}": i for i in range(MAX_METADATA_KEYS - 3)},
            "metadata",
            f"at most {MAX_METADATA_KEYS} (MAX_METADATA_KEYS)",
        ),
        (
            {f"l{i}": list(range(MAX_LIST_ITEMS)) for i in range(9)},
            "metadata",
            f"at most {MAX_METADATA_ENTRIES} (MAX_METADATA_ENTRIES)",
        ),
        ({"topic": "x" * (MAX_STRING_LENGTH + 1)}, "topic", f"at most {MAX_STRING_LENGTH} (MAX_STRING_LENGTH)"),
    ],
)
def test_metadata_beyond_the_limits_is_refused_naming_key_and_limit(meta, field, message):
    err = invalid("memory", {"timestamp": TS, **meta})
    assert message in str(err)
    assert err.problems[0]["field"] == field


def test_metadata_at_the_limits_is_accepted():
    meta = {
        "timestamp": TS,
        "tags": [f"{i:03d}" + "t" * (MAX_TAG_LENGTH - 3) for i in range(MAX_TAGS)],
        "names": ["n" * MAX_LIST_ITEM_LENGTH] * MAX_LIST_ITEMS,
        "note": "x" * MAX_STRING_LENGTH,
        "k" * MAX_KEY_LENGTH: 1,
    }
    stored = validate_metadata("memory", meta).to_chroma()
    assert len(stored["tags"]) == MAX_TAGS and len(stored["names"]) == MAX_LIST_ITEMS


def test_duplicate_tags_count_once():
    stored = validate_metadata("memory", {"timestamp": TS, "tags": ["same"] * 5000}).to_chroma()
    assert stored["tags"] == ["same"]


# --- keys the store reads back: typed or reserved ----------------------------------------------


@pytest.mark.parametrize(
    "doc_type, key, value, message",
    [
        ("memory", "last_used", "yesterday", "last_used must be epoch seconds (a number >= 0), got 'yesterday'"),
        ("memory", "last_used", -5, "last_used must be epoch seconds"),
        ("memory", "last_used", True, "last_used must be epoch seconds"),
        ("memory", "last_used", float("inf"), "last_used must be epoch seconds"),
        ("memory", "created_at", "last week", "created_at must be an ISO 8601 time"),
        ("memory", "created_at", "2026-01-01T00:00:00", "has no timezone"),
        ("memory", "created_at", 1700000000, "created_at must be an ISO 8601 time"),
        ("memory", "status", "gone", "status must be one of active, superseded, deprecated, retracted, archived"),
        (
            "memory",
            "pam_status",
            "gone",
            "pam_status must be one of active, superseded, deprecated, retracted, archived",
        ),
        ("memory", "part_of", "", "part_of must be the id of what the row is a part of"),
        ("memory", "part_of", 5, "part_of must be the id of what the row is a part of"),
        ("memory", "merged_from", "doc-1", "merged_from must be a list of document ids"),
        ("persona", "position", "first", "position must be an integer >= 0"),
        ("persona", "sections", 0, "sections must be an integer >= 1"),
        ("faq", "kb_part", 0, "kb_part must be an integer >= 1"),
        ("faq", "kb_parts", 1.5, "kb_parts must be an integer >= 1"),
    ],
)
def test_keys_the_store_reads_are_typed(doc_type, key, value, message):
    err = invalid(doc_type, {**MINIMAL[doc_type], key: value})
    assert message in str(err)
    assert err.problems[0]["field"] == key


def test_typed_keys_are_stored_normalised():
    out = validate_metadata(
        "memory",
        {
            "timestamp": TS,
            "created_at": "2026-01-01T10:00:00+02:00",
            "last_used": 5,
            "pam_status": "archived",
            "part_of": "doc-1",
        },
    ).to_chroma()
    assert out["created_at"] == "2026-01-01T08:00:00+00:00"
    assert out["last_used"] == 5.0 and type(out["last_used"]) is float
    # pam_status, the status's former name, is stored as the status
    assert out["status"] == "archived" and "pam_status" not in out and out["part_of"] == "doc-1"


@pytest.mark.parametrize("key", ["ts_epoch", "id", "text", "embedding"])
def test_reserved_keys_are_refused_as_extras_with_what_to_do(key):
    err = invalid("memory", {"timestamp": TS, key: 5})
    assert f"metadata field {key!r} is reserved: " in str(err)
    assert err.problems[0]["field"] == key


def test_typed_fields_are_documented_in_the_schema():
    props = get_all_schemas()["memory"]["properties"]
    for key in ("created_at", "last_used", "status", "part_of", "merged_from"):
        assert props[key]["description"]


@pytest.mark.parametrize("bad", [0, -1, 1001, 2.0, "3", True])
def test_one_k_rule_for_every_search(bad, embedded_store):
    """The store, turn search, the mirror and the specialist registry take ``k`` by one rule."""
    from brain.model.schemas import MAX_K, check_k
    from brain.rules.turn_search import search_turns

    assert check_k(1) == 1 and check_k(MAX_K) == MAX_K
    calls = [
        lambda: check_k(bad),
        lambda: embedded_store.retrieve_memories("x", k=bad, relevance=False),
        lambda: search_turns("x", None, [], k=bad),
    ]
    for call in calls:
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.problems[0]["field"] == "k" and f"got {bad!r}" in str(err.value)
