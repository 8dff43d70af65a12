"""Every Python example of the data model reference, run exactly as printed (tests/fixtures/ada_examples.py),
on a fresh embedded store and on a real `chroma run` server, with the store opened the reference's way."""

from __future__ import annotations

import uuid

import pytest

from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.model.errors import ValidationError
from tests.fixtures.ada_examples import EXAMPLES


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server)])
def reference_env(request, tmp_path, monkeypatch):
    """The environment a chat backend would set: RagStore() reads it (nothing is passed in)."""
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    if request.param == "server":
        monkeypatch.setenv("BRAIN_CHROMA_URL", request.getfixturevalue("chroma_server"))
        monkeypatch.setenv("BRAIN_COLLECTION", f"ref-{uuid.uuid4().hex[:12]}")
    return request.param


def run_examples(namespace: dict) -> dict[str, dict]:
    seen = {}
    for name, code in EXAMPLES:
        exec(compile(code, f"<reference: {name}>", "exec"), namespace)  # noqa: S102 - the examples are the test
        seen[name] = {k: v for k, v in namespace.items() if k in {"results", "memories", "recent_turns", "turns",
                                                                    "persona_docs", "faq_results", "validated"}}
    return seen


@pytest.mark.parametrize("ranking", ["relevance", "reference"])
def test_every_reference_example_runs_verbatim_and_finds_what_it_wrote(reference_env, ranking, monkeypatch):
    """By default ``retrieve_memories`` ranks as the chat context does, so a memory unrelated to the query is
    not found; with ``RAG_MEMORY_RANKING=reference`` it ranks by the reference's formula (every memory
    eligible, importance weighing as much as similarity)."""
    monkeypatch.setenv("RAG_MEMORY_RANKING", ranking)
    namespace = {"__name__": "reference", "RAG_TURN_TOP_K": Settings().turn_top_k}
    try:
        seen = run_examples(namespace)
        rag_store = namespace["rag_store"]
        assert isinstance(rag_store, RagStore)

        persona = seen["persona query"]["results"]
        assert persona["documents"][0] == ["You are Ada, a helpful assistant for luna."]
        faq = seen["FAQ query"]["results"]
        assert faq["documents"][0][0].startswith("Q: How do I use web search?")
        assert faq["metadatas"][0][0]["_specialist_name"] == "web_search"
        turns = seen["turn query"]["results"]
        assert sorted(turns["documents"][0]) == ["How do I configure web search?", "Set SEARXNG_URL in .env..."]
        assert all(m["conversation_id"] == "conv-abc123" for m in turns["metadatas"][0])
        assert seen["summary query"]["results"]["ids"] == [[]]  # nothing summarised yet
        assert len(seen["basic semantic query"]["results"]["ids"][0]) == 5  # persona, FAQ, memory, two turns
        assert len(namespace["recent_turns"]["ids"][0]) == 2
        preferences = [h.text for h in seen["retrieve memories"]["memories"]]
        # project-alpha has no memories of its own: its search reads global ones, as every entity's does
        status = [h.text for h in seen["importance-weighted retrieval"]["memories"]]
        if ranking == "reference":
            assert preferences == status == ["luna prefers Python over JavaScript"]
        else:
            assert status == []  # "project status" and a language preference: nothing relevant
            assert preferences == [h.text for h in rag_store.retrieve_memories("user preferences", 5, None)]
            assert all(h.floor is not None for h in seen["retrieve memories"]["memories"])

        # the reference's invalid metadata raises, naming the range
        with pytest.raises(ValidationError, match=r"importance must be between 1 and 5"):
            namespace["validate_metadata"]("memory", namespace["bad_meta"])
        with pytest.raises(ValidationError, match=r"between 1 and 5"):
            rag_store.upsert_memory("too important", importance=10)
    finally:
        if "rag_store" in namespace:
            namespace["rag_store"].close()


def test_the_reference_filters_work_on_col_as_written(reference_env):
    """Each ``where`` of the "Metadata Filtering" example, given to ``col.query`` and ``col.get``."""
    with RagStore() as store:
        store.upsert_memory("project-alpha deadline is December 20th, 2025", scope="entity:project-alpha",
                            importance=5, tags=["deadline", "critical"])
        store.upsert_memory("luna likes tea", importance=2)
        store.upsert_doc("Q: How do I configure RAG?", "faq", topic="configuration")
        wheres = {
            "type": ({"type": "faq"}, {"Q: How do I configure RAG?"}),
            "several keys": ({"type": "memory", "importance": {"$gte": 4}},
                             {"project-alpha deadline is December 20th, 2025"}),
            "scope": ({"scope": "entity:project-alpha"}, {"project-alpha deadline is December 20th, 2025"}),
            "complex": ({"$and": [{"type": "memory"}, {"importance": {"$gte": 4}},
                                  {"tags": {"$contains": "critical"}}]},
                        {"project-alpha deadline is December 20th, 2025"}),
        }
        for name, (where, expected) in wheres.items():
            got = store.col.get(where=where)
            assert set(got["documents"]) == expected, name
            hits = store.col.query(query_texts=["deadline"], where=where, n_results=5)
            assert set(hits["documents"][0]) == expected, name


def test_col_embeds_query_texts_with_the_stores_model(reference_env):
    """``query_texts`` land in the store's vector space: the distance Chroma reports is the one of the
    store's own query vector."""
    with RagStore() as store:
        store.upsert_memory("Alice keeps bees on her roof")
        got = store.col.query(query_texts=["beekeeping"], n_results=1, include=["distances", "embeddings"])
        query = store.embedder.embed_query("beekeeping")
        stored = got["embeddings"][0][0]
        cosine = float(query @ stored) / float((query @ query) ** 0.5 * (stored @ stored) ** 0.5)
        assert got["distances"][0][0] == pytest.approx(1 - cosine, abs=1e-4)
