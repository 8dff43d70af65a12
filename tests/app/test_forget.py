"""Forgetting a person (brain.app.forget, Brain.forget_entity, `brain forget`): every document of the
entity's scope gone from Chroma, the mirror and the indexes, and no byte of their text left under the
data directory."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import brain
import brain.store.facade
from brain.app.core import Brain, open_store
from brain.config import Settings
from brain.model.errors import NotFound, ValidationError
from brain.model.schemas import DocType
from brain.shells.cli import cli
from brain.shells.cli.reports import forget_text

# distinctive words: each appears in exactly one document, so a byte search finds it or not
ADA_MEMORY = "Ada is allergic to quinceberries and hates xylophagous beetles"
ADA_TURN_USER = "My secret codeword is zanzibarite, remember it"
ADA_TURN_BOT = "Noted: your codeword is zanzibarite"
ADA_SUMMARY = "Ada shared the codeword zanzibarite and talked about quinceberries"
BOB_MEMORY = "Bob collects vintage orreries from Ljubljana"
BOB_TURN_USER = "I polished the brass orrery yesterday"
FORGOTTEN_WORDS = ["quinceberries", "xylophagous", "zanzibarite"]
KEPT_WORDS = ["orreries", "Ljubljana", "orrery"]


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


def files_holding(path: Path, word: str) -> list[str]:
    """Files under ``path`` whose bytes contain ``word`` in any case (UTF-8)."""
    needle = word.lower().encode()
    return [str(p) for p in files_under(path) if needle in p.read_bytes().lower()]


def seed(b: Brain) -> dict[str, str]:
    """Ada's memory, conversation and summary; Bob's memory and conversation; one global memory."""
    store = b.store
    ids = {
        "ada_memory": store.upsert_memory(ADA_MEMORY, entity="ada", importance=4, tags=["health"]),
        "bob_memory": store.upsert_memory(BOB_MEMORY, entity="bob"),
        "global": store.upsert_memory("The office closes at six on Fridays"),
    }
    ids["ada_turns"] = store.upsert_turn("conv-ada1", ADA_TURN_USER, ADA_TURN_BOT, scope="entity:ada")
    ids["bob_turns"] = store.upsert_turn("conv-bob1", BOB_TURN_USER, "Shiny!", scope="entity:bob")
    ids["ada_summary"] = store.upsert_summary("conv-ada1", ADA_SUMMARY, turn_range="1-2", scope="entity:ada")
    return ids


@pytest.fixture
def opened(settings, local_embedder):
    b = brain.open(settings, embedder=local_embedder, start_worker=False)
    try:
        yield b
    finally:
        b.close()


def test_forget_reports_counts_and_removes_every_document_of_the_scope(opened):
    ids = seed(opened)
    opened.store.retrieve_memories(
        "quinceberries", entity="ada", relevance=False
    )  # the indexes are built before the forget
    report = opened.forget_entity("ada")
    assert report.entity == "ada"
    assert report.deleted["memory"] == 1 and report.deleted["turn"] == 2 and report.deleted["summary"] == 1
    assert report.total == 4
    assert (
        report.mirror["rows"] == 4
        and report.mirror["vectors"] == 4
        and set(report.mirror) == {"rows", "vectors", "access_log", "content_hashes"}
    )
    assert report.scrubbed["chroma"]["vacuumed"] and report.scrubbed["mirror"]["vacuumed"]
    assert report.to_dict()["deleted"]["memory"] == 1
    store = opened.store
    assert store.get(where={"scope": "entity:ada"}) == []
    assert store.get([ids["ada_memory"], *ids["ada_turns"], ids["ada_summary"]]) == []
    assert {d.id for d in store.get(where={"scope": "entity:bob"})} == {ids["bob_memory"], *ids["bob_turns"]}
    # the in-process indexes followed the delete: nothing of Ada's is ranked, Bob's still is
    assert [h.id for h in store.retrieve_memories("quinceberries allergy", entity="ada", relevance=False)] == [
        ids["global"]
    ]
    assert store.retrieve_memories("vintage orreries", entity="bob", relevance=False)[0].id == ids["bob_memory"]
    assert store.conversation_turns("conv-ada1") == [] and store.conversation_summaries("conv-ada1") == []
    assert [h.id for h in store.retrieve_summaries("zanzibarite codeword")] == []


def test_the_mirror_holds_nothing_of_the_entity(opened):
    ids = seed(opened)
    mirror = opened.require_mirror()
    logged = mirror.footprint([ids["ada_memory"]])["access_log"]
    with sqlite3.connect(mirror.path) as conn:  # engram logs an access when it recalls a memory
        conn.execute("INSERT INTO access_log (memory_id, accessed_at) VALUES (?, 1.0)", (ids["ada_memory"],))
    assert mirror.footprint([ids["ada_memory"]])["access_log"] == logged + 1
    report = opened.forget_entity("ada")
    assert report.mirror["access_log"] >= logged + 1
    gone = [ids["ada_memory"], *ids["ada_turns"], ids["ada_summary"]]
    assert mirror.footprint(gone) == {"rows": 0, "vectors": 0, "access_log": 0, "content_hashes": 0}
    assert mirror.namespace_ids("entity:ada") == []
    assert mirror.get(gone) == []
    assert mirror.keyword_recall("quinceberries", 5) == []
    assert len(mirror.namespace_ids("entity:bob")) == 3
    assert opened.verify_mirror().ok


def test_no_file_under_the_data_dir_holds_the_forgotten_texts(settings, local_embedder):
    with brain.open(settings, embedder=local_embedder, start_worker=False) as b:
        ids = seed(b)
        b.store.update_memory(ids["ada_memory"], importance=5)  # more records of the text in Chroma's queue
        before = {w: files_holding(settings.data_dir, w) for w in FORGOTTEN_WORDS}
        assert all(before.values()), before  # the check can fail: the words were on disk
        b.forget_entity("ada")
        # in the running process already, and after closing
        assert {w: files_holding(settings.data_dir, w) for w in FORGOTTEN_WORDS} == {w: [] for w in FORGOTTEN_WORDS}
    assert {w: files_holding(settings.data_dir, w) for w in FORGOTTEN_WORDS} == {w: [] for w in FORGOTTEN_WORDS}
    for word in KEPT_WORDS:
        assert files_holding(settings.data_dir, word), word
    with brain.open(settings, embedder=local_embedder, start_worker=False) as b:  # reopened: Bob's still there
        assert b.store.retrieve_memories("vintage orreries", entity="bob", relevance=False)[0].id == ids["bob_memory"]
        assert [h.id for h in b.store.retrieve_memories("quinceberries", entity="ada", relevance=False)] == [
            ids["global"]
        ]
        assert b.store.get([ids["ada_memory"]]) == []
        assert len(b.store.conversation_turns("conv-bob1")) == 2
        assert b.verify_mirror().ok
        # the store still takes writes, and Ada may be remembered again from scratch
        again = b.store.upsert_memory("Ada likes tea", entity="ada")
        assert b.store.retrieve_memories("tea", entity="ada", relevance=False)[0].id == again


def test_unknown_or_malformed_entity_changes_nothing(opened):
    seed(opened)
    count = opened.store.count()
    with pytest.raises(NotFound, match="nothing is stored for entity 'carol'"):
        opened.forget_entity("carol")
    for bad in ["", " ada", "a\nb", "x" * 200, None]:
        with pytest.raises(ValidationError, match="entity"):
            opened.forget_entity(bad)
    assert opened.store.count() == count
    opened.forget_entity("ada")
    with pytest.raises(NotFound):  # a second forget finds nothing left
        opened.forget_entity("ada")


def test_a_server_store_is_forgotten_without_touching_files(backend_settings, local_embedder):
    with open_store(backend_settings, embedder=local_embedder) as store:
        b = Brain(store, start_worker=False)
        ids = seed(b)
        report = b.forget_entity("ada")
        assert report.total == 4
        assert store.get([ids["ada_memory"]]) == []
        assert store.count(DocType.MEMORY) == 2
        if backend_settings.chroma_url:
            assert report.scrubbed["chroma"] is None
            assert "Chroma server" in forget_text(report)
        b.close()


# ---- the CLI ---------------------------------------------------------------------------------------


@pytest.fixture
def cli_data(monkeypatch, local_embedder, tmp_path):
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "defaults.env").touch()
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    with brain.open(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, start_worker=False) as b:
        seed(b)
    return tmp_path / "data"


def test_cli_forget_asks_first_and_prints_the_counts(cli_data):
    refused = CliRunner().invoke(cli, ["forget", "--entity", "ada"], input="n\n")
    assert refused.exit_code == 1
    assert files_holding(cli_data, "quinceberries")  # nothing was done
    done = CliRunner().invoke(cli, ["forget", "--entity", "ada"], input="y\n")
    assert done.exit_code == 0, done.stderr
    assert "forgot entity 'ada': 1 memory, 2 turns, 1 summary" in done.stdout
    assert files_holding(cli_data, "quinceberries") == []
    assert files_holding(cli_data, "orreries")


def test_cli_forget_yes_json(cli_data):
    result = CliRunner().invoke(cli, ["--json", "forget", "--entity", "ada", "--yes"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["entity"] == "ada" and data["deleted"]["memory"] == 1 and data["deleted"]["turn"] == 2
    assert data["mirror"]["rows"] == 4


def test_cli_forget_bad_input_is_one_line(cli_data):
    unknown = CliRunner().invoke(cli, ["forget", "--entity", "carol", "--yes"])
    assert unknown.exit_code == 1 and unknown.stderr.startswith("error: nothing is stored for entity 'carol'")
    malformed = CliRunner().invoke(cli, ["forget", "--entity", " ada", "--yes"])
    assert malformed.exit_code == 2 and "entity" in malformed.stderr
    missing = CliRunner().invoke(cli, ["forget", "--yes"])
    assert missing.exit_code == 2
    assert files_holding(cli_data, "quinceberries")


def test_a_forgotten_conversation_id_used_again_starts_afresh(settings, local_embedder):
    from brain.providers.summarizers import ExtractiveSummarizer

    tuned = settings.model_copy(update={"summary_every_n": 1})
    with brain.open(tuned, embedder=local_embedder, summarizer=ExtractiveSummarizer(), start_worker=False) as b:
        b.chat.record_exchange("conv-ada9", ADA_TURN_USER, ADA_TURN_BOT, entity="ada")
        b.chat.wait_for_summaries(60)
        assert len(b.store.conversation_summaries("conv-ada9")) == 1
        report = b.forget_entity("ada")
        assert report.conversations == ["conv-ada9"] and report.deleted["summary"] == 1
        exchange = b.chat.record_exchange("conv-ada9", "hello again", "welcome back", entity="ada")
        b.chat.wait_for_summaries(60)
        assert exchange.user_turn_index == 1  # turn indexes start at 1 again
        summaries = b.store.conversation_summaries("conv-ada9")
        assert [s.metadata["summary_index"] for s in summaries] == [1]
        assert "zanzibarite" not in summaries[0].text
