"""The store with the Ollama embedder over real HTTP, and under concurrent use from threads."""

from __future__ import annotations

import threading

import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.model.errors import EmbedderUnavailable
from brain.store.indexes import memory_index
from tests.ollama_stub import OllamaStub


def test_store_with_the_ollama_embedder_records_it_and_embeds_in_batches(tmp_path):
    with OllamaStub() as stub:
        settings = Settings(
            data_dir=tmp_path, embedder="ollama/nomic-embed-text", ollama_host=stub.url, embed_batch_size=16
        )
        store = open_store(settings)
        assert store.col.metadata["embedder"] == "ollama/nomic-embed-text"
        assert store.dimension == 768
        ids = store.upsert_docs([{"text": f"fact number {i}", "type": "memory"} for i in range(40)])
        assert len(set(ids)) == 40
        assert len(stub.embed_requests()) == 3  # 40 texts in batches of 16
        store.retrieve_memories("fact number 7", k=3, relevance=False)
        store.retrieve_memories("fact number 7", k=5, relevance=False)
        assert len(stub.embed_requests()) == 4  # the repeated query came from the cache
        # the stub's vectors are hashes (no meaning), so only the shape of the answer can be checked
        hits = store.retrieve_memories("fact number 7", k=4, relevance=False)
        assert len(hits) == 4 and all(h.text.startswith("fact number ") for h in hits)
        assert hits[0].score >= hits[-1].score


def test_ollama_down_means_nothing_is_written(tmp_path):
    with OllamaStub() as stub:
        settings = Settings(data_dir=tmp_path, embedder="ollama/nomic-embed-text", ollama_host=stub.url)
        store = open_store(settings)
    # the server is gone now
    with pytest.raises(EmbedderUnavailable, match="ollama serve|OLLAMA_HOST"):
        store.upsert_memory("this cannot be embedded")
    assert store.count() == 0


@pytest.mark.stress
def test_concurrent_writers_and_readers_leave_index_and_chroma_in_agreement(embedded_store):
    store = embedded_store
    store.upsert_memory("seed memory", importance=3)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(15):
                store.upsert_memory(f"writer {w} remembers item {i}", importance=1 + (i % 5))
                if i % 5 == 4:
                    store.delete(store.get(where={"importance": 1 + (i % 5)}, type="memory", limit=1)[0].id)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(40):
                for hit in store.retrieve_memories("what does the writer remember?", k=5, relevance=False):
                    assert hit.score == pytest.approx(hit.similarity_part + hit.importance_part + hit.recency_part)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)] + [
        threading.Thread(target=reader) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    in_chroma = {d.id for d in store.get(type="memory")}
    assert set(memory_index(store).ids) == in_chroma
    turns_conv = "conv-race"
    pairs = []

    def talker(n: int) -> None:
        for i in range(5):
            pairs.append(store.upsert_turn(turns_conv, f"u{n}-{i}", f"a{n}-{i}"))

    talkers = [threading.Thread(target=talker, args=(n,)) for n in range(3)]
    for t in talkers:
        t.start()
    for t in talkers:
        t.join()
    indexes = sorted(d.metadata["turn_index"] for d in store.recent_turns(turns_conv, k=100))
    assert indexes == list(range(1, 31))  # no index given twice
