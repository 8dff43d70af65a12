"""Health tells expected states from faults: the optional summary model not running (a fresh install
without Ollama) is information and the status stays ok; a model memory formation needs, out of reach, is
a fault. And an extractive fallback summary never shows in the prompt next to the very turns it quotes."""

from __future__ import annotations

import brain
from brain.features.chat import ChatMemory
from brain.shells.cli.reports import health_text
from tests.conftest import api_settings


def test_a_fresh_install_without_ollama_is_ok_and_says_the_model_is_optional(tmp_path, local_embedder):
    # api_settings keep the default summariser (ollama) and point it at a port where nothing answers
    with brain.open(api_settings(tmp_path), embedder=local_embedder, start_worker=False) as b:
        report = b.health()
    assert report["status"] == "ok"
    summariser = report["summariser"]
    assert summariser["reachable"] is False and summariser["optional"] is True and summariser["ok"] is True
    assert "cannot reach Ollama" in summariser["last_error"]
    [note] = report["notes"]
    assert "optional summary model" in note and "extractive fallback" in note
    assert "BRAIN_SUMMARIZER=extractive" in note
    text = health_text(report)
    assert text.splitlines()[0].split() == ["status", "ok"] and "note" in text.splitlines()[1]


def test_the_extractive_summariser_has_no_notes(tmp_path, local_embedder):
    extractive = api_settings(tmp_path, summarizer="extractive")
    with brain.open(extractive, embedder=local_embedder, start_worker=False) as b:
        report = b.health()
    assert report["status"] == "ok" and report["summariser"]["ok"] is True and report["notes"] == []


def test_a_model_that_formation_needs_out_of_reach_degrades(tmp_path, local_embedder):
    with brain.open(api_settings(tmp_path, formation=True), embedder=local_embedder, start_worker=False) as b:
        report = b.health()
    assert report["formation"]["enabled"] is True
    assert report["status"] == "degraded"
    assert report["summariser"]["optional"] is False and report["summariser"]["ok"] is False
    assert "memory formation" in report["notes"][0] and "cannot be reached" in report["notes"][0]
    assert report["store"]["ok"] is True and report["mirror"]["ok"] is True


def test_health_over_http_is_ok_beside_an_optional_model_out_of_reach(live):
    body = live.get("/v1/health").json()
    assert body["status"] == "ok" and body["summariser"]["reachable"] is False
    assert body["store"]["ok"] is True and body["notes"]


def test_a_fallback_summary_stays_out_while_its_turns_are_shown(tmp_path, local_embedder):
    settings = api_settings(tmp_path, summary_every_n=1, turn_top_k=2, enable_related_turns=False)
    with brain.open(settings, embedder=local_embedder, start_worker=False) as b:
        chat: ChatMemory = b.chat
        first = chat.record_exchange(None, "My sister Maja lives in Ljubljana since 2019.",
                                     "Ljubljana is lovely, say hi to Maja.")
        conversation = first.conversation_id
        chat.wait_for_summaries()
        summary = b.store.conversation_summaries(conversation)[0]
        assert summary.metadata["fallback"] is True and summary.metadata["turn_range"] == "1-2"
        assert "Maja lives in Ljubljana" in summary.text  # extractive: the turns' own sentences

        context = chat.build_context(conversation, "Where does Maja live?")
        assert [t.metadata["turn_index"] for t in context.turn] == [1, 2]
        assert context.summary == []
        assert {"section": "summary", "id": summary.id, "reason": "repeats_turns"} in context.dropped
        assert context.prompt.count("Maja lives in Ljubljana") == 1

        # once its turns scrolled out of the recent ones, the summary is all the prompt has of them
        chat.record_exchange(conversation, "I am flying there in May.", "Have a good flight!")
        chat.wait_for_summaries()
        later = chat.build_context(conversation, "Where does Maja live?")
        assert [t.metadata["turn_index"] for t in later.turn] == [3, 4]
        assert summary.id in [s.id for s in later.summary]
        assert later.prompt.count("Maja lives in Ljubljana") == 1
