"""Exact top-k: the bounded int8 pre-score never changes the answer of an exhaustive scoring."""

from __future__ import annotations

import numpy as np
import pytest

from brain.rules import ranking
from brain.rules.ranking import ScoreWeights
from brain.store.memory_index import MemoryIndex
from brain.store.memory_query import MemoryQuery

NOW = 1_800_000_000.0


def brute_force(index: MemoryIndex, q, k, weights, now, scopes=None, tags=None, min_importance=None):
    ids, vectors = index.vectors()
    metas = [index._metas[index._row[i]] for i in ids]
    keep = [
        j
        for j, m in enumerate(metas)
        if (scopes is None or m["scope"] in scopes)
        and (not tags or set(tags) <= set(m.get("tags", [])))
        and (min_importance is None or m["importance"] >= min_importance)
    ]
    sims = vectors[keep] @ (q / np.linalg.norm(q))
    totals = ranking.total_scores(
        sims, [metas[j]["importance"] for j in keep], [metas[j]["ts_epoch"] for j in keep], now, weights
    )
    order = ranking.top_k_by_score(totals, [ids[j] for j in keep], k)
    return [ids[keep[j]] for j in order], [float(totals[j]) for j in order]


def clustered(rng, n, d, topics=20):
    centres = rng.standard_normal((topics, d))
    common = rng.standard_normal(d)
    x = centres[rng.integers(topics, size=n)] + 0.8 * rng.standard_normal((n, d)) + 0.5 * common
    return x.astype(np.float32)


def build(rng, n, d, vectors=None):
    vectors = clustered(rng, n, d) if vectors is None else vectors
    ids = [f"doc-{i:06d}" for i in range(n)]
    metas = [
        {
            "importance": int(rng.integers(1, 6)),
            "ts_epoch": NOW - float(rng.random() * 3e7) + (1e6 if i % 97 == 0 else 0.0),  # a few in the future
            "scope": "global" if i % 4 else f"entity:e{i % 5}",
            "tags": [["a"], ["b"], ["a", "b"], []][i % 4],
        }
        for i in range(n)
    ]
    index = MemoryIndex(d)
    index.upsert(ids, vectors, ["text"] * n, metas)
    return index, vectors


WEIGHTS = [
    ScoreWeights(),
    ScoreWeights(similarity=1.0, importance=0.0, recency=0.0),
    ScoreWeights(similarity=0.1, importance=0.9, recency=0.5, half_life_seconds=3600.0),
    ScoreWeights(similarity=0.5, importance=0.5, recency=1.0, half_life_seconds=1.0),  # recency underflows
]


@pytest.mark.parametrize("weights", WEIGHTS, ids=["default", "similarity-only", "importance-heavy", "tiny-half-life"])
def test_index_top_k_equals_brute_force(weights):
    rng = np.random.default_rng(7)
    index, vectors = build(rng, 12000, 96)  # large enough to take the int8 path
    for trial in range(15):  # each of the 5 filters with each of the 3 noise levels, once
        q = vectors[rng.integers(len(vectors))] + rng.standard_normal(96).astype(np.float32) * (0.2 + trial % 3)
        k = int(rng.integers(1, 25))
        filters = [
            {},
            {"scopes": {"global", "entity:e1"}},
            {"tags": ["a"]},
            {"min_importance": 3},
            {"scopes": {"entity:e2"}},
        ][trial % 5]  # the last is small: exact float32 path
        got = index.search(MemoryQuery(q, k, weights, NOW, **filters))
        want_ids, want_scores = brute_force(index, q, k, weights, NOW, **filters)
        assert [r.id for r in got] == want_ids
        assert [r.score for r in got] == pytest.approx(want_scores, abs=1e-6)


def test_ties_are_broken_by_id_like_the_reference():
    d = 32
    rng = np.random.default_rng(3)
    base = rng.standard_normal(d).astype(np.float32)
    n = 5000
    vectors = np.tile(base, (n, 1))  # every memory identical: all scores tie
    index, _ = build(rng, n, d, vectors=vectors)
    for row in range(n):
        index._importance[row] = 3.0
        index._epoch[row] = NOW
    index._growth = None
    got = [r.id for r in index.search(MemoryQuery(base, 7, ScoreWeights(), NOW))]
    assert got == sorted(index.ids)[:7]


