"""A person's critical facts reach the prompt when a message needs them without sharing a word
(tests/fixtures/critical_facts.json, measured by bench/bench_critical.py), another person's never, and an
unrelated message gets only the few facts always kept in mind."""

from __future__ import annotations

from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.providers.summarizers import ExtractiveSummarizer
from tests.bench_scripts import bench_script

critical = bench_script("bench_critical.py")


def test_the_critical_fact_is_in_the_prompt_for_nine_messages_in_ten_on_both_parts_of_the_set(settings, local_embedder):
    data = critical.load()
    assert sum(len(p["messages"]) for p in data["people"]) >= 40 and len(data["people"]) >= 8
    with open_store(settings, embedder=local_embedder) as store, \
            ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat:
        ids = critical.store_facts(chat, data["people"])
        outcomes = critical.evaluate(chat, data, ids)
    assert set(outcomes) == {"tuning", "held_out"}
    for split, out in outcomes.items():
        assert out.critical_shown / out.messages >= 0.90, split
        assert out.unrelated_own_facts / out.unrelated_prompts <= 3, split
        assert out.foreign_leaks == 0 and out.foreign_prompts > out.messages, split


def test_without_the_always_shown_facts_the_set_is_hard(settings, local_embedder):
    """The set does what it says: the relevance-ranked section alone misses most critical facts."""
    data = critical.load()
    off = settings.model_copy(update={"core_top_k": 0})
    with open_store(off, embedder=local_embedder) as store, \
            ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat:
        outcomes = critical.evaluate(chat, data, critical.store_facts(chat, data["people"]))
    assert all(out.critical_shown / out.messages <= 0.2 for out in outcomes.values())
