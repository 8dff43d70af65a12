"""One rule for entity names (:func:`brain.model.schemas.check_name`), enforced by every entry point: the library, the
HTTP API (bodies, queries and the forget path), the CLI, MCP, the tokens file, the Xaibo attributes and the
scopes stored documents carry. A name holding a control or formatting character is refused with a message that
shows it escaped; a name with a ``/`` is a name like any other, forgotten over HTTP too. A name has one
canonical form (NFKC, case-folded): ``Alice``, ``ALICE`` and fullwidth ``ａｌｉｃｅ`` are ``alice`` everywhere,
and a name holding a scope prefix or looking like a path is refused."""

from __future__ import annotations

import re
import unicodedata
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import brain.store.facade
from brain.access.policy import Caller
from brain.model.errors import ConfigError, Forbidden, ValidationError
from brain.model.schemas import ENTITY_PATTERN, check_name, check_scope, entity_scope, valid_name, validate_metadata
from brain.model.schemas.values import UNPRINTABLE_CLASS, canonical_name
from brain.shells.cli import cli
from brain.shells.web.tokens import TokenTable
from brain.shells.xaibo.attributes import encode_attributes
from brain.store.indexes import refresh_index

#: each was accepted once, and printed raw by the CLI
BAD = [
    "\x00",
    "\x1b[2Jm",
    "\x7f",
    "\u2028",
    "\u202eevil",
    "evil\u202e",
    "a\x1b[31mb",
    "bob\u200b",
    "\ufeffbob",
    "al\u2066ice",
    "x\x85y",
    " bob",
    "bob ",
    "",
    "x" * 129,
]
GOOD = ["alice", "Mary Ann", "a/b", "team/ops", "Zoë", "李雷", "o'brien", "x" * 128, "🙂"]
FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


@pytest.mark.parametrize("name", BAD)
def test_every_library_check_refuses_a_bad_name(name):
    with pytest.raises(ValueError):
        check_name(name)
    with pytest.raises(ValueError):
        entity_scope(name)
    with pytest.raises(ValueError):
        check_scope(f"entity:{name}")
    with pytest.raises(ValidationError):
        valid_name(name)
    with pytest.raises(ValidationError):
        validate_metadata("memory", {"timestamp": "2026-01-01T00:00:00Z", "entity": name})
    with pytest.raises(ValidationError):
        Caller().acting_as(name)
    assert re.fullmatch(ENTITY_PATTERN, name) is None


@pytest.mark.parametrize("name", GOOD)
def test_good_names_pass_everywhere(name):
    assert check_name(name) == canonical_name(name) and entity_scope(name) == f"entity:{canonical_name(name)}"
    assert re.fullmatch(ENTITY_PATTERN, name)


@given(st.characters(codec="utf-8") | st.characters(categories=["Cc", "Cf", "Zl", "Zp"]))
def test_the_rule_is_the_unicode_categories_it_names(char):
    refused = unicodedata.category(char) in FORBIDDEN_CATEGORIES
    assert (re.fullmatch(f"[{UNPRINTABLE_CLASS}]", char) is not None) == refused
    assert (re.fullmatch(ENTITY_PATTERN, f"a{char}b") is None) == refused


@pytest.mark.parametrize("name", ["\x1b[2Jm", "\u202eevil"])
def test_the_message_shows_the_name_escaped(name):
    with pytest.raises(ValueError) as caught:
        check_name(name)
    message = str(caught.value)
    assert name not in message and repr(name) in message and "U+" in message


def test_the_tokens_file_the_xaibo_attributes_and_stored_scopes_keep_the_rule(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("bob\u202e alice-token-0123456789abcdef\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="U\\+202E"):
        TokenTable.from_settings(SimpleNamespace(api_token=None, api_tokens_file=tokens))
    # a bad name is no entity: kept as a plain attribute, never made a scope
    assert encode_attributes({"entity": "\x1b[2J"}, "global").fields == {}
    assert encode_attributes({"entity": "bob"}, "entity:bob").fields == {"entity": "bob"}


@pytest.fixture
def cli_embedder(monkeypatch, local_embedder):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)


@pytest.mark.parametrize("name", ["\x1b[2Jm", "\x7f", "\u202eevil", "\x00"])
def test_the_cli_refuses_and_never_prints_a_raw_control_sequence(tmp_path, cli_embedder, name):
    for args in (
        ["memory", "list", "--entity", name],
        ["forget", "--entity", name, "--yes"],
        ["memory", "add", "x", "--entity", name],
        ["search", "x", "--entity", name],
    ):
        result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *args])
        assert result.exit_code == 2, (args, result.output)
        assert name not in result.output and "not a valid entity name" in result.output