def test_updates_and_removals_keep_the_index_consistent():
    rng = np.random.default_rng(11)
    index, vectors = build(rng, 6000, 48)
    ids = index.ids
    index.remove(ids[::3])
    fresh = clustered(rng, 500, 48)
    index.upsert(
        [f"new-{i}" for i in range(500)],
        fresh,
        ["t"] * 500,
        [{"importance": 5, "ts_epoch": NOW, "scope": "global"} for _ in range(500)],
    )
    index.upsert(
        ids[1:100:3],
        -vectors[1:100:3],
        ["t"] * len(ids[1:100:3]),
        [{"importance": 1, "ts_epoch": NOW - 1e6, "scope": "global"}] * len(ids[1:100:3]),
    )
    assert len(index) == 6000 - len(ids[::3]) + 500
    assert not any(i in index for i in ids[::3])
    for _trial in range(10):
        q = rng.standard_normal(48).astype(np.float32)
        got = index.search(MemoryQuery(q, 10, ScoreWeights(), NOW))
        want, _ = brute_force(index, q, 10, ScoreWeights(), NOW)
        assert [r.id for r in got] == want


def test_quantisation_error_bound_holds():
    rng = np.random.default_rng(5)
    x = ranking.normalize_rows(clustered(rng, 3000, 384))
    codes, scale, error = ranking.quantize_rows(x)
    for _ in range(20):
        q = ranking.normalize_rows(rng.standard_normal((1, 384)))[0]
        approx, slack = ranking.approx_similarities(q, codes, scale.astype(np.float64), error.astype(np.float64))
        exact = x.astype(np.float64) @ q.astype(np.float64)
        assert np.all(np.abs(exact - approx) <= slack)
        assert np.median(slack) < 0.03  # tight enough to prune


def test_threshold_never_exceeds_the_true_kth_largest():
    rng = np.random.default_rng(9)
    for n in (10, 300, 5000, 20000):
        values = rng.standard_normal(n)
        for k in (1, 3, 20):
            if k > n:
                continue
            true_kth = np.sort(values)[-k]
            assert ranking.kth_largest_lower_bound(values, k) <= true_kth


def test_recency_halves_every_half_life_and_future_counts_as_now():
    w = ScoreWeights(recency=0.2, half_life_seconds=100.0)
    parts = ranking.recency_part(np.array([NOW, NOW - 100, NOW - 200, NOW + 50]), NOW, w)
    assert parts == pytest.approx([0.2, 0.1, 0.05, 0.2])
    assert ranking.importance_part(np.array([1, 5]), w) == pytest.approx([0.1, 0.5])


def test_partial_sort_matches_the_reference_ordering_with_ties():
    rng = np.random.default_rng(13)
    for n in (1, 5, 50, 3000):
        totals = np.round(rng.random(n), 2)  # many ties
        keys = [f"id-{rng.integers(10**6):07d}-{i}" for i in range(n)]
        for k in (1, 3, 10, 60):
            got = ranking.top_k_positions(totals, keys.__getitem__, k).tolist()
            assert got == ranking.top_k_by_score(totals, keys, k)


def test_float_dots_match_numpy():
    rng = np.random.default_rng(17)
    rows = ranking.normalize_rows(rng.standard_normal((700, 384)))
    q = rows[5]
    assert np.allclose(ranking.float_dots(q, rows), rows.astype(np.float64) @ q.astype(np.float64), atol=1e-6)


def test_a_gate_with_floors_by_row_that_no_memory_reaches_shows_nothing_and_counts_every_one():
    # Rows whose upper bound reaches their own (importance-lowered) floor but whose exact relevance does
    # not: the compressed similarities of e5-small put many rows in that band.
    from brain.rules.ranking import ScoreWeights, gated_bounded_top_k, gated_top_k_reference

    weights = ScoreWeights(similarity=1.0, floor=0.9, margin=0.1, floor_importance=0.1, floor_importance_match=0.3)
    approx = np.array([0.84, 0.2, 0.83, 0.1, 0.5])
    exact = approx - 0.05
    importance = np.array([3, 3, 5, 1, 2])
    match = np.array([0.5, 0.0, 0.6, 0.0, 0.4])
    rows, sims, below = gated_bounded_top_k(
        np.zeros(5), approx, np.full(5, 0.1), None, 3, lambda r: exact[r], weights, importance=importance, match=match
    )
    reference = gated_top_k_reference(
        exact, 0.0, np.zeros(5), [str(i) for i in range(5)], 3, weights, importance, match
    )
    assert (list(rows), below) == reference == ([], 5) and sims.size == 0


