"""Read-your-writes over HTTP: two API workers on one Chroma server, the sequence in headers."""

from __future__ import annotations

import uuid

import httpx
import pytest

from brain.app.core import open_store
from brain.shells.api import create_app
from tests.conftest import LiveServer, api_settings


@pytest.fixture
def two_workers(chroma_server, tmp_path, local_embedder):
    collection = f"api-{uuid.uuid4().hex[:12]}"
    opened = [open_store(api_settings(tmp_path / f"w{n}", chroma_url=chroma_server, collection=collection,
                                      feed_interval_seconds=3600.0), embedder=local_embedder) for n in range(2)]
    try:
        with LiveServer(create_app(opened[0].settings, store=opened[0])) as a, \
                LiveServer(create_app(opened[1].settings, store=opened[1])) as b, \
                httpx.Client(base_url=a.url, timeout=30) as ca, httpx.Client(base_url=b.url, timeout=30) as cb:
            yield ca, cb
    finally:
        for store in opened:
            store.close()


def search(client, q, **headers):
    return client.get("/v1/memories/search", params={"q": q}, headers=headers)


@pytest.mark.server
def test_a_write_answers_its_sequence_and_a_read_elsewhere_waits_for_it(two_workers):
    a, b = two_workers
    assert search(b, "tea").json()["results"] == []  # b has looked: it will not look again for an hour
    created = a.post("/v1/memories", json={"text": "Alice drinks green tea"})
    assert created.status_code == 201
    sequence = created.headers["X-Brain-Sequence"]
    assert search(b, "tea").json()["results"] == []  # without the header: b's state as it was
    seen = search(b, "tea", **{"X-Brain-Min-Sequence": sequence})
    assert [h["id"] for h in seen.json()["results"]] == [created.json()["id"]]
    assert "X-Brain-Sequence" not in seen.headers  # a read
    deleted = a.delete(f"/v1/memories/{created.json()['id']}")
    assert int(deleted.headers["X-Brain-Sequence"]) > int(sequence)
    assert search(b, "tea", **{"X-Brain-Min-Sequence": deleted.headers["X-Brain-Sequence"]}).json()["results"] == []


@pytest.mark.server
def test_a_bad_min_sequence_is_refused(two_workers):
    a, _ = two_workers
    refused = search(a, "tea", **{"X-Brain-Min-Sequence": "soon"})
    assert refused.status_code == 422
    assert refused.json()["error"] == "validation_error" and "min_sequence" in refused.json()["message"]


def test_the_embedded_store_sends_no_sequence(live):
    created = live.post("/v1/memories", json={"text": "Bob likes coffee"})
    assert created.status_code == 201 and "X-Brain-Sequence" not in created.headers
    assert live.get("/v1/memories/search", params={"q": "coffee"},
                    headers={"X-Brain-Min-Sequence": "12"}).status_code == 200
