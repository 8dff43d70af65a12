"""Hostile and malformed input over HTTP: always a 422 in the documented shape that says what is wrong
and where, never a 400 ``{"error": "error"}``, never a 500, never an internal class name; and the
OpenAPI schema documents what the server enforces."""

from __future__ import annotations

import pytest

from brain.model.schemas import DOC_TYPES
from brain.shells.api import MAX_JSON_DEPTH, MAX_OFFSET

JSON = {"content-type": "application/json"}


def problem_of(response) -> tuple[str, str]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "validation_error" and body["problems"]
    return body["problems"][0]["field"], body["message"]


def test_malformed_json_says_what_and_where(live, api_store):
    field, message = problem_of(live.post("/v1/memories", content=b'{"text": "x",\n "importance": 3,,\n}',
                                          headers=JSON))
    assert field == "body"
    assert message.startswith("body is not valid JSON: ") and "at line 2, column 18" in message
    assert "expected" in message  # the decoder's reason
    _, message = problem_of(live.post("/v1/memories", content=b'{"text": "x"', headers=JSON))
    assert "unexpected end of data at line 1, column 13" in message
    assert api_store.count() == 0


@pytest.mark.parametrize("body, reason", [
    (b'{"text": "caf\xe9"}', "UTF-8"),
    (b"[" * 10_000 + b"]" * 10_000, "depth"),
    (b'{"text": "x", "metadata": {"a": ' + b"[" * 100 + b"]" * 100 + b"}}", f"nested deeper than {MAX_JSON_DEPTH}"),
    (b'{"text": "x", "importance": ' + b"9" * 5000 + b"}", "number"),
    (b'{"text": "x", "importance": NaN}', "expected a JSON value"),
])
def test_undecodable_bodies_are_422_with_the_reason(live, api_store, body, reason):
    field, message = problem_of(live.post("/v1/memories", content=body, headers=JSON))
    assert field == "body" and reason in message
    assert api_store.count() == 0


def test_a_body_without_a_json_content_type_is_422_saying_so(live):
    _, message = problem_of(live.post("/v1/memories", content=b'{"text": "x"}', headers={"content-type": "text/plain"}))
    assert "Content-Type: application/json" in message
    _, message = problem_of(live.post("/v1/memories", headers=JSON))
    assert message == "a JSON body is required"


@pytest.mark.parametrize("params", [{"offset": 2**32}, {"offset": 2**64}, {"offset": MAX_OFFSET + 1},
                                    {"limit": 2**32}, {"offset": -1}])
def test_offset_and_limit_are_bounded(live, params):
    field, _ = problem_of(live.get("/v1/memories", params=params))
    assert field in params


def test_the_largest_offset_is_answered(live):
    response = live.get("/v1/memories", params={"offset": MAX_OFFSET})
    assert response.status_code == 200 and response.json()["memories"] == []


@pytest.mark.parametrize("body, field", [
    ({"text": "x", "importance": True}, "importance"),
    ({"text": "x", "importance": "5"}, "importance"),
    ({"text": "x", "importance": 5.0}, "importance"),
    ({"text": "x", "importance": 2**70}, "importance"),
    ({"text": 5}, "text"),
    ({"text": "x", "tags": ["a", 1]}, "tags.1"),
    ({"text": "x", "entity": 7}, "entity"),
])
def test_types_are_strict(live, api_store, body, field):
    got, message = problem_of(live.post("/v1/memories", json=body))
    assert got == field and message.startswith(field)
    assert api_store.count() == 0


def test_patch_types_are_strict(live):
    doc_id = live.post("/v1/memories", json={"text": "Alice likes tea"}).json()["id"]
    for body, field in [({"importance": True}, "importance"), ({"replace_metadata": "yes"}, "replace_metadata"),
                        ({"text": ""}, "text"), ({"importance": 6}, "importance")]:
        assert problem_of(live.patch(f"/v1/memories/{doc_id}", json=body))[0] == field
    assert live.get(f"/v1/memories/{doc_id}").json()["metadata"]["importance"] == 3


@pytest.mark.parametrize("body", [
    {"text": "x", "type": "recipe"},
    {"docs": [{"text": "x", "type": "recipe"}]},
    {"docs": [{"text": "", "type": "faq"}]},
    {"docs": "not a list"},
    {"docs": []},
    {"text": "x"},
    {"docs": [{"text": "x", "type": "faq", "colour": "red"}]},
    [1, 2],
])
def test_document_errors_never_show_class_names(live, api_store, body):
    response = live.post("/v1/docs", json=body)
    assert response.status_code == 422, response.text
    for name in ("DocCreate", "DocsCreate", "one-document", "document-batch", "MemoryCreate"):
        assert name not in response.text
    assert api_store.count() == 0


