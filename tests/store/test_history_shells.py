"""Supersede, history and ``as_of`` through the shells: HTTP with entity-bound tokens, and the CLI."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.providers.summarizers import ExtractiveSummarizer
from brain.shells.api import create_app
from brain.shells.cli import cli
from tests.conftest import LiveServer, api_settings

ADMIN = "admin-token-0123456789abcdef"
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}
CHANGED = "2100-01-01T00:00:00+00:00"  # the change lies ahead, so every time before it is "before"
BEFORE = "2099-06-01T00:00:00+00:00"


@pytest.fixture
def served(tmp_path, local_embedder):
    path = tmp_path / "tokens"
    path.write_text("".join(f"{who} {token}\n" for who, token in TOKENS.items()))
    settings = api_settings(tmp_path, api_token=ADMIN, api_tokens_file=path, summarizer="extractive")
    with open_store(settings, embedder=local_embedder) as store:
        chat = ChatMemory(store, settings, summarizer=ExtractiveSummarizer(), start_worker=False)
        try:
            with LiveServer(create_app(settings, store=store, chat=chat)) as server:
                clients = {
                    who: httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {token}"})
                    for who, token in {"admin": ADMIN, **TOKENS}.items()
                }
                yield store, clients
                for client in clients.values():
                    client.close()
        finally:
            chat.close()


def _created(response: httpx.Response) -> dict:
    assert response.status_code == 201, response.text
    return response.json()


def test_supersede_history_and_as_of_over_http(served):
    store, clients = served
    alice = clients["alice"]
    old = _created(alice.post("/v1/memories", json={"text": "Alice lives in Paris", "importance": 4}))
    done = _created(
        alice.post(
            f"/v1/memories/{old['id']}/supersede",
            json={"text": "Alice lives in Berlin", "kind": "contradict", "at": CHANGED},
        )
    )
    assert done["kind"] == "contradict" and done["mirror_status"] == "ok"
    assert done["old"]["metadata"]["status"] == "superseded" and done["old"]["metadata"]["valid_until"] == CHANGED
    new = done["new"]
    assert new["metadata"]["supersedes"] == old["id"] and new["metadata"]["scope"] == "entity:alice"
    assert new["metadata"]["importance"] == 4 and new["metadata"]["change"] == "contradict"
    history = alice.get(f"/v1/memories/{old['id']}/history").json()
    assert history["id"] == old["id"]
    assert [m["text"] for m in history["history"]] == ["Alice lives in Paris", "Alice lives in Berlin"]
    now = alice.get("/v1/memories/search", params={"q": "where does Alice live"}).json()["results"]
    assert [h["id"] for h in now] == [new["id"]]
    then = alice.get("/v1/memories/search", params={"q": "where does Alice live", "as_of": BEFORE}).json()
    assert [h["id"] for h in then["results"]] == [old["id"]]
    bad = alice.get("/v1/memories/search", params={"q": "where", "as_of": "yesterday"})
    assert bad.status_code == 422 and "as_of" in bad.json()["message"]
    again = alice.post(f"/v1/memories/{old['id']}/supersede", json={"text": "Alice lives in Rome"})
    assert (
        again.status_code == 409
        and again.json()["error"] == "conflict"
        and "superseded already" in again.json()["message"]
    )
    assert alice.post(f"/v1/memories/{new['id']}/supersede", json={"text": "x", "kind": "guess"}).status_code == 422
    # a chain field is never set through metadata
    sneaky = alice.patch(f"/v1/memories/{new['id']}", json={"metadata": {"superseded_by": old["id"]}})
    assert sneaky.status_code == 422 and "superseded_by" in sneaky.text
    expiring = _created(
        alice.post(
            "/v1/memories", json={"text": "Alice's parcel arrives today", "expires_at": "2020-01-01T00:00:00+00:00"}
        )
    )
    assert expiring["metadata"]["expires_at"] == "2020-01-01T00:00:00+00:00"
    found = alice.get("/v1/memories/search", params={"q": "parcel arrives"}).json()["results"]
    assert expiring["id"] not in {h["id"] for h in found}
    assert len(store.get(type="memory")) == 3


def test_an_entity_bound_token_never_reaches_another_entitys_chain(served):
    store, clients = served
    alice, bob, admin = clients["alice"], clients["bob"], clients["admin"]
    theirs = _created(bob.post("/v1/memories", json={"text": "Bob lives in Oslo"}))
    changed = _created(bob.post(f"/v1/memories/{theirs['id']}/supersede", json={"text": "Bob lives in Bergen"}))
    shared = _created(admin.post("/v1/memories", json={"text": "The office opens at nine"}))
    before = {d.id: d.to_dict() for d in store.get(type="memory")}
    for doc_id in (theirs["id"], changed["new"]["id"]):
        hidden = alice.get(f"/v1/memories/{doc_id}/history")
        assert hidden.status_code == 404 and "Bergen" not in hidden.text and "Oslo" not in hidden.text
        refused = alice.post(f"/v1/memories/{doc_id}/supersede", json={"text": "Bob moved away"})
        assert refused.status_code == 404
    assert (
        alice.post(f"/v1/memories/{shared['id']}/supersede", json={"text": "The office opens at ten"}).status_code
        == 403
    )
    named = alice.get(f"/v1/memories/{theirs['id']}/history", params={"entity": "bob"})
    assert named.status_code == 403 and "bound to entity 'alice'" in named.text
    assert (
        alice.post(
            f"/v1/memories/{theirs['id']}/supersede", params={"entity": "bob"}, json={"text": "Bob moved away"}
        ).status_code
        == 403
    )
    # what Bob held before never reaches Alice's search of the past either
    past = alice.get("/v1/memories/search", params={"q": "where does Bob live", "as_of": BEFORE}).json()
    assert {h["id"] for h in past["results"]} <= {shared["id"]}
    assert {d.id: d.to_dict() for d in store.get(type="memory")} == before
    # the admin reads any chain; Bob his own
    assert [m["id"] for m in admin.get(f"/v1/memories/{theirs['id']}/history").json()["history"]] == [
        theirs["id"],
        changed["new"]["id"],
    ]
    assert bob.get(f"/v1/memories/{changed['new']['id']}/history").status_code == 200


def test_the_cli_supersedes_and_shows_the_history(tmp_path):
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path / "data")]
    added = runner.invoke(cli, ["--json", *base, "memory", "add", "Ada works at the bakery", "--entity", "ada"])
    assert added.exit_code == 0, added.output
    old_id = json.loads(added.stdout)["id"]
    done = runner.invoke(
        cli,
        [
            "--json",
            *base,
            "memory",
            "supersede",
            old_id,
            "Ada works at the library",
            "--kind",
            "update",
            "--at",
            CHANGED,
            "--entity",
            "ada",
        ],
    )
    assert done.exit_code == 0, done.output
    new_id = json.loads(done.stdout)["new"]["id"]
    shown = runner.invoke(cli, [*base, "memory", "history", new_id])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.strip().splitlines()
    assert len(lines) == 2 and "bakery" in lines[0] and f".. {CHANGED}" in lines[0]
    assert "library" in lines[1] and ".. now  (update)" in lines[1]
    listed = runner.invoke(cli, ["--json", *base, "memory", "history", old_id])
    assert [d["id"] for d in json.loads(listed.stdout)] == [old_id, new_id]
    refused = runner.invoke(cli, [*base, "memory", "supersede", new_id, "Ada works at the mill", "--entity", "bob"])
    assert refused.exit_code == 1 and f"no memory with id '{new_id}'" in refused.output  # bob's view: none
    hidden = runner.invoke(cli, [*base, "memory", "history", new_id, "--entity", "bob"])
    assert hidden.exit_code == 1 and "no memory with id" in hidden.output
    then = runner.invoke(
        cli,
        ["--json", *base, "search", "where does Ada work", "--type", "memory", "--entity", "ada", "--as-of", BEFORE],
    )
    assert then.exit_code == 0, then.output
    assert [h["id"] for h in json.loads(then.stdout)["results"]] == [old_id]
    wrong = runner.invoke(cli, [*base, "search", "Ada", "--as-of", BEFORE])
    assert wrong.exit_code == 2 and "--type memory" in wrong.output
