"""One rule for entity names (:func:`brain.model.schemas.check_name`), enforced by every entry point: the library, the
HTTP API (bodies, queries and the forget path), the CLI, MCP, the tokens file, the Xaibo attributes and the
scopes stored documents carry. A name holding a control or formatting character is refused with a message that
shows it escaped; a name with a ``/`` is a name like any other, forgotten over HTTP too."""

from __future__ import annotations

import re
import unicodedata
from types import SimpleNamespace

from urllib.parse import quote

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

import brain.store.facade
from brain.access.policy import Caller
from brain.access.tokens import TokenTable
from brain.shells.cli import cli
from brain.model.errors import ConfigError, ValidationError
from brain.shells.xaibo.attributes import encode_attributes
from brain.model.schemas import ENTITY_PATTERN, check_name, check_scope, entity_scope, valid_name, validate_metadata
from brain.model.schemas.values import UNPRINTABLE_CLASS

#: each was accepted once, and printed raw by the CLI
BAD = ["\x00", "\x1b[2Jm", "\x7f", "\u2028", "\u202eevil", "evil\u202e", "a\x1b[31mb", "bob\u200b", "\ufeffbob",
       "al\u2066ice", "x\x85y", " bob", "bob ", "", "x" * 129]
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
    assert check_name(name) == name and entity_scope(name) == f"entity:{name}"
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
    for args in (["memory", "list", "--entity", name], ["forget", "--entity", name, "--yes"],
                 ["memory", "add", "x", "--entity", name], ["search", "x", "--entity", name]):
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
        for response in (live.post("/v1/memories", json={"text": "x", "entity": name}),
                         live.get("/v1/memories", params={"entity": name}),
                         live.post("/v1/context", json={"user_message": "x", "entity": name}),
                         live.delete("/v1/entities/" + quote(name, safe=""))):
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
