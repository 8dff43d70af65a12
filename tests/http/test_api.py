"""The HTTP API: real uvicorn on a free loopback port, a real HTTP client, a real store and embedder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import brain
from brain.app.core import open_store
from brain.model.errors import ConfigError
from brain.model.schemas import DOC_TYPES
from brain.providers.embeddings.ollama import OllamaEmbedder
from brain.shells.api import create_app, is_loopback, serve
from tests.conftest import ROOT, LiveServer, api_settings, free_port, start_chroma_server, stop
from tests.ollama_stub import OllamaStub

# ---- schema --------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["/v1/schema", "/api/schema"])
def test_schema_of_every_type_and_of_one(live, prefix):
    every = live.get(prefix)
    assert every.status_code == 200
    assert set(every.json()) == set(DOC_TYPES)
    one = live.get(prefix, params={"doc_type": "memory"}).json()
    assert set(one) == {"document_type", "schema", "fields", "required_fields"}
    assert one["document_type"] == "memory"
    assert "importance" in one["fields"] and "timestamp" in one["required_fields"]


def test_unknown_doc_type_is_422_listing_the_valid_ones(live):
    response = live.get("/v1/schema", params={"doc_type": "recipe"})
    assert response.status_code == 422
    message = response.json()["message"]
    assert "recipe" in message and all(t in message for t in DOC_TYPES)


# ---- health --------------------------------------------------------------------------------------


def test_health_reports_store_embedder_and_summariser(live, api_store):
    api_store.upsert_memory("Alice likes tea")
    body = live.get("/v1/health").json()
    assert body["status"] == "ok"  # the live fixture's summariser is unreachable, and optional
    assert body["store"]["ok"] is True and body["store"]["documents"] == 1
    assert body["embedder"]["name"] == api_store.embedder.name
    assert "summariser" in body and isinstance(body["summariser"], dict)


# ---- memories ------------------------------------------------------------------------------------


def test_memory_create_get_patch_delete(live):
    created = live.post("/v1/memories", json={"text": "Alice is vegetarian", "importance": 5, "tags": ["food"]})
    assert created.status_code == 201, created.text
    memory = created.json()
    assert memory["metadata"]["importance"] == 5 and memory["metadata"]["tags"] == ["food"]
    doc_id = memory["id"]
    assert live.get(f"/v1/memories/{doc_id}").json()["text"] == "Alice is vegetarian"
    patched = live.patch(f"/v1/memories/{doc_id}", json={"text": "Alice is vegan", "importance": 4})
    assert patched.status_code == 200, patched.text
    assert patched.json()["id"] == doc_id and patched.json()["text"] == "Alice is vegan"
    assert patched.json()["metadata"]["importance"] == 4
    assert live.delete(f"/v1/memories/{doc_id}").status_code == 200
    assert live.get(f"/v1/memories/{doc_id}").status_code == 404
    assert live.delete(f"/v1/memories/{doc_id}").status_code == 404
    assert live.patch(f"/v1/memories/{doc_id}", json={"importance": 2}).status_code == 404


def test_search_hits_carry_ids_that_delete_them(live):
    for text in ["Bob's birthday is in May", "Bob plays the cello", "The office wifi password rotates weekly"]:
        assert live.post("/v1/memories", json={"text": text}).status_code == 201
    hits = live.get("/v1/memories/search", params={"q": "when is Bob's birthday?", "k": 2}).json()["results"]
    assert hits[0]["text"] == "Bob's birthday is in May"
    assert {"id", "score", "similarity_part", "importance_part", "recency_part"} <= set(hits[0])
    assert live.delete(f"/v1/memories/{hits[0]['id']}").status_code == 200
    again = live.get("/v1/memories/search", params={"q": "when is Bob's birthday?", "k": 3}).json()["results"]
    assert hits[0]["id"] not in {h["id"] for h in again}


def test_list_memories_filters_and_pages(live):
    live.post("/v1/memories", json={"text": "Carol likes jazz", "tags": ["music"], "entity": "carol"})
    live.post("/v1/memories", json={"text": "Dan likes techno", "tags": ["music"], "entity": "dan"})
    live.post("/v1/memories", json={"text": "The team meets on Mondays"})
    assert len(live.get("/v1/memories").json()["memories"]) == 3
    carol = live.get("/v1/memories", params={"entity": "carol"}).json()["memories"]  # what carol may read
    assert {m["text"] for m in carol} == {"Carol likes jazz", "The team meets on Mondays"}
    music = live.get("/v1/memories", params={"tags": "music"}).json()["memories"]
    assert {m["text"] for m in music} == {"Carol likes jazz", "Dan likes techno"}
    first = live.get("/v1/memories", params={"limit": 2}).json()["memories"]
    rest = live.get("/v1/memories", params={"limit": 2, "offset": 2}).json()["memories"]
    assert len(first) == 2 and len(rest) == 1 and not {m["id"] for m in first} & {m["id"] for m in rest}
    # a count takes the listing's filters and counts every page
    assert live.get("/v1/memories/count").json() == {"count": 3}
    assert live.get("/v1/memories/count", params={"entity": "carol"}).json() == {"count": 2}
    assert live.get("/v1/memories/count", params={"tags": "music", "scope": "entity:dan"}).json() == {"count": 1}
    assert live.get("/v1/memories/count", params={"importance": 9}).status_code == 422


def test_any_document_type_through_docs(live, api_store):
    one = live.post("/v1/docs", json={"text": "We open at nine.", "type": "faq", "metadata": {"topic": "hours"}})
    assert one.status_code == 201, one.text
    [faq_id] = one.json()["ids"]
    assert api_store.get_one(faq_id).metadata["topic"] == "hours"
    batch = live.post(
        "/v1/docs",
        json={
            "docs": [
                {"text": "Be brief.", "type": "persona", "metadata": {"version": "v1", "topic": "tone"}},
                {"text": "hello", "type": "turn", "metadata": {"conversation_id": "conv-123", "role": "user"}},
            ]
        },
    )
    assert batch.status_code == 201, batch.text
    assert api_store.count("persona") == 1 and api_store.count("turn") == 1


# ---- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        ({"text": "x", "importance": 9}, "importance"),
        ({"importance": 3}, "text"),
        ({"text": ""}, "text"),
        ({"text": "x", "tags": "food"}, "tags"),
        ({"text": "x", "colour": "red"}, "colour"),
        ({"text": "x", "scope": "team:a"}, "scope"),
        ({"text": "x", "metadata": {"importance": 5}}, "metadata.importance"),
        ({"text": "x", "metadata": {"source": "kb", "tags": ["a"]}}, "metadata.source"),
    ],
)
def test_bad_memory_is_422_naming_the_field_and_writes_nothing(live, api_store, body, field):
    response = live.post("/v1/memories", json=body)
    assert response.status_code == 422, response.text
    payload = response.json()
    assert payload["error"] == "validation_error"
    assert field in payload["message"]
    assert api_store.count() == 0


@pytest.mark.parametrize(
    "body",
    [
        {"text": "x", "type": "recipe"},
        {"text": "hi", "type": "turn", "metadata": {"conversation_id": "conv-1", "role": "narrator"}},
        {"docs": []},
        {"docs": [{"text": "ok", "type": "faq"}, {"text": "", "type": "faq"}]},
    ],
)
def test_bad_documents_are_422_and_nothing_is_written(live, api_store, body):
    response = live.post("/v1/docs", json=body)
    assert response.status_code == 422, response.text
    assert api_store.count() == 0


def test_malformed_json_and_wrong_content_are_422_not_500(live):
    response = live.post("/v1/memories", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert live.post("/v1/context", json=["a list"]).status_code == 422
    assert live.get("/v1/memories/search").status_code == 422  # q missing
    assert live.get("/v1/memories/search", params={"q": "x", "k": 0}).status_code == 422
    assert live.get("/v1/conversations/not-a-conv/turns").status_code == 422


def test_body_over_the_limit_is_413(tmp_path, local_embedder):
    settings = api_settings(tmp_path, api_max_body_bytes=2048)
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        big = {"text": "x" * 4096}
        response = httpx.post(f"{server.url}/v1/memories", json=big, timeout=30)
        assert response.status_code == 413
        assert "BRAIN_API_MAX_BODY_BYTES" in response.json()["message"]
        # without a Content-Length header too (chunked upload)
        chunks = (b'{"text": "' + b"y" * 1024 for _ in range(4))
        streamed = httpx.post(
            f"{server.url}/v1/memories", content=chunks, timeout=30, headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413
        assert store.count() == 0


def test_embedder_unavailable_is_503_with_the_reason(tmp_path):
    with OllamaStub() as stub:
        settings = api_settings(tmp_path, embedder="ollama/nomic-embed-text")
        settings = settings.model_copy(update={"ollama_host": stub.url})
        store = open_store(
            settings,
            embedder=OllamaEmbedder("nomic-embed-text", host=settings.ollama_host, timeout=settings.ollama_timeout),
        )
    # the stub is stopped now: embedding a query fails
    try:
        with LiveServer(create_app(settings, store=store)) as server:
            response = httpx.get(f"{server.url}/v1/memories/search", params={"q": "anything"}, timeout=60)
            assert response.status_code == 503
            assert response.json()["error"] == "embedder_unavailable"
            assert "Ollama" in response.json()["message"] or stub.url in response.json()["message"]
    finally:
        store.close()


@pytest.mark.server
@pytest.mark.subprocess
def test_store_unavailable_is_503(tmp_path, local_embedder):
    proc, url = start_chroma_server(tmp_path)
    try:
        settings = api_settings(tmp_path, chroma_url=url)
        store = open_store(settings, embedder=local_embedder)
        with LiveServer(create_app(settings, store=store)) as server:
            assert httpx.get(f"{server.url}/v1/health", timeout=30).status_code == 200
            stop(proc)
            health = httpx.get(f"{server.url}/v1/health", timeout=30)
            assert health.status_code == 503 and health.json()["store"]["ok"] is False
            listed = httpx.get(f"{server.url}/v1/memories", timeout=30)
            assert listed.status_code == 503 and listed.json()["error"] == "store_unavailable"
    finally:
        proc.kill()


# ---- security ------------------------------------------------------------------------------------


def test_token_is_required_when_set(tmp_path, local_embedder):
    settings = api_settings(tmp_path, api_token="s3cret-token-0123456789")
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        assert httpx.get(f"{server.url}/v1/health").status_code == 401
        wrong = httpx.get(f"{server.url}/v1/health", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        basic = httpx.get(f"{server.url}/v1/health", headers={"Authorization": "Basic s3cret-token-0123456789"})
        assert basic.status_code == 401
        ok = httpx.get(f"{server.url}/v1/health", headers={"Authorization": "Bearer s3cret-token-0123456789"})
        assert ok.status_code == 200
        posted = httpx.post(f"{server.url}/v1/memories", json={"text": "x"})
        assert posted.status_code == 401 and store.count() == 0


def test_refuses_a_non_loopback_address_without_a_token(tmp_path):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10")
    with pytest.raises(ConfigError, match="BRAIN_API_TOKEN"):
        serve(api_settings(tmp_path), host="0.0.0.0", port=free_port())


def test_entity_a_never_sees_entity_b_by_id(live):
    secret = live.post("/v1/memories", json={"text": "Bea's door code is 4711", "scope": "entity:bea"}).json()
    assert live.get(f"/v1/memories/{secret['id']}", params={"entity": "ann"}).status_code == 404
    assert live.get(f"/v1/memories/{secret['id']}", params={"entity": "bea"}).status_code == 200


names = st.sampled_from(["ann", "bea", "cid", "dora"])
facts = st.lists(
    st.tuples(names, st.sampled_from(["door code", "birthday", "favourite food", "pet's name"]), st.integers(1, 5)),
    min_size=1,
    max_size=8,
)


@hypothesis_settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(facts=facts, asker=names, query=st.sampled_from(["door code", "birthday", "what food", "pet"]))
def test_property_entity_scoping_never_leaks_over_http(live, api_store, facts, asker, query):
    api_store.delete(type="memory")
    for owner, topic, importance in facts:
        response = live.post(
            "/v1/memories",
            json={
                "text": f"{owner}'s {topic} is secret-{owner}-{topic}",
                "scope": f"entity:{owner}",
                "importance": importance,
            },
        )
        assert response.status_code == 201
    live.post("/v1/memories", json={"text": "the office is closed on Sundays"})
    hits = live.get("/v1/memories/search", params={"q": query, "k": 20, "entity": asker}).json()["results"]
    scopes = {h["metadata"]["scope"] for h in hits}
    assert scopes <= {"global", f"entity:{asker}"}
    # the library's ranking, the same over HTTP: the relevant ones among what the scope rule lets through
    assert [h["id"] for h in hits] == [h.id for h in api_store.retrieve_memories(query, 20, asker)]
    eligible = api_store.retrieve_memories(query, 20, asker, relevance=False)
    assert {h.metadata["scope"] for h in eligible} == {"global"} | (
        {f"entity:{asker}"} if any(o == asker for o, _, _ in facts) else set()
    )
    mine = {f"{o}'s {t} is secret-{o}-{t}" for o, t, _ in facts if o == asker}
    assert {h["text"] for h in hits if h["metadata"]["scope"] != "global"} <= mine
    context = live.post("/v1/context", json={"user_message": query, "entity": asker}).json()
    leaked = [
        item
        for name in ("core", "memory")
        for item in context["sections"][name]
        if item["metadata"].get("scope") not in ("global", f"entity:{asker}")
    ]
    assert all(item["metadata"]["scope"] == f"entity:{asker}" for item in context["sections"]["core"])
    assert leaked == []


# ---- chat ----------------------------------------------------------------------------------------


def test_context_and_exchanges_round_trip(live, api_store):
    api_store.upsert_memory("Alice is allergic to peanuts", importance=5)
    api_store.upsert_doc("Opening hours are 9 to 5 on weekdays.", "faq", topic="hours")
    first = live.post("/v1/exchanges", json={"user_text": "Hi, I am Alice", "assistant_text": "Hello Alice!"})
    assert first.status_code == 201, first.text
    conversation_id = first.json()["conversation_id"]
    assert conversation_id.startswith("conv-")
    second = live.post(
        "/v1/exchanges",
        json={"conversation_id": conversation_id, "user_text": "When do you open?", "assistant_text": "From 9 to 5."},
    )
    assert second.status_code == 201
    turns = live.get(f"/v1/conversations/{conversation_id}/turns").json()["turns"]
    assert [t["metadata"]["turn_index"] for t in turns] == [1, 2, 3, 4]
    assert [t["metadata"]["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert [
        t["text"] for t in live.get(f"/v1/conversations/{conversation_id}/turns", params={"k": 1}).json()["turns"]
    ] == ["From 9 to 5."]
    context = live.post(
        "/v1/context", json={"conversation_id": conversation_id, "user_message": "Can I eat peanut butter?"}
    )
    assert context.status_code == 200, context.text
    body = context.json()
    assert body["sections"]["memory"][0]["text"] == "Alice is allergic to peanuts"
    assert [t["text"] for t in body["sections"]["turn"]][-1] == "From 9 to 5."
    assert "Alice is allergic to peanuts" in body["prompt"]
    summaries = live.get(f"/v1/conversations/{conversation_id}/summaries")
    assert summaries.status_code == 200 and summaries.json()["summaries"] == []


@pytest.mark.subprocess
def test_serve_command_refuses_a_second_process_on_the_same_data_dir(api_store, tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain.shells.cli",
            "--data-dir",
            str(api_store.settings.data_dir),
            "serve",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "in use by process" in result.stderr and "BRAIN_CHROMA_URL" in result.stderr


# ---- specialists ---------------------------------------------------------------------------------

SPECIALISTS_YAML = ROOT / "config" / "specialists.yaml"


@pytest.mark.slow
def test_specialists_found_by_meaning_over_http(tmp_path, local_embedder):
    settings = api_settings(tmp_path, specialists_path=SPECIALISTS_YAML)
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        found = httpx.get(f"{server.url}/v1/specialists", params={"q": "look this up online", "k": 2}, timeout=60)
        assert found.status_code == 200, found.text
        results = found.json()["results"]
        assert results[0]["id"] == "web_search" and len(results) == 2
        assert {"score", "band"} <= set(results[0])
        ocr = httpx.get(f"{server.url}/v1/specialists", params={"q": "read the text in this photo"}).json()
        assert ocr["results"][0]["id"] == "ocr"
        listed = httpx.get(f"{server.url}/v1/specialists").json()["specialists"]
        assert {"web_search", "ocr", "vision", "docs"} <= {s["id"] for s in listed}
        assert store.count() == 0  # the registry lives in its own collection
        assert httpx.get(f"{server.url}/v1/specialists", params={"k": 0}).status_code == 422


def test_specialists_are_registered_at_start_and_a_request_only_reads_them(tmp_path, local_embedder):
    yaml = tmp_path / "specialists.yaml"
    shutil.copy(SPECIALISTS_YAML, yaml)
    settings = api_settings(tmp_path, specialists_path=yaml)
    with brain.open(settings, embedder=local_embedder) as opened, LiveServer(create_app(brain=opened)) as server:
        yaml.unlink()  # registered when the server started: the request reads what is stored
        found = httpx.get(f"{server.url}/v1/specialists", params={"q": "read the text in this photo"}, timeout=60)
        assert found.status_code == 200, found.text
        assert found.json()["results"][0]["id"] == "ocr"
        assert opened.specialists.find_specialists("look this up online")[0].id == "web_search"


def test_create_app_takes_a_brain_or_a_store_not_both(api_store):
    with brain.Brain(api_store) as opened, pytest.raises(ConfigError, match="not both"):
        create_app(brain=opened, store=api_store)


@pytest.mark.subprocess
def test_a_bad_setting_breaks_the_app_not_the_import(tmp_path):
    code = (
        "import brain.shells.api as api\nprint('imported')\ntry:\n    api.app\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "BRAIN_API_MAX_BODY_BYTES": "lots"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    imported, failed = result.stdout.splitlines()[:2]
    assert imported == "imported"
    assert failed.startswith("ConfigError") and "BRAIN_API_MAX_BODY_BYTES" in failed


@pytest.mark.subprocess
def test_the_module_app_is_built_once_from_the_environment(tmp_path):
    code = (
        "import brain.shells.api as api\nassert api.app is api.app\nprint(api.app.state.settings.data_dir)\n"
        "try:\n    api.no_such_thing\nexcept AttributeError:\n    print('no such thing')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "BRAIN_DATA_DIR": str(tmp_path / "d")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(tmp_path / "d"), "no such thing"]


def test_specialists_without_their_file_is_503_naming_the_setting(tmp_path, local_embedder):
    settings = api_settings(tmp_path, specialists_path=tmp_path / "missing.yaml")
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        response = httpx.get(f"{server.url}/v1/specialists", params={"q": "weather"}, timeout=60)
        assert response.status_code == 503
        assert "missing.yaml" in response.json()["message"]


@pytest.mark.parametrize(
    "content", ["specialists: [[[\n", "specialists: 5\n", "specialists:\n  - id: web_search\n    nothing_else: 1\n"]
)
def test_specialists_with_an_invalid_file_is_503_naming_it(tmp_path, local_embedder, content):
    bad = tmp_path / "bad_specialists.yaml"
    bad.write_text(content)
    settings = api_settings(tmp_path, specialists_path=bad)
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        for params in ({"q": "weather"}, {}):
            response = httpx.get(f"{server.url}/v1/specialists", params=params, timeout=60)
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "not_configured"
            assert "bad_specialists.yaml" in response.json()["message"]


def test_documentation_is_served_without_a_token(live):
    assert live.get("/openapi.json").status_code == 200
