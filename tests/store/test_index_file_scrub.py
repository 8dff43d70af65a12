"""The vector index's unused slots hold no text: Chroma writes them from memory it never cleared."""

from __future__ import annotations

import numpy as np
import pytest

from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.store.scrub import _HEADER, clear_unused_index_space

SECRET = b"quinceberries-secret-garbage"


def level0_files(data_dir):
    return sorted((data_dir / "chroma").glob("*/data_level0.bin"))


@pytest.mark.parametrize("name", ["data_level0.bin", "length.bin"])
def test_closing_the_store_zeroes_the_slots_no_element_uses(tmp_path, local_embedder, name):
    settings = Settings(data_dir=tmp_path / "data")
    with RagStore(settings, embedder=local_embedder) as store:
        store.upsert_memory("Ada eats quinceberries")
    (level0,) = level0_files(settings.data_dir)
    _, max_elements, used, per_element = _HEADER.unpack_from(level0.with_name("header.bin").read_bytes())
    slot = per_element if name == "data_level0.bin" else 4  # length.bin: one 4-byte length per element
    target = level0.with_name(name)
    assert target.stat().st_size == max_elements * slot and used < max_elements
    with open(target, "r+b") as out:  # what an unlucky allocation leaves: text in a slot nothing uses
        out.seek(used * slot + 4)
        out.write(SECRET)
    assert SECRET in target.read_bytes()
    with RagStore(settings, embedder=local_embedder) as store:
        assert [h.text for h in store.retrieve_memories("what does Ada eat?", entity="ada", relevance=False)] == [
            "Ada eats quinceberries"]
    assert SECRET not in target.read_bytes()
    assert clear_unused_index_space(settings.data_dir / "chroma") == 0  # nothing left to clear


def test_an_index_past_its_first_persist_reads_the_same_after_clearing(tmp_path):
    """1,200 vectors: the index was written with elements in it and resized; every one is still found."""
    settings = Settings(data_dir=tmp_path / "data")
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(1200, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    with RagStore(settings) as store:
        store.chroma.upsert([f"v{i}" for i in range(1200)], [f"text {i}" for i in range(1200)],
                            [{"type": "faq", "timestamp": "2025-01-01T00:00:00+00:00", "ts_epoch": 1735689600.0,
                              "source": "kb", "scope": "global"} for _ in range(1200)], vectors)
    (level0,) = level0_files(settings.data_dir)
    _, _, used, _ = _HEADER.unpack_from(level0.with_name("header.bin").read_bytes())
    assert used > 0  # the header counts persisted elements: only the slots past them were cleared
    with RagStore(settings) as store:
        for i in (0, 599, 1199):
            got = store.col.query(query_embeddings=[vectors[i]], n_results=1)
            assert got["ids"] == [[f"v{i}"]]
