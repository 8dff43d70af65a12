"""The relevance gate is exact: top-k behind the gate equals brute force under the shipped score,
with the int8 pre-score, the lexical part and the floor/margin together."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from brain.rules import ranking
from brain.rules.ranking import ScoreWeights
from brain.store.memory_index import SMALL_CANDIDATE_SET, MemoryIndex
from brain.store.memory_query import MemoryQuery
from brain.text import BM25Index, tokenize

NOW = 1_800_000_000.0
VOCAB = ["apple", "river", "piano", "garden", "passport", "peanut", "violin", "harbour", "winter", "cello",
         "lemon", "marathon", "ferry", "kitten", "lantern", "meadow",
         "violinist", "meadowlark", "harbourmaster", "kittenish"]  # stems that meet another's by prefix


def corpus(rng, n, d, topics=12):
    centres = rng.standard_normal((topics, d))
    topic = rng.integers(topics, size=n)
    vectors = (centres[topic] + 0.9 * rng.standard_normal((n, d))).astype(np.float32)
    texts = [" ".join(rng.choice(VOCAB, size=int(rng.integers(1, 6)))) for _ in range(n)]
    ids = [f"m-{i:06d}" for i in range(n)]
    metas = [{"importance": int(rng.integers(1, 6)), "ts_epoch": NOW - float(rng.random() * 3e7),
              "scope": "global" if i % 3 else f"entity:e{i % 4}"} for i in range(n)]
    index = MemoryIndex(d)
    index.upsert(ids, vectors, texts, metas)
    return index, ids, vectors, texts, metas


def prefix_match_by_hand(texts, query_text, min_prefix=5, k1=1.2, b=0.75):
    """Each text's BM25 match by stem prefix over its largest value, word by word in plain Python."""
    docs = [tokenize(t) for t in texts]
    mean_length = sum(map(len, docs)) / len(docs)

    def related(a, c):
        short, long_ = sorted((a, c), key=len)
        return a == c or (len(short) >= min_prefix and long_.startswith(short))

    held_by = Counter(t for d in docs for t in set(d))

    def idf(term):
        return np.log(1 + (len(docs) - held_by[term] + 0.5) / (held_by[term] + 0.5))

    out, top = np.zeros(len(docs)), 0.0
    for word in dict.fromkeys(tokenize(query_text)):
        terms = [t for t in held_by if related(word, t)]
        if not terms:
            continue
        top += max(idf(t) for t in terms) * (k1 + 1)
        for j, d in enumerate(docs):
            norm = k1 * (1 - b + b * len(d) / mean_length)
            out[j] += max([idf(t) * d.count(t) * (k1 + 1) / (d.count(t) + norm) for t in terms if t in d], default=0.0)
    return out / top if top > 0 else out


def brute_force(ids, vectors, texts, metas, query, query_text, k, weights, scopes=None):
    """Every candidate scored in float64 from scratch: similarity, BM25 / its maximum, the gate (with
    each memory's importance and its match by stem prefix)."""
    keep = [j for j, m in enumerate(metas) if scopes is None or m["scope"] in scopes]
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit[keep].astype(np.float64) @ (query / np.linalg.norm(query)).astype(np.float64)
    bm25 = BM25Index([tokenize(t) for t in texts])
    tokens = tokenize(query_text)
    top = bm25.max_score(tokens)
    lexical = (bm25.scores(tokens) / top if top > 0 else np.zeros(len(texts)))[keep]
    match = prefix_match_by_hand(texts, query_text)[keep] if weights.floor_importance_match else None
    static = (ranking.importance_part([metas[j]["importance"] for j in keep], weights)
              + ranking.recency_part([metas[j]["ts_epoch"] for j in keep], NOW, weights))
    order, below = ranking.gated_top_k_reference(sims, weights.lexical * lexical, static, [ids[j] for j in keep], k,
                                                 weights, [metas[j]["importance"] for j in keep], match)
    return [ids[keep[j]] for j in order], below


GATED = [
    ScoreWeights(1.0, 0.1, 0.05, lexical=0.5, floor=0.05, margin=0.15),
    ScoreWeights(1.0, 0.1, 0.05, lexical=0.5, floor=0.2, margin=None),
    ScoreWeights(1.0, 0.5, 0.1, lexical=0.0, floor=None, margin=0.05),
    ScoreWeights(0.5, 0.9, 0.5, lexical=2.0, floor=0.1, margin=0.4, half_life_seconds=3600.0),
    ScoreWeights(1.0, 0.1, 0.0, lexical=0.5, floor=0.9, margin=0.1),  # nothing reaches the floor
    ScoreWeights(1.0, 0.1, 0.05, lexical=1.0, floor=0.3, margin=0.2, floor_importance=0.15),
    ScoreWeights(1.0, 0.1, 0.05, lexical=1.0, floor=0.3, margin=0.2, floor_importance=0.3, floor_importance_match=0.3),
]


