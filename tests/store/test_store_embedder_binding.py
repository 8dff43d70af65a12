"""A collection is bound to the embedder whose vectors it holds, not to one that never wrote any."""

from __future__ import annotations

import pytest

from brain.app.core import open_store
from brain.model.errors import EmbedderUnavailable, EmbeddingModelMismatch
from tests.ollama_stub import OllamaStub, dead_url

NOMIC = "ollama/nomic-embed-text"


def test_a_failed_first_write_does_not_pin_the_store_to_its_embedder(backend_settings, local_embedder):
    ollama = backend_settings.model_copy(update={"embedder": NOMIC, "ollama_host": dead_url()})
    with open_store(ollama) as store:
        with pytest.raises(EmbedderUnavailable):
            store.upsert_memory("Written while Ollama is down")
        assert store.count() == 0
    with open_store(backend_settings, embedder=local_embedder) as store:  # the default embedder now
        assert store.col.metadata["embedder"] == local_embedder.name
        assert store.dimension == local_embedder.dimension
        doc_id = store.upsert_memory("Written with the local model")
        assert store.retrieve_memories("local model", k=1, relevance=False)[0].id == doc_id
    with pytest.raises(EmbeddingModelMismatch, match="was built with embedder local"):
        open_store(ollama)  # and from now on the store holds local vectors


def test_a_collection_that_held_vectors_stays_bound_even_when_emptied(backend_settings, local_embedder):
    with OllamaStub() as stub:
        ollama = backend_settings.model_copy(update={"embedder": NOMIC, "ollama_host": stub.url})
        with open_store(ollama) as store:
            doc_id = store.upsert_memory("A 768-d vector")
            store.delete([doc_id])
            assert store.count() == 0
    # Chroma keeps the 768 dimensions of the deleted records: 384-d vectors could not be stored
    with pytest.raises(EmbeddingModelMismatch, match=f"was built with embedder {NOMIC}"):
        open_store(backend_settings, embedder=local_embedder)
