"""bench/bench_embedders.py: the store it replicates from a small embedded corpus, and the order it times in."""

from __future__ import annotations

import numpy as np

from tests.bench_scripts import bench_script


def test_replicated_documents_keep_their_type_and_metadata_with_distinct_texts_and_vectors_near_their_base():
    bench = bench_script("bench_embedders.py")
    rng = np.random.default_rng(1)
    unit = lambda v: (v / np.linalg.norm(v)).astype(np.float32)  # noqa: E731
    base = {
        "memory": [("Alice likes tea", unit(rng.standard_normal(384)))],
        "faq": [("Open nine to five", unit(rng.standard_normal(384))), ("Refunds", unit(rng.standard_normal(384)))],
    }
    skeleton = [{"id": f"memory-{i}", "type": "memory", "scope": "global"} for i in range(3)]
    skeleton += [{"id": "persona-0", "type": "persona", "topic": "core"}, {"id": "faq-0", "type": "faq"}]
    docs = bench.replicate(base, skeleton, np.random.default_rng(2))
    assert [d["id"] for d in docs] == [d["id"] for d in skeleton] and docs[0]["scope"] == "global"
    assert len({d["text"] for d in docs}) == len(docs)  # a memory's id comes from its text
    assert docs[3]["text"].startswith("Open nine to five") and docs[4]["text"].startswith("Refunds")  # persona: FAQ's
    vectors = np.stack([d["embedding"] for d in docs])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    near = vectors[:3] @ base["memory"][0][1]
    assert np.all((near > 0.95) & (near < 0.99)) and len({v.tobytes() for v in vectors}) == len(docs)


def test_alternate_gives_every_name_every_step_in_blocks_that_take_turns():
    bench = bench_script("bench_embedders.py")
    order: list[tuple[str, int]] = []
    times = bench.alternate(5, ["a", "b"], lambda name, i: order.append((name, i)), block=2)
    assert order == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("b", 3), ("a", 2), ("a", 3), ("a", 4), ("b", 4)]
    assert {k: len(v) for k, v in times.items()} == {"a": 5, "b": 5}

