"""Disaster recovery: Chroma is lost, the mirror and the files bring everything back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.app.restore import recover_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.features.mirror import verify_mirror

TYPES = ("memory", "turn", "summary", "persona", "faq")
PERSONA = "# Tone\nWarm and brief.\n\n# Values\nHonest about what it does not know.\n"
FAQ = "Q: When are you open?\nA: From nine to five on weekdays.\n\nQ: Do you deliver?\nA: Within the city, yes.\n"


def lose_chroma(settings: Settings) -> None:
    """Delete the Chroma directory, keeping data/mirror.db. chromadb keeps one client per path in a
    process: it is dropped too, so the next store opens the directory afresh, as a new process would."""
    from chromadb.api.client import SharedSystemClient

    shutil.rmtree(settings.data_dir / "chroma")
    SharedSystemClient.clear_system_cache()


def everything(store: RagStore) -> dict[str, tuple]:
    """Every document: id -> (type, text, metadata, vector)."""
    return {
        d.id: (t, d.text, d.metadata, d.embedding) for t in TYPES for d in store.get(type=t, include_embeddings=True)
    }


def assert_same(got: dict[str, tuple], expected: dict[str, tuple]) -> None:
    assert {k: v[:3] for k, v in got.items()} == {k: v[:3] for k, v in expected.items()}
    for key, value in expected.items():
        np.testing.assert_allclose(got[key][3], value[3], rtol=0, atol=1e-6)  # Chroma's last-place rounding


@pytest.fixture
def world(tmp_path, local_embedder):
    """A store with memories, two conversations (turns and summaries), a persona and a knowledge base;
    returns its settings and a snapshot of every document."""
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "faq.md").write_text(FAQ, encoding="utf-8")
    settings = Settings(
        data_dir=tmp_path / "data", persona_path=tmp_path / "persona.md", summarizer="extractive", summary_every_n=1
    )
    from brain.features.ingest import ingest_paths
    from brain.features.persona import load_persona

    with open_store(settings, embedder=local_embedder) as store, ChatMemory(store, settings) as chat:
        load_persona(store, settings.persona_path)
        ingest_paths(store, [tmp_path / "kb"])
        chat.remember("Alice is allergic to peanuts", importance=5, tags=["health"], entity="alice")
        chat.remember("The office closes early on Fridays", importance=2)
        first = chat.record_exchange(None, "What should I cook for Alice?", "Nothing with peanuts.", entity="alice")
        chat.record_exchange(first.conversation_id, "And for dessert?", "Fruit salad.", entity="alice")
        chat.record_exchange(None, "Is the office open on Friday?", "Until three.")
        assert chat.wait_for_summaries(60)
        before = everything(store)
    kinds = [v[0] for v in before.values()]
    assert kinds.count("turn") == 6 and kinds.count("summary") == 3 and kinds.count("memory") == 2
    assert kinds.count("persona") == 2 and kinds.count("faq") == 2
    return settings, before


def test_restore_brings_back_memories_conversations_persona_and_faq(world, tmp_path, local_embedder):
    settings, before = world
    lose_chroma(settings)
    with open_store(settings, embedder=local_embedder) as store:
        assert store.count() == 0
        report = recover_store(store, kb_paths=[tmp_path / "kb"])
        assert report.mirror.by_type == {"memory": 2, "summary": 3, "turn": 6}
        assert report.mirror.embedded == 0 and report.mirror.skipped == []
        assert report.persona["sections"] == 2 and report.knowledge_base["added"] == 2
        assert report.not_restored == []
        after = everything(store)
        assert_same(
            {k: v for k, v in after.items() if v[0] in ("memory", "turn", "summary")},
            {k: v for k, v in before.items() if v[0] in ("memory", "turn", "summary")},
        )
        # persona and FAQ are rebuilt from their files: the same texts and vectors, new load times
        for kind in ("persona", "faq"):
            texts = [sorted(v[1] for v in docs.values() if v[0] == kind) for docs in (after, before)]
            assert texts[0] == texts[1]
        conv = next(v[2]["conversation_id"] for v in before.values() if v[0] == "turn" and v[1] == "And for dessert?")
        assert [t.text for t in store.recent_turns(conv)] == [
            "What should I cook for Alice?",
            "Nothing with peanuts.",
            "And for dessert?",
            "Fruit salad.",
        ]
        assert [t.metadata["turn_index"] for t in store.recent_turns(conv)] == [1, 2, 3, 4]
        assert store.retrieve_memories("what is Alice allergic to?", entity="alice", k=1, relevance=False)[
            0
        ].text.startswith("Alice")
        assert verify_mirror(store, store.mirror).ok
        # the conversation continues where it stopped
        with ChatMemory(store, settings) as chat:
            exchange = chat.record_exchange(conv, "Thanks!", "You're welcome.")
            assert (exchange.assistant_turn_index, exchange.summaries_scheduled) == (6, ["5-6"])


def test_restore_says_what_it_could_not_bring_back(world, tmp_path, local_embedder):
    settings, before = world
    lose_chroma(settings)
    (tmp_path / "persona.md").unlink()
    with open_store(settings.model_copy(update={"mirror_types": "memory"}), embedder=local_embedder) as store:
        report = recover_store(store)
        assert report.mirror.by_type == {"memory": 2, "summary": 3, "turn": 6}  # what the file holds comes back
        assert report.persona is None and report.knowledge_base is None
        notes = "\n".join(report.not_restored)
        assert "persona" in notes and "brain persona load" in notes
        assert "faq" in notes and "brain ingest <kb>" in notes
        assert store.count("persona") == 0 and store.count("faq") == 0


def test_turns_are_lost_only_when_they_are_not_mirrored(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", mirror_types="memory")
    with open_store(settings, embedder=local_embedder) as store:
        store.upsert_memory("Bob plays chess")
        store.upsert_turn("conv-1", "hi", "hello")
    lose_chroma(settings)
    with open_store(settings, embedder=local_embedder) as store:
        report = recover_store(store, persona_path=tmp_path / "absent.md")
        assert report.mirror.by_type == {"memory": 1} and store.count("turn") == 0
        notes = report.not_restored
        assert any(n.startswith("summary, turn: not mirrored") and "BRAIN_MIRROR_TYPES" in n for n in notes)


def brain_command(tmp_path, settings: Settings, *args: str) -> subprocess.CompletedProcess:
    """``brain ARGS`` in a new process, on the world's data directory and persona."""
    env = {**os.environ, "BRAIN_DATA_DIR": str(settings.data_dir), "BRAIN_PERSONA_PATH": str(tmp_path / "persona.md")}
    return subprocess.run(
        [sys.executable, "-m", "brain.shells.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.subprocess
def test_cli_restore_from_mirror(world, tmp_path, local_embedder):
    settings, before = world
    shutil.rmtree(settings.data_dir / "chroma")  # the restore runs in new processes
    text = brain_command(tmp_path, settings, "restore", "--from-mirror")
    assert text.returncode == 0, text.stderr
    assert "2 memory, 3 summary, 6 turn" in text.stdout
    assert "persona: reloaded from" in text.stdout and "not restored: faq" in text.stdout
    again = brain_command(tmp_path, settings, "--json", "restore", "--from-mirror", "--kb", str(tmp_path / "kb"))
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["knowledge_base"]["added"] == 2 and data["not_restored"] == []
    assert data["persona"]["changed"] is False  # already loaded by the first run
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    with open_store(settings, embedder=local_embedder) as store:
        after = everything(store)
    assert {k: v[:3] for k, v in after.items() if v[0] in ("memory", "turn", "summary")} == {
        k: v[:3] for k, v in before.items() if v[0] in ("memory", "turn", "summary")
    }
    assert sorted(v[1] for v in after.values()) == sorted(v[1] for v in before.values())