def test_http_creates_and_forgets_a_name_with_a_slash_and_refuses_bad_ones(live, api_store):
    for name in ("team/ops", "a/b/c"):
        created = live.post("/v1/memories", json={"text": f"{name} meets on Mondays", "entity": name})
        assert created.status_code == 201, created.text
        forgotten = live.delete(f"/v1/entities/{name.replace('/', '%2F')}")
        assert forgotten.status_code == 200, forgotten.text
        assert forgotten.json()["deleted"]["memory"] == 1
        assert live.delete(f"/v1/entities/{name}").status_code == 404  # nothing left of it
    assert api_store.count() == 0
    for name in ("\x1b[2Jm", "\u202eevil", "\x7f"):
        for response in (
            live.post("/v1/memories", json={"text": "x", "entity": name}),
            live.get("/v1/memories", params={"entity": name}),
            live.post("/v1/context", json={"user_message": "x", "entity": name}),
            live.delete("/v1/entities/" + quote(name, safe="")),
        ):
            assert response.status_code == 422, response.text
            assert name not in response.text
    assert api_store.count() == 0


def test_mcp_refuses_a_bad_pinned_entity(tmp_path, local_embedder):
    import brain as brain_package
    from brain.config import Settings
    from brain.shells.mcp.server import create_server

    with brain_package.open(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, start_worker=False) as b:
        with pytest.raises(ValidationError, match="U\\+001B"):
            create_server(b, entity="\x1b[2Jm")


# ---- one canonical form ---------------------------------------------------------------------------

ALICE_FORMS = ["alice", "Alice", "ALICE", "\uff41\uff4c\uff49\uff43\uff45", "\uff21lice"]  # fullwidth too
#: look-alikes of bob that must never be a way to reach bob (nor another entity of their own)
REFUSED = [
    "entity:bob",
    "Entity:bob",
    "entity:entity:bob",
    "../bob",
    "./bob",
    "/",
    "/bob",
    "bob/",
    "a//b",
    "..",
    "\\bob",
    "bo\\b",
    "bob\x00",
    "\x00",
    "b\u202eob",
]


@pytest.mark.parametrize("name", ALICE_FORMS)
def test_every_spelling_of_a_name_is_its_one_canonical_form(name):
    assert check_name(name) == "alice" and valid_name(name) == "alice"
    assert entity_scope(name) == check_scope(f"entity:{name}") == "entity:alice"
    assert validate_metadata("memory", {"timestamp": "2026-01-01T00:00:00Z", "entity": name}).scope == "entity:alice"
    assert Caller("alice").acting_as(name) == "alice"
    assert check_name("\uff42\uff4f\uff42") == "bob"  # fullwidth


@pytest.mark.parametrize("name", REFUSED)
def test_a_scope_prefix_a_path_or_a_control_character_is_refused(name):
    with pytest.raises(ValueError) as caught:
        check_name(name)
    assert repr(name[:40]) in str(caught.value)
    with pytest.raises(ValidationError):
        Caller().acting_as(name)
    with pytest.raises(ValueError):
        check_scope(f"entity:{name}")


def test_the_scope_prefix_message_says_what_to_give():
    with pytest.raises(ValueError, match="scope prefix 'entity:'; give the name alone \\(e.g. 'bob'\\)"):
        check_name("entity:bob")


def test_a_token_bound_to_alice_acts_for_every_spelling_of_alice_and_never_for_bob():
    alice = Caller("alice")
    for name in ALICE_FORMS:
        assert alice.acting_as(name) == "alice"
    for name in ("bob", "Bob", "BOB", "\uff42\uff4f\uff42"):
        with pytest.raises(Forbidden):
            alice.acting_as(name)
    for name in REFUSED:
        with pytest.raises(ValidationError):
            alice.acting_as(name)


