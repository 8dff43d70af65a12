"""The change feed's sequence in the JSON bodies of the HTTP API's write responses."""

from __future__ import annotations

import pytest

from brain.shells.api import create_app
from tests.http.test_api_read_your_writes import two_workers  # noqa: F401  (the fixture)

CONVERSATION = "conv-sequence"


def writes(client) -> list:
    """One response of each route that writes, in an order where each has something to write."""
    created = client.post("/v1/memories", json={"text": "Alice drinks green tea", "entity": "alice"})
    memory = created.json()["id"]
    return [
        created,
        client.patch(f"/v1/memories/{memory}", params={"entity": "alice"}, json={"importance": 5}),
        client.post("/v1/docs", json={"type": "faq", "text": "We open at nine."}),
        client.post("/v1/exchanges", json={"conversation_id": CONVERSATION, "user_text": "Hello",
                                           "assistant_text": "Hi there", "entity": "alice"}),
        client.delete(f"/v1/memories/{memory}", params={"entity": "alice"}),
        client.delete("/v1/entities/alice"),
    ]


@pytest.mark.server
def test_every_write_body_carries_its_sequence_as_the_header_does(two_workers):  # noqa: F811
    a, b = two_workers
    answered = writes(a)
    assert [r.status_code for r in answered] == [201, 200, 201, 201, 200, 200], [r.text for r in answered]
    sequences = [r.json()["sequence"] for r in answered]
    assert sequences == [int(r.headers["X-Brain-Sequence"]) for r in answered]
    assert all(isinstance(s, int) for s in sequences) and sequences == sorted(set(sequences))


@pytest.mark.server
def test_the_body_sequence_reads_the_write_on_another_worker(two_workers):  # noqa: F811
    a, b = two_workers
    assert b.get("/v1/memories/search", params={"q": "tea"}).json()["results"] == []  # b looked: not again for an hour
    created = a.post("/v1/memories", json={"text": "Alice drinks green tea"})
    sequence = str(created.json()["sequence"])
    assert b.get("/v1/memories/search", params={"q": "tea"}).json()["results"] == []
    seen = b.get("/v1/memories/search", params={"q": "tea"}, headers={"X-Brain-Min-Sequence": sequence})
    assert [h["id"] for h in seen.json()["results"]] == [created.json()["id"]]


def test_without_a_feed_the_sequence_is_null(live):
    answered = writes(live)
    assert [r.status_code for r in answered] == [201, 200, 201, 201, 200, 200], [r.text for r in answered]
    for response in answered:
        assert "sequence" in response.json() and response.json()["sequence"] is None
        assert "X-Brain-Sequence" not in response.headers


@pytest.mark.parametrize("path, method, status", [
    ("/v1/memories", "post", "201"), ("/v1/memories/{doc_id}", "patch", "200"),
    ("/v1/memories/{doc_id}", "delete", "200"), ("/v1/docs", "post", "201"), ("/v1/exchanges", "post", "201"),
    ("/v1/entities/{name}", "delete", "200"),
])
def test_the_openapi_schema_documents_the_sequence_of_each_write(path, method, status, api_store):
    schema = create_app(api_store.settings, store=api_store).openapi()
    ref = schema["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert "sequence" in body["required"]
    assert {t.get("type") for t in body["properties"]["sequence"]["anyOf"]} == {"integer", "null"}
    assert "X-Brain-Min-Sequence" in body["properties"]["sequence"]["description"]


def test_reads_document_no_sequence(api_store):
    schema = create_app(api_store.settings, store=api_store).openapi()
    ref = schema["paths"]["/v1/memories/{doc_id}"]["get"]["responses"]["200"]["content"]["application/json"]
    assert "sequence" not in schema["components"]["schemas"][ref["schema"]["$ref"].rsplit("/", 1)[1]]["properties"]