def test_an_unknown_document_type_lists_the_valid_ones(live):
    field, message = problem_of(live.post("/v1/docs", json={"text": "x", "type": "recipe"}))
    assert field == "type" and "'recipe'" in message and all(t in message for t in DOC_TYPES)
    field, message = problem_of(live.post("/v1/docs", json={"docs": [{"text": "x", "type": "faq"},
                                                                     {"text": "y", "type": "recipe"}]}))
    assert field == "docs.1.type" and all(t in message for t in DOC_TYPES)


def test_an_empty_entity_says_the_entity_is_empty(live, api_store):
    for response in (live.post("/v1/memories", json={"text": "x", "entity": ""}),
                     live.post("/v1/context", json={"user_message": "x", "entity": ""}),
                     live.get("/v1/memories", params={"entity": ""}),
                     live.get("/v1/memories/search", params={"q": "x", "entity": ""})):
        field, message = problem_of(response)
        assert field == "entity" and message.startswith("entity is empty")
    field, message = problem_of(live.post("/v1/memories", json={"text": "x", "entity": " alice"}))
    assert "not a valid entity name" in message
    assert api_store.count() == 0


def test_conversation_id_and_timestamp_are_accepted_at_the_top_level(live, api_store):
    created = live.post("/v1/memories", json={"text": "Alice booked the trip", "conversation_id": "conv-42",
                                              "timestamp": "2026-03-01T10:00:00+02:00", "entity": "alice"})
    assert created.status_code == 201, created.text
    stored = api_store.get_one(created.json()["id"]).metadata
    assert stored["conversation_id"] == "conv-42"
    assert stored["timestamp"] == "2026-03-01T08:00:00+00:00"
    for body, field in [({"text": "x", "conversation_id": "42"}, "conversation_id"),
                        ({"text": "x", "timestamp": "yesterday"}, "timestamp"),
                        ({"text": "x", "metadata": {"conversation_id": "conv-1"}}, "metadata.conversation_id")]:
        got, message = problem_of(live.post("/v1/memories", json=body))
        assert got == field, message
    assert "send it at the top level" in problem_of(
        live.post("/v1/memories", json={"text": "x", "metadata": {"timestamp": "2026-03-01T10:00:00Z"}}))[1]


def test_validation_messages_read_as_sentences(live):
    _, message = problem_of(live.post("/v1/memories", json={"text": "x", "colour": "red"}))
    assert message == "colour is not a field of this request"
    _, message = problem_of(live.post("/v1/memories", json={"importance": 3}))
    assert message == "text is required"
    _, message = problem_of(live.post("/v1/context", json=["a list"]))
    assert message.startswith("body must be a JSON object")
    _, message = problem_of(live.get("/v1/conversations/not-a-conv/turns"))
    assert message.startswith("conversation_id must look like 'conv-<id>'")


# ---- the schema documents what the server does ---------------------------------------------------

def test_openapi_documents_every_error_response_and_constraint(live):
    schema = live.get("/openapi.json").json()
    assert "HTTPValidationError" not in schema["components"]["schemas"]  # our 422 body, not FastAPI's
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert "401" in responses, (method, path)
            for code in ("400", "401", "403", "404", "413", "422"):
                if code in responses:
                    ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
                    assert ref.endswith("/ErrorBody"), (method, path, code)
            has_input = operation.get("parameters") or operation.get("requestBody")
            assert ("422" in responses) == bool(has_input), (method, path)
            if operation.get("requestBody"):
                assert "413" in responses, (method, path)
            if path != "/v1/schema" and path != "/api/schema" and path != "/v1/health":
                assert "503" in responses, (method, path)
    memories = schema["paths"]["/v1/memories"]
    assert {"403", "422"} <= set(memories["get"]["responses"])
    entity = next(p for p in memories["get"]["parameters"] if p["name"] == "entity")["schema"]["anyOf"][0]
    assert entity["minLength"] == 1 and entity["pattern"]
    offset = next(p for p in memories["get"]["parameters"] if p["name"] == "offset")["schema"]
    assert offset["maximum"] == MAX_OFFSET
    doc = schema["components"]["schemas"]["DocCreate"]["properties"]
    assert doc["type"]["enum"] == list(DOC_TYPES)
    turns = schema["paths"]["/v1/conversations/{conversation_id}/turns"]["get"]
    conv = next(p for p in turns["parameters"] if p["name"] == "conversation_id")["schema"]
    assert conv["pattern"].startswith("^conv-")
    assert "404" in turns["responses"]
    importance = schema["components"]["schemas"]["MemoryCreate"]["properties"]["importance"]
    assert importance["type"] == "integer" and importance["minimum"] == 1 and importance["maximum"] == 5


def test_a_single_valued_parameter_given_twice_is_422(live):
    field, message = problem_of(live.get("/v1/memories", params=[("entity", "ann"), ("entity", "bea")]))
    assert field == "entity" and message == "entity is given more than once; send it once"
    assert live.get("/v1/memories", params=[("tags", "a"), ("tags", "b")]).status_code == 200