def test_first_person_floors_by_row_give_the_reference_answer():
    """The first-person floor of the asking entity's rows (``own``) is honoured by the pruned search exactly
    as by brute force, whichever rows it lowers."""
    from brain.rules.ranking import ScoreWeights, gated_bounded_top_k, gated_top_k_reference, own_floor

    rng = np.random.default_rng(45)
    weights = ScoreWeights(similarity=1.0, floor=0.5, margin=0.25, first_person_floor=0.1, first_person_stand_out=0.15)
    for _ in range(50):
        n = int(rng.integers(3, 40))
        exact = rng.uniform(-0.1, 0.6, n)
        approx = exact + rng.uniform(-0.02, 0.02, n)
        mine = rng.random(n) < 0.5
        own = np.where(mine, own_floor(weights, float(exact[mine].sum()), int(mine.sum())), np.inf)
        keys = [str(i) for i in range(n)]
        rows, _, below = gated_bounded_top_k(
            np.zeros(n), approx, np.full(n, 0.02), None, 3, lambda r, exact=exact: exact[r], weights, keys=keys, own=own
        )
        assert (list(rows), below) == gated_top_k_reference(exact, 0.0, np.zeros(n), keys, 3, weights, own=own)


def test_a_memory_that_stands_out_among_its_persons_memories_gets_the_first_person_floor():
    """One floor for every own memory is the same test as each memory against the mean of the others."""
    from brain.rules.ranking import ScoreWeights, own_floor

    weights = ScoreWeights(floor=0.5, first_person_floor=0.1, first_person_stand_out=0.15, unrelated_mean=0.03)
    relevance = np.array([0.3, 0.02, 0.05, 0.0, 0.04, 0.01, 0.24])
    floor = own_floor(weights, float(relevance.sum()), relevance.size)
    for i, r in enumerate(relevance):
        others = np.delete(relevance, i).mean()
        assert (r >= floor) == (r >= max(0.1, others + 0.15))
    assert relevance[0] >= floor and (relevance[1:6] < floor).all()
    assert own_floor(weights, 0.4, 3) == pytest.approx(0.18)  # too few others: unrelated pairs' mean is the background
    assert own_floor(ScoreWeights(floor=0.5), 1.0, 7) == float("inf")


@pytest.mark.parametrize("dimension", [384, 512])
def test_row_bytes_is_what_the_arrays_hold_per_row(dimension):
    index = MemoryIndex(dimension, capacity=10)
    assert index.nbytes() == 10 * MemoryIndex.row_bytes(dimension)
    assert MemoryIndex.row_bytes(512) - MemoryIndex.row_bytes(384) == 128 * (4 + 1)  # a float32 and an int8 copy


def test_a_rows_language_is_told_once_and_follows_its_text_and_its_row():
    from brain.text.language import LANGUAGES

    rng = np.random.default_rng(3)
    index = MemoryIndex(8)
    meta = {"type": "memory", "importance": 3, "ts_epoch": 1.0e9, "scope": "global"}
    texts = ["Alice is learning the cello.", "Alice lernt seit dem Frühjahr Cello.", "アリスはチェロを習っています。"]
    index.upsert(["a", "b", "c"], rng.standard_normal((3, 8)), texts, [meta] * 3)

    def language(row: int) -> str:
        return LANGUAGES[int(np.argmax(index.languages(np.array([row]))[0]))]

    assert [language(r) for r in range(3)] == ["en", "de", "ja"]
    index.upsert(["b"], rng.standard_normal((1, 8)), ["Alice has been learning the cello since spring."], [meta])
    assert language(1) == "en"  # a new text is read again
    index.remove(["a"])  # the last row moves into the hole, with its language
    assert index.ids == ["c", "b"] and language(0) == "ja"
