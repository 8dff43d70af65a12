"""The served client is derived from the local operations: a call is the method's name and arguments, sent to
the one route that runs the same method, so each operation answers a caller beside a server exactly as it
answers a caller on the store, under the same rules, with no client code of its own."""

from __future__ import annotations

import httpx
import pytest

from brain.model.errors import Forbidden, NotFound, ValidationError
from brain.ops import Caller
from brain.ops.served import OPERATION_PATH
from brain.shells.api.routes.operations import CallerSent, narrowed
from tests.conftest import local_and_served


@pytest.fixture(scope="module")
def both(tmp_path_factory, local_embedder):
    with local_and_served(tmp_path_factory.mktemp("derived"), local_embedder) as (_, local, served, url):
        local.memories.add("Ana is allergic to peanuts", entity="ana", importance=5, tags=["health"])
        local.memories.add("Ana lives in Porto", entity="ana", tags=["home"])
        local.memories.add("Bo plays the cello", entity="bo", tags=["music"])
        local.memories.add("The office closes at six", tags=["office"])
        yield local, served, url


def test_the_same_call_gives_the_same_answer_on_both_paths(both):
    local, served, _ = both
    assert local.memories.list(entity="ana") == served.memories.list(entity="ana")
    a, b = local.memories.search("peanut allergy", entity="ana"), served.memories.search("peanut allergy", entity="ana")
    assert [h.id for h in a] == [h.id for h in b] and a[0].score == pytest.approx(b[0].score)
    context_a = local.conversations.context(None, "what should I cook for Ana?", entity="ana")
    context_b = served.conversations.context(None, "what should I cook for Ana?", entity="ana")
    assert context_a.prompt == context_b.prompt and "peanuts" in context_a.prompt
    assert [i.id for i in context_a.memory] == [i.id for i in context_b.memory]
    assert local.specialists.list() == served.specialists.list()


def test_count_matches_the_listing_on_both_paths(both):
    local, served, _ = both
    for ops in (local, served):
        assert ops.memories.count() == len(ops.memories.list()) == 4
        assert ops.memories.count(entity="ana") == 3  # her own two and the global one
        assert ops.memories.count(scope="entity:ana") == 2
        assert ops.memories.count(entity="ana", tags=["health"]) == 1
        assert ops.memories.count(entity="bo", tags=["health"]) == 0


def test_a_count_after_a_supersession_counts_the_current_memories_unless_history(both):
    local, served, _ = both
    old = local.memories.add("Bo plays the viola", entity="bo")
    local.memories.supersede(old.id, "Bo plays the double bass", entity="bo")
    try:
        for ops in (local, served):
            assert ops.memories.count(scope="entity:bo") == 2
            assert ops.memories.count(scope="entity:bo", history=True) == 3
            assert ops.memories.count(scope="entity:bo", status=["superseded"]) == 1
    finally:
        bo = local.memories.list(scope="entity:bo", history=True)
        local.memories.delete([d.id for d in bo if "cello" not in d.text])


def test_a_bound_caller_is_narrowed_on_the_server_as_on_the_store(both):
    local, served, _ = both
    for ops in (local.bound_to(Caller("ana")), served.bound_to(Caller("ana", "MCP server started with --entity"))):
        assert ops.memories.count() == 3  # her own and the global one, never Bo's
        with pytest.raises(Forbidden) as refused:
            ops.memories.count(entity="bo")
        assert "'bo'" in str(refused.value)
        with pytest.raises(Forbidden):
            ops.documents.write([{"type": "faq", "text": "q? a."}])
        # the store's figures and a mirror verify (which reads the store whole) are the admin's alone
        health = ops.maintenance.health(detail=True, verify=True)
        assert "counts" not in health and "verify" not in (health.get("mirror") or {})
    admin_health = served.maintenance.health(detail=True, verify=True)
    assert "counts" in admin_health and "verify" in admin_health["mirror"]


def test_the_caller_sent_narrows_the_tokens_and_never_widens_it(both):
    _, _, url = both
    ana_only = Caller("ana")
    assert narrowed(ana_only, None) == ana_only
    assert narrowed(ana_only, CallerSent(entity="Ana")) == ana_only
    with pytest.raises(Forbidden):
        narrowed(ana_only, CallerSent(entity="bo"))
    admin_narrowed = narrowed(Caller(), CallerSent(entity="bo", bound_by="CLI"))
    assert admin_narrowed == Caller("bo", "CLI")
    assert httpx.post(url + OPERATION_PATH.format(noun="memories", name="count"), json={}).status_code == 200


def test_an_unknown_operation_or_a_bad_argument_is_named(both):
    _, served, url = both
    answer = httpx.post(url + OPERATION_PATH.format(noun="memories", name="drop_all"), json={})
    assert answer.status_code == 404 and "memories.drop_all" in answer.json()["message"]
    private = httpx.post(url + OPERATION_PATH.format(noun="memories", name="_listed_scopes"), json={})
    assert private.status_code == 404
    with pytest.raises(ValidationError) as bad:
        served.link.request(
            "POST", OPERATION_PATH.format(noun="memories", name="count"), json={"args": {"tags": 3, "colour": "red"}}
        )
    fields = {p.field for p in bad.value.problems}
    assert fields == {"args.tags", "args.colour"}
    with pytest.raises(ValidationError) as missing:
        served.link.request("POST", OPERATION_PATH.format(noun="memories", name="get"), json={"args": {}})
    assert [p.field for p in missing.value.problems] == ["args.memory_id"]
    with pytest.raises(NotFound):
        served.memories.get("mem-none")
