"""Health is degraded while the model summariser cannot be reached, and an extractive fallback summary
never shows in the prompt next to the very turns it quotes."""

from __future__ import annotations

import brain
from brain.features.chat import ChatMemory

from tests.conftest import api_settings


def test_health_is_degraded_while_the_summariser_is_unreachable(tmp_path, local_embedder):
    # api_settings point the Ollama summariser at a port where nothing answers
    with brain.open(api_settings(tmp_path), embedder=local_embedder, start_worker=False) as b:
        report = b.health()
        assert report["status"] == "degraded"
        assert report["store"]["ok"] is True and report["mirror"]["ok"] is True
        summariser = report["summariser"]
        assert summariser["ok"] is False and summariser["reachable"] is False
        assert "cannot reach Ollama" in summariser["last_error"]
    extractive = api_settings(tmp_path / "other", summarizer="extractive")
    with brain.open(extractive, embedder=local_embedder, start_worker=False) as b:
        report = b.health()
        assert report["status"] == "ok" and report["summariser"]["ok"] is True


def test_health_over_http_says_degraded_with_the_reason(live):
    body = live.get("/v1/health").json()
    assert body["status"] == "degraded" and body["summariser"]["ok"] is False
    assert body["store"]["ok"] is True


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