def test_the_tokens_file_takes_names_in_their_canonical_form_only(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("Alice alice-token-0123456789abcdef\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'Alice' is 'alice' in its canonical form"):
        TokenTable.from_settings(SimpleNamespace(api_token=None, api_tokens_file=tokens))
    tokens.write_text("alice alice-token-0123456789abcdef\n", encoding="utf-8")
    TokenTable.from_settings(SimpleNamespace(api_token=None, api_tokens_file=tokens))


def test_the_library_reads_and_writes_one_entity_whatever_the_spelling(tmp_path, local_embedder):
    import brain as brain_package
    from brain.config import Settings

    with brain_package.open(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, start_worker=False) as b:
        b.chat.remember("Alice is allergic to peanuts", importance=5, entity="Alice")
        b.store.upsert_memory("Bob supports FC Porto", scope="entity:BOB")
        assert {d.metadata["scope"] for d in b.store.get(type="memory")} == {"entity:alice", "entity:bob"}
        for name in ALICE_FORMS:
            hits = b.store.retrieve_memories("allergies", k=5, entity=name, relevance=False)
            assert [h.text for h in hits] == ["Alice is allergic to peanuts"], name
            context = b.chat.build_context(None, "Can I eat peanut butter?", entity=name)
            assert [m.text for m in context.memory] == ["Alice is allergic to peanuts"]
            assert "Porto" not in context.prompt
        b.chat.remember("Alice is allergic to peanuts", importance=3, entity="ＡＬＩＣＥ")  # the same memory
        assert b.store.count("memory") == 2
        for name in REFUSED:
            with pytest.raises(ValidationError):
                b.chat.remember("not stored", entity=name)
        assert b.store.count("memory") == 2


def test_a_row_stored_under_another_form_of_a_name_reaches_nobody(embedded_store):
    """Stored before names were canonical ('Bob' was not 'bob'): ranked for neither, so two people once
    told apart by case never see each other's memories."""
    doc_id = embedded_store.upsert_memory("bob keeps bees", scope="entity:bob")
    stored = embedded_store.col.get(ids=[doc_id], include=["metadatas"])["metadatas"][0]
    embedded_store.col.upsert(
        ids=["legacy-Bob"],
        documents=["Bob keeps wasps"],
        embeddings=[embedded_store.embedder.embed_documents(["Bob keeps wasps"])[0]],
        metadatas=[{**stored, "scope": "entity:Bob"}],
    )
    refresh_index(embedded_store)
    hits = embedded_store.retrieve_memories(
        "who keeps wasps or bees?", k=5, entity="bob", all_scopes=False, relevance=False
    )
    assert [h.text for h in hits] == ["bob keeps bees"]


def test_http_reads_and_writes_one_entity_and_a_bound_token_never_reaches_bob(tmp_path, local_embedder):
    import httpx

    from brain.app.core import open_store
    from brain.shells.api import create_app
    from tests.conftest import LiveServer, api_settings

    admin, alice_token = "admin-token-0123456789abcdef", "alice-token-0123456789abcdef"
    path = tmp_path / "tokens"
    path.write_text(f"alice {alice_token}\n", encoding="utf-8")
    settings = api_settings(tmp_path, api_token=admin, api_tokens_file=path)
    with (
        open_store(settings, embedder=local_embedder) as store,
        LiveServer(create_app(settings, store=store)) as server,
    ):
        as_admin = httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {admin}"})
        as_alice = httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {alice_token}"})
        with as_admin, as_alice:
            created = as_admin.post("/v1/memories", json={"text": "Alice is allergic to peanuts", "entity": "Alice"})
            assert created.status_code == 201 and created.json()["metadata"]["scope"] == "entity:alice"
            assert as_admin.post("/v1/memories", json={"text": "Bob's PIN is 4711", "entity": "bob"}).status_code == 201
            for name in ALICE_FORMS:
                for client in (as_admin, as_alice):
                    listed = client.get("/v1/memories", params={"entity": name})
                    assert listed.status_code == 200 and "peanuts" in listed.text and "4711" not in listed.text
                    context = client.post(
                        "/v1/context", json={"user_message": "Can I eat peanut butter?", "entity": name}
                    )
                    assert context.status_code == 200 and "peanuts" in context.json()["prompt"], name
            for name in ["bob", "Bob", "BOB", "\uff42\uff4f\uff42", *REFUSED]:
                for response in (
                    as_alice.get("/v1/memories", params={"entity": name}),
                    as_alice.post("/v1/context", json={"user_message": "What is Bob's PIN?", "entity": name}),
                    as_alice.post("/v1/memories", json={"text": "written as bob", "entity": name}),
                ):
                    assert response.status_code in (403, 422), (name, response.text)
                    assert "4711" not in response.text
                refused = as_admin.post("/v1/memories", json={"text": "x", "entity": name})
                assert refused.status_code == (201 if name.casefold() == "bob" or name.startswith("\uff42") else 422)
            scopes = {d["metadata"]["scope"] for d in as_admin.get("/v1/memories").json()["memories"]}
            assert scopes == {"entity:alice", "entity:bob"}


def test_mcp_pinned_to_a_spelling_of_alice_serves_alice(tmp_path, local_embedder):
    import brain as brain_package
    from brain.config import Settings
    from brain.shells.mcp.server import create_server, request_caller

    with brain_package.open(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, start_worker=False) as b:
        create_server(b, entity="ＡＬＩＣＥ")  # fullwidth capitals: alice
        assert request_caller(None, "alice").entity == "alice"


def test_a_store_written_before_names_were_canonical_moves_each_name_once_and_never_merges_two(
    tmp_path, local_embedder
):
    """Rows under 'entity:Alice' (names were case-sensitive) move to 'entity:alice' at the next open, mirror
    included, when nothing else is 'alice'; 'Bob' and 'bob', two spellings in use, are left apart."""
    from brain.app.core import open_store
    from brain.config import Settings
    from brain.store.migrations import NAMES_MIGRATED_KEY

    settings = Settings(data_dir=tmp_path / "data")
    with open_store(settings, embedder=local_embedder) as store:
        template = store.col.get(ids=[store.upsert_memory("seed", scope="entity:carol")], include=["metadatas"])[
            "metadatas"
        ][0]
        legacy = {
            "old-alice": ("Alice is allergic to peanuts", "entity:Alice"),
            "old-alice-2": ("Alice lives in Porto", "entity:Alice"),
            "old-Bob": ("Bob keeps wasps", "entity:Bob"),
            "old-bob": ("bob keeps bees", "entity:bob"),
        }
        texts = [t for t, _ in legacy.values()]
        store.col.upsert(
            ids=list(legacy),
            documents=texts,
            embeddings=list(local_embedder.embed_documents(texts)),
            metadatas=[
                {**template, "scope": scope, "entity": scope.removeprefix("entity:")} for _, scope in legacy.values()
            ],
        )
        store.mirror.upsert(
            {
                "id": i,
                "text": t,
                "metadata": {**template, "scope": s},
                "embedding": local_embedder.embed_documents([t])[0],
            }
            for i, (t, s) in legacy.items()
        )
        store.col.modify(metadata={k: v for k, v in store.col.metadata.items() if k != NAMES_MIGRATED_KEY})
    with open_store(settings, embedder=local_embedder) as store:
        got = store.col.get(ids=list(legacy), include=["metadatas"])
        scopes = {i: m["scope"] for i, m in zip(got["ids"], got["metadatas"])}
        assert scopes == {
            "old-alice": "entity:alice",
            "old-alice-2": "entity:alice",
            "old-Bob": "entity:Bob",
            "old-bob": "entity:bob",
        }
        assert store.get_one("old-alice").metadata["entity"] == "alice"
        hits = store.retrieve_memories("allergies", k=5, entity="ALICE", relevance=False)
        assert {h.id for h in hits} >= {"old-alice", "old-alice-2"}
        assert [d.metadata["scope"] for d in store.mirror.get(["old-alice"])] == ["entity:alice"]
        # the two spellings of bob stay apart: the one already canonical is bob's, the other nobody's
        assert {
            h.id
            for h in store.retrieve_memories("who keeps wasps?", k=5, entity="bob", relevance=False)
            if h.id.startswith("old-")
        } == {"old-bob"}
        assert store.col.metadata[NAMES_MIGRATED_KEY] == 1