GATED_IDS = ["shipped-like", "floor-only", "margin-only", "heavy", "empty", "importance-floor",
             "importance-floor-with-words"]
#: on the int8 pre-score path (6,144 candidates: seconds each) two weightings stay in the fast tier
FAST_AT_SCALE = {"shipped-like", "importance-floor-with-words"}


def gated_cases():
    for n in (300, 3 * SMALL_CANDIDATE_SET):  # exhaustive path and int8 pre-score path
        for weights, name in zip(GATED, GATED_IDS, strict=True):
            slow = n > SMALL_CANDIDATE_SET and name not in FAST_AT_SCALE
            yield pytest.param(n, weights, id=f"{n}-{name}", marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize(("n", "weights"), gated_cases())
def test_gated_top_k_equals_brute_force(weights, n):
    rng = np.random.default_rng(7 + n)
    d = 48
    index, ids, vectors, texts, metas = corpus(rng, n, d)
    mismatches = 0
    for trial in range(25):
        q = vectors[int(rng.integers(n))] + 0.6 * rng.standard_normal(d).astype(np.float32)
        text = " ".join(rng.choice(VOCAB, size=2))
        scopes = None if trial % 2 else {"global", "entity:e1"}
        k = [1, 3, 10][trial % 3]
        hits = index.search(MemoryQuery(q, k, weights, NOW, scopes, rows="all", query_text=text))
        expected, below = brute_force(ids, vectors, texts, metas, q, text, k, weights, scopes)
        mismatches += [h.id for h in hits] != expected or hits.below_floor != below
        assert hits.candidates == (n if scopes is None else sum(m["scope"] in scopes for m in metas))
    assert mismatches == 0


def test_the_gate_shows_nothing_when_nothing_reaches_the_floor_and_counts_it():
    rng = np.random.default_rng(1)
    index, ids, vectors, texts, metas = corpus(rng, 200, 32)
    hits = index.search(MemoryQuery(-vectors[0], 5, ScoreWeights(1.0, 0.1, 0.0, floor=0.95, margin=0.1), NOW))
    assert list(hits) == [] and hits.below_floor == 200 and hits.candidates == 200


def test_without_a_gate_the_search_is_the_reference_formula():
    rng = np.random.default_rng(2)
    index, ids, vectors, texts, metas = corpus(rng, 500, 32)
    weights = ScoreWeights()  # 0.5 / 0.5 / 0.1, no lexical part, no gate
    q = vectors[3]
    hits = index.search(MemoryQuery(q, 5, weights, NOW, query_text="apple river"))
    sims = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    totals = ranking.total_scores(sims, [m["importance"] for m in metas], [m["ts_epoch"] for m in metas], NOW, weights)
    assert [h.id for h in hits] == [ids[i] for i in ranking.top_k_by_score(totals, ids, 5)]
    assert hits.below_floor == 0 and hits.floor is None


def test_the_lexical_part_is_bm25_over_its_largest_value():
    index = MemoryIndex(4)
    index.upsert(["a", "b", "c"], np.eye(4, dtype=np.float32)[:3],
                 ["peanut allergy", "passport expires in March", "cycling to work"], [{"scope": "global"}] * 3)
    lexical = index.lexical("Am I allergic to peanuts?")
    assert lexical[1] == lexical[2] == 0.0 and 0.0 < lexical[0] <= 1.0
    assert np.all(index.lexical("nothing in common here") == 0.0)
    index.upsert(["d"], np.eye(4, dtype=np.float32)[3:], ["peanut butter"], [{"scope": "global"}])
    assert index.lexical("peanut")[3] > 0  # a write rebuilds the lexical side


def test_the_match_by_stem_prefix_joins_forms_the_stemmer_cuts_apart():
    texts = ["Alice is allergic to peanuts", "Bob is allergic to shellfish", "The household shops on Saturdays",
             "Carol reads art books", "Dan is ready"]
    bm25 = BM25Index([tokenize(t) for t in texts])
    assert tokenize("allergies") == ["allergi"] and bm25.scores(tokenize("Which allergies?")).max() == 0.0
    match = bm25.prefix_match(tokenize("Which allergies should I know about?"))
    assert match == pytest.approx(prefix_match_by_hand(texts, "Which allergies should I know about?"))
    assert match[0] == match[1] > 0.3 and match[2:].max() == 0.0
    # a short stem meets only itself: "read" not "readi" ("ready"), "art" not "artist"
    short = bm25.prefix_match(tokenize("the artist read"))
    assert short[3] > 0 and short[4] == 0.0 and short == pytest.approx(prefix_match_by_hand(texts, "the artist read"))
