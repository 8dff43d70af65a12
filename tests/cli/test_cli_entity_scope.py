"""`--entity NAME` means the scope entity:NAME in every `brain` command, and never reaches another entity.

Run in process with click's CliRunner against a real embedded store and the real embedder."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import brain.store.facade
from brain.model.schemas import valid_name
from brain.shells.cli import cli


@pytest.fixture(autouse=True)
def _cli_env(monkeypatch, local_embedder):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)


def brain_json(data_dir: Path, *args: str):
    result = CliRunner().invoke(cli, ["--json", "--data-dir", str(data_dir), *args])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_memory_add_entity_stores_in_the_entity_scope_and_search_keeps_it_there(tmp_path):
    data = tmp_path / "data"
    bob = brain_json(data, "memory", "add", "Bob is allergic to peanuts", "--entity", "bob", "--importance", "5")
    assert bob["metadata"]["scope"] == "entity:bob"
    alice = brain_json(data, "memory", "add", "Alice is allergic to shellfish", "--entity", "alice")
    shared = brain_json(data, "memory", "add", "The family eats dinner at seven")
    assert shared["metadata"]["scope"] == "global"

    hits = brain_json(
        data, "search", "who is allergic to peanuts?", "--type", "memory", "--entity", "alice", "--k", "10"
    )
    assert {h["id"] for h in hits["results"]} == {alice["id"]}  # never Bob's; dinner at seven is not relevant
    for_bob = brain_json(data, "search", "who is allergic to peanuts?", "--type", "memory", "--entity", "bob")
    assert for_bob["results"][0]["id"] == bob["id"]

    # list for an entity: its own and the global ones, as every shell lists them; --scope is one scope exactly
    assert {d["id"] for d in brain_json(data, "memory", "list", "--entity", "alice")} == {alice["id"], shared["id"]}
    assert [d["id"] for d in brain_json(data, "memory", "list", "--scope", "entity:bob")] == [bob["id"]]
    assert [d["id"] for d in brain_json(data, "memory", "list", "--scope", "global")] == [shared["id"]]
    assert len(brain_json(data, "memory", "list")) == 3


_WORDS = ["peanuts", "tea", "train", "Porto", "allergic", "likes", "dinner", "passport", "piano", "Sunday"]
_texts = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join)
# entity names the scope rule accepts, including near-misses of each other (case, punctuation, spaces inside)
_names = st.sampled_from(["alice", "Alice", "alice ", "bob", "Bob", "b o b", "bob:2", "alice/x", "ålice", "bob-alice"])
_writes = st.lists(st.tuples(_texts, st.one_of(st.none(), _names), st.integers(1, 5)), min_size=1, max_size=6)


@pytest.mark.slow
@hypothesis_settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=_writes, reader=_names, query=_texts)
def test_no_command_with_entity_returns_another_entitys_memory(writes, reader, query):
    """Whatever is written with --entity for other entities (or globally), every command run with
    --entity READER returns only READER's memories and global ones."""
    reader = valid_name(reader.strip() or "alice")  # every spelling of a name is its one canonical form
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        others: set[str] = set()
        for text, owner, importance in writes:
            owner = owner.strip() if owner else None
            canonical = valid_name(owner) if owner else None
            args = ["memory", "add", text, "--importance", str(importance)]
            if owner:
                args.append(f"--entity={owner}")
            doc = brain_json(data, *args)
            assert doc["metadata"]["scope"] == (f"entity:{canonical}" if owner else "global")
            if owner and canonical != reader:
                others.add(doc["id"])
        mine = brain_json(data, "memory", "add", query, f"--entity={reader}")
        assert mine["id"] not in others and mine["metadata"]["scope"] == f"entity:{reader}"

        listed = brain_json(data, "memory", "list", f"--entity={reader}")
        searched = brain_json(data, "search", query, "--type", "memory", f"--entity={reader}", "--k", "50")["results"]
        for doc in listed + searched:
            assert doc["id"] not in others
            assert doc["metadata"]["scope"] in ("global", f"entity:{reader}")
        assert f"entity:{reader}" in {d["metadata"]["scope"] for d in listed}
