"""Memory scoring and exact top-k, as pure functions over numpy arrays.

    relevance = similarity + w_lex * lexical
    score     = w_sim * relevance + w_imp * importance / 5 + w_rec * 0.5 ** (age / half_life)

``similarity`` is the cosine similarity of unit vectors; ``lexical`` is the memory's BM25 score for
the query's keyword tokens divided by what those tokens could score, a token no visible memory holds
counted too (so 0..1, and a poor match stays poor however few memories a search sees; see
:meth:`brain.text.BM25Index.max_score`). With a relevance gate (``floor`` and/or ``margin`` set) a
memory is a candidate only when it is relevant:

    relevance >= floor - w_fi * (importance - 1) / 4 * [match >= m_fi]
    and relevance >= (best relevance among those) - margin

(``w_fi``, ``floor_importance``: a critical memory gets a lower bar than a trivial one, since missing
it costs more than showing it; but only with words in common with the query, or with the
conversation's latest turns when the context asks: ``match`` is the memory's best stem-prefix match
with those texts (:meth:`brain.text.BM25Index.prefix_match`, 0..1, "allergies" meets "allergic") and
``m_fi`` is ``floor_importance_match``. Without that evidence an important memory of
someone else, as close in meaning as any unrelated sentence can be, would pass the lowered bar.
With ``m_fi = 0`` every memory gets it.)

For a message in the first person, the asking entity's own memories may pass :func:`own_floor` instead
(they stand out among that entity's other memories). The score orders the candidates. Without a gate
and with ``w_lex = 0`` this is the reference formula ``w_sim * similarity + w_imp * importance / 5 +
recency``.

The importance and recency parts do not depend on the query, and the lexical part and the match are
computed exactly for every memory from postings, so only the similarity has to be computed per query — and
only for the memories that could still be shown. :func:`bounded_top_k` (no gate) and
:func:`gated_bounded_top_k` find those with an int8 pre-score whose error is bounded per memory (see
:func:`quantize_rows`), then rescore the survivors in float32. Every memory they skip provably fails
the gate or scores below the k-th result, so the answer equals an exhaustive float32 scoring of
every candidate (:func:`gated_top_k_reference`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from brain.model.vectors import unit_rows

if TYPE_CHECKING:
    from brain.config.fields import RankingFields

try:  # SIMD int8 dot products; numpy has no fast int8 matrix-vector product
    import simsimd

    _simsimd: ModuleType | None = simsimd
except ImportError:  # pragma: no cover - simsimd is a declared dependency
    _simsimd = None

DAY_SECONDS = 86400.0
# float32 dot products of unit vectors differ from the real value by at most ~d * 2**-24;
# this covers d up to several thousand with room to spare.
FLOAT32_DOT_SLACK = 1e-4
# One thread: a second one only pays on an idle machine, and on a busy 2-core box (the chat
# backend, the embedder) it measured 8x slower than one. Callers that want more set this.
INT8_THREADS = 1
# rows per block when taking the pruning threshold from block maxima
THRESHOLD_BLOCK = 64
#: m_fi of the relevance ranking: the stem-prefix match an important memory needs for its lower floor.
#: Chosen on LoCoMo's tuning conversations (bench/RELEVANCE_RESULTS.md): from 0.3 up, another person's
#: memories pass no more often than with no lowering at all; a fact sharing one of a short message's
#: two words ("Which allergies should I know about?" / "Alice is allergic to peanuts") has about 0.45.
FLOOR_IMPORTANCE_MATCH = 0.3


@dataclass(frozen=True)
class ScoreWeights:
    similarity: float = 0.5
    importance: float = 0.5
    recency: float = 0.1
    half_life_seconds: float = 30 * DAY_SECONDS
    #: what a memory's age is measured from: "created" (its timestamp) or "last_used" (when it was
    #: last retrieved, ``last_used`` in its metadata; its timestamp until then)
    recency_from: str = "created"
    #: w_lex: weight of the lexical match (0..1) in a memory's relevance
    lexical: float = 0.0
    #: a memory less relevant than this is never shown (None: no floor)
    floor: float | None = None
    #: a memory whose relevance is further than this below the best one's is not shown (None: no margin)
    margin: float | None = None
    #: w_fi: how much lower the floor is for an importance-5 memory than for an importance-1 one
    floor_importance: float = 0.0
    #: m_fi: the stem-prefix match with the query (0..1) a memory needs for that lower floor (0: none)
    floor_importance_match: float = 0.0
    #: for a message in the first person, the asking entity's own memories may pass :func:`own_floor` instead:
    #: at least ``first_person_floor`` (None: no such floor) and ``first_person_stand_out`` above the mean
    #: relevance of the entity's other memories
    first_person_floor: float | None = None
    first_person_stand_out: float = 0.0
    #: the background when too few own memories exist to measure one: unrelated pairs' mean similarity
    unrelated_mean: float = 0.0
    #: the floor on similarity alone of a memory in another language than the message (None: the usual floor;
    #: :mod:`brain.text.language` tells the languages)
    across_floor: float | None = None

    @property
    def gated(self) -> bool:
        return self.floor is not None or self.margin is not None

    @classmethod
    def reference(cls, settings: RankingFields) -> ScoreWeights:
        """The reference formula of the ``RAG_WEIGHT_*`` settings: no gate, no lexical part."""
        return cls(
            similarity=settings.weight_similarity,
            importance=settings.weight_importance,
            recency=settings.weight_recency,
            half_life_seconds=settings.recency_half_life_days * DAY_SECONDS,
            recency_from=getattr(settings, "recency_from", "created"),
        )

    @classmethod
    def relevance(
        cls,
        settings: RankingFields,
        floor: float | None,
        margin: float | None,
        spread: float = 1.0,
        first_person: tuple[float, float, float] | None = None,
        across_floor: float | None = None,
    ) -> ScoreWeights:
        """The relevance ranking: the ``RAG_RELEVANCE_*`` weights behind the gate of ``floor`` and
        ``margin``, in cosine units (the caller calibrates them, see :mod:`brain.rules.relevance`).
        ``spread`` scales the weights that add to a similarity (lexical, importance, recency, the lower
        floor of important memories) into the embedder's units: they were set for a model whose
        similarities spread that much wider (:func:`brain.rules.relevance.spread_scale`)."""
        return cls(
            similarity=1.0,
            importance=settings.relevance_importance * spread,
            recency=settings.relevance_recency * spread,
            half_life_seconds=settings.recency_half_life_days * DAY_SECONDS,
            recency_from=getattr(settings, "recency_from", "created"),
            lexical=settings.relevance_lexical * spread,
            floor=floor,
            margin=margin,
            floor_importance=settings.relevance_floor_importance * spread,
            floor_importance_match=FLOOR_IMPORTANCE_MATCH,
            first_person_floor=None if first_person is None else first_person[0],
            first_person_stand_out=0.0 if first_person is None else first_person[1],
            unrelated_mean=0.0 if first_person is None else first_person[2],
            across_floor=across_floor,
        )

    @classmethod
    def core(cls, settings: RankingFields) -> ScoreWeights:
        """The order of the facts always shown: importance first; among equal importance the closer to
        the message, then the newer. Importance steps are 0.2 apart and the similarity part spans at most 0.1,
        so it only breaks ties of importance; the recency part (at most 0.0005) only those of similarity
        (within 0.01): a fact learned later is not thereby closer to what is asked."""
        return cls(
            similarity=0.05,
            importance=1.0,
            recency=0.0005,
            half_life_seconds=settings.recency_half_life_days * DAY_SECONDS,
            recency_from=getattr(settings, "recency_from", "created"),
        )

    @classmethod
    def from_settings(cls, settings: RankingFields) -> ScoreWeights:
        """The reference formula of the settings (what searches rank by)."""
        return cls.reference(settings)


def recency_epoch(metadata: Mapping[str, object]) -> float:
    """The epoch a memory's age is measured from under ``recency_from="last_used"``: its last use,
    else its timestamp (``ts_epoch``), else 0. A stored value that is not a finite number (a row
    written around the schema, e.g. ``last_used: "yesterday"``) counts as absent."""
    for key in ("last_used", "ts_epoch"):
        value = metadata.get(key)
        if not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value):
            return float(value)
    return 0.0


def importance_part(importance: np.ndarray, weights: ScoreWeights) -> np.ndarray:
    return weights.importance * (np.asarray(importance, dtype=np.float64) / 5.0)


def recency_part(epochs: np.ndarray, now: float, weights: ScoreWeights) -> np.ndarray:
    """Bonus halving every half-life; a timestamp in the future counts as age 0."""
    age = np.maximum(now - np.asarray(epochs, dtype=np.float64), 0.0)
    return weights.recency * np.exp2(-age / weights.half_life_seconds)


@dataclass(frozen=True)
class RecencyFactors:
    """:func:`recency_part` of many rows as one multiply per row, for rows whose times do not change between
    searches: 0.5**((now-t)/h) = 2**((t_ref-now)/h) * 2**((t-t_ref)/h), the second factor computed once per
    half-life and time source (``growth``; None where it would underflow: then :func:`recency_part`)."""

    half_life: float
    source: str
    t_ref: float
    growth: np.ndarray | None

    @classmethod
    def of(cls, epochs: np.ndarray, weights: ScoreWeights) -> RecencyFactors:
        h = weights.half_life_seconds
        t_ref = float(epochs.max()) if epochs.size else 0.0
        exponent = (epochs - t_ref) / h
        # below 2**-1000 the factor underflows: then exp2 per query instead
        usable = epochs.size and exponent.min() > -1000
        return cls(h, weights.recency_from, t_ref, np.exp2(exponent) if usable else None)

    def fits(self, weights: ScoreWeights) -> bool:
        return (self.half_life, self.source) == (weights.half_life_seconds, weights.recency_from)

    def part(self, epochs: np.ndarray, now: float, weights: ScoreWeights) -> np.ndarray:
        """The recency part of ``epochs`` (the rows these factors were made of) at ``now``."""
        if self.growth is None or (self.t_ref - now) / self.half_life > 1000:
            return recency_part(epochs, now, weights)
        out: np.ndarray = self.growth * (2.0 ** ((self.t_ref - now) / self.half_life))
        np.minimum(out, 1.0, out=out)  # timestamps in the future count as age 0
        out *= weights.recency
        return out


def similarity_part(similarity: np.ndarray, weights: ScoreWeights) -> np.ndarray:
    return weights.similarity * np.asarray(similarity, dtype=np.float64)


def total_scores(
    similarity: ArrayLike,
    importance: ArrayLike,
    epochs: ArrayLike,
    now: float,
    weights: ScoreWeights,
    lexical: ArrayLike | None = None,
) -> np.ndarray:
    """Scores of every candidate (used by brute-force checks and small candidate sets); ``lexical``:
    each candidate's lexical match (0..1), absent for none."""
    lex = 0.0 if lexical is None else weights.lexical * np.asarray(lexical, dtype=np.float64)
    totals: np.ndarray = (
        weights.similarity * (np.asarray(similarity, dtype=np.float64) + lex)
        + importance_part(np.asarray(importance), weights)
        + recency_part(np.asarray(epochs), now, weights)
    )
    return totals


def lowers_floor(weights: ScoreWeights) -> bool:
    """Whether importance lowers the floor, so that a search needs each memory's importance."""
    return weights.floor is not None and weights.floor_importance > 0


#: with fewer other own memories than this their mean says little: the background is unrelated pairs' mean
OWN_BACKGROUND_MIN_ROWS = 4


def own_floor(weights: ScoreWeights, relevance_sum: float, count: int) -> float:
    """The floor of the asking entity's own memories for a message in the first person, from the sum of their
    relevance to the message and how many they are.

    A first-person message ("When is my kid's birthday?") shares neither the person's name nor, often, a
    word with the fact that answers it ("Nadia's son Leo turns seven on the 14th of March"), so it sits
    well below the floor, which was set on questions that name their person. What still marks the answer
    is that it stands out among the person's own memories: a memory passes when its relevance ``r`` reaches
    the mean relevance of the person's *other* memories + ``first_person_stand_out`` (``c``), and
    ``first_person_floor``. With ``S`` the sum over all ``n`` of them, ``r >= (S - r) / (n - 1) + c`` is
    ``r >= (S + c * (n - 1)) / n``: one floor for every own memory, computed from a sum (which a cached sum
    of the rows' vectors gives in one dot product). With fewer than :data:`OWN_BACKGROUND_MIN_ROWS` others
    the background is unrelated pairs' mean. +inf without the rule."""
    if weights.first_person_floor is None or count <= 0:
        return math.inf
    c = weights.first_person_stand_out
    if count - 1 >= OWN_BACKGROUND_MIN_ROWS:
        stands_out = (relevance_sum + c * (count - 1)) / count
    else:
        stands_out = weights.unrelated_mean + c
    return max(weights.first_person_floor, stands_out)


def floors(
    weights: ScoreWeights, importance: ArrayLike | None, match: ArrayLike | None = None, own: ArrayLike | None = None
) -> np.ndarray | float:
    """Each candidate's floor: ``floor - w_fi * (importance - 1) / 4`` where its stem-prefix ``match``
    reaches ``m_fi`` (every candidate when ``m_fi`` is 0; none when ``match`` is None), else ``floor``
    (-inf without a floor); ``own`` (by candidate, +inf for none): a lower floor a candidate may have
    instead (:func:`own_floor`)."""
    if weights.floor is None:
        return -np.inf
    if own is not None:
        return np.minimum(floors(weights, importance, match), np.asarray(own, dtype=np.float64))
    if not lowers_floor(weights):
        return weights.floor
    lowering = weights.floor_importance * (np.asarray(importance, dtype=np.float64) - 1.0) / 4.0
    if weights.floor_importance_match > 0:
        if match is None:
            return weights.floor
        lowering = np.where(np.asarray(match, dtype=np.float64) >= weights.floor_importance_match, lowering, 0.0)
    return weights.floor - lowering


def relevance_gate(
    similarity: np.ndarray,
    lexical_part: np.ndarray | float,
    weights: ScoreWeights,
    importance: ArrayLike | None = None,
    match: ArrayLike | None = None,
    own: ArrayLike | None = None,
) -> np.ndarray:
    """Which candidates pass the gate (all of them without one); ``lexical_part`` is ``w_lex * lexical``."""
    relevance = np.asarray(similarity, dtype=np.float64) + lexical_part
    ok = (
        np.ones(relevance.shape[0], dtype=bool)
        if weights.floor is None
        else relevance >= floors(weights, importance, match, own)
    )
    if weights.margin is not None and ok.any():
        ok &= relevance >= float(relevance[ok].max()) - weights.margin
    return ok


def gated_top_k_reference(
    similarity: ArrayLike,
    lexical_part: ArrayLike,
    static: ArrayLike,
    keys: Sequence[str],
    k: int,
    weights: ScoreWeights,
    importance: ArrayLike | None = None,
    match: ArrayLike | None = None,
    own: ArrayLike | None = None,
) -> tuple[list[int], int]:
    """Brute force: positions of the top ``k`` among the candidates that pass the gate, by
    ``w_sim * (similarity + lexical_part) + static``, ties by key; and how many were less relevant than
    their floor."""
    sims = np.asarray(similarity, dtype=np.float64)
    lex = np.broadcast_to(np.asarray(lexical_part, dtype=np.float64), sims.shape)
    ok = relevance_gate(sims, lex, weights, importance, match, own)
    totals = weights.similarity * (sims + lex) + np.asarray(static, dtype=np.float64)
    passing = np.flatnonzero(ok)
    order = top_k_positions(totals[passing], lambda i: keys[passing[i]], k)
    below = 0 if weights.floor is None else int(np.count_nonzero(sims + lex < floors(weights, importance, match, own)))
    return [int(passing[i]) for i in order], below


#: a vector whose L2 norm is further than this from 1 is scaled to unit length before it is stored: the
#: collection compares by cosine and the pre-score's error bound assumes unit rows
UNIT_TOLERANCE = 1e-4


def to_unit_length(vector: Any) -> tuple[np.ndarray, bool]:
    """``vector`` as float32 at unit length, and whether it had to be scaled. A vector already within
    :data:`UNIT_TOLERANCE` of unit length is returned as given, so a round trip is bit for bit. A zero
    vector comes back all zeros (:func:`~brain.model.vectors.unit_rows`); the store refuses it first."""
    given = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(np.asarray(vector, dtype=np.float64)))
    if abs(norm - 1.0) <= UNIT_TOLERANCE:
        return given, False
    return unit_rows(vector, np.float64).astype(np.float32), True


#: rows at unit length (float32), a zero row left at zero: :func:`brain.model.vectors.unit_rows`
normalize_rows = unit_rows


def quantize_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric per-row int8 quantisation.

    Returns ``(codes, scale, error)`` with ``x ≈ scale * codes`` and ``error = ||x - scale*codes||``
    rounded up, which is what :func:`bounded_top_k` needs to bound the pre-score's error.
    """
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    amax = np.abs(x).max(axis=1)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
    residual = x.astype(np.float64) - scale[:, None].astype(np.float64) * codes
    error = np.linalg.norm(residual, axis=1)
    error = np.nextafter(error.astype(np.float32), np.float32(np.inf))
    return codes, scale, error


def int8_dots(query_codes: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Integer dot products of one int8 query with every int8 row (exact: int32 accumulation)."""
    if codes.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if _simsimd is not None:
        out = _simsimd.cdist(query_codes[None, :], codes, metric="dot", threads=INT8_THREADS)
        return np.asarray(out, dtype=np.float64).reshape(-1)
    return codes.astype(np.int32) @ query_codes.astype(np.int32)  # pragma: no cover


def float_dots(query: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """float32 dot products of one query with each row, on one thread.

    Not ``rows @ query``: OpenBLAS splits even a small product over every core and, on a busy
    2-core machine, measured 5.9 ms where one SIMD thread takes 0.4 ms (2048 x 768).
    """
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if _simsimd is not None:
        return np.asarray(_simsimd.cdist(query[None, :], rows, metric="dot", threads=1), dtype=np.float64).reshape(-1)
    return np.asarray(np.einsum("ij,j->i", rows, query), dtype=np.float64)  # pragma: no cover


def approx_similarities(
    query: np.ndarray, codes: np.ndarray, scale: np.ndarray, error: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    # scale and error may be float32 or float64; the arithmetic below is float64
    """Pre-scores of a unit ``query`` against quantised unit rows, with a per-row error bound.

    With q = b*q̂ + e_q and x = a*x̂ + e_x:  q·x - ab(q̂·x̂) = b q̂·e_x + e_q·x, so
    |q·x - ab(q̂·x̂)| <= ||b q̂|| * ||e_x|| + ||e_q|| (x is a unit vector).
    """
    q_codes, (q_scale,), (q_error,) = quantize_rows(query)
    q_codes = q_codes[0]
    dots = int8_dots(q_codes, codes)
    approx = dots * scale
    approx *= float(q_scale)
    bq_norm = float(q_scale) * float(np.linalg.norm(q_codes.astype(np.float64)))
    slack = error * bq_norm
    slack += float(q_error) + FLOAT32_DOT_SLACK
    return approx, slack


def bounded_top_k(
    static: np.ndarray,
    approx_similarity: np.ndarray,
    similarity_slack: np.ndarray,
    k: int,
    exact_similarity: Callable[[np.ndarray], np.ndarray],
    w_similarity: float,
    candidates: np.ndarray | None = None,
    keys: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the exact top ``k`` by ``w_similarity * similarity + static``, best first.

    ``candidates`` (row indexes) restricts the search (e.g. to allowed scopes); ``exact_similarity``
    maps row indexes to their float32 similarities; ``keys`` (e.g. document ids, by row) break ties,
    as the brute-force reference does. Returns ``(rows, similarities)``. Rows whose upper
    bound falls below the k-th largest lower bound are never rescored: they cannot be in the top k.
    """
    rows = np.arange(static.shape[0]) if candidates is None else np.asarray(candidates)
    if rows.size == 0 or k <= 0:
        return rows[:0], np.zeros(0)
    approx = w_similarity * approx_similarity[rows] + static[rows]
    delta = w_similarity * similarity_slack[rows]
    if rows.size > k:
        threshold = kth_largest_lower_bound(approx - delta, k)
        survivors = rows[approx + delta >= threshold]
    else:
        survivors = rows
    sims = np.asarray(exact_similarity(survivors), dtype=np.float64)
    totals = w_similarity * sims + static[survivors]
    if keys is None:
        order = np.lexsort((survivors, -totals))[:k]
    else:
        order = top_k_positions(totals, lambda i: keys[survivors[i]], k)
    return survivors[order], sims[order]


def gated_bounded_top_k(
    static: np.ndarray,
    approx_similarity: np.ndarray,
    similarity_slack: np.ndarray,
    lexical_part: np.ndarray | None,
    k: int,
    exact_similarity: Callable[[np.ndarray], np.ndarray],
    weights: ScoreWeights,
    candidates: np.ndarray | None = None,
    keys: Sequence[str] | None = None,
    importance: np.ndarray | None = None,
    match: np.ndarray | None = None,
    own: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`bounded_top_k` behind the relevance gate: ``(rows, similarities, below_floor)``, equal
    to :func:`gated_top_k_reference` over the candidates. ``lexical_part`` (by row, ``w_lex *
    lexical``) is exact, so only the similarity is bounded (``approx ± slack``); ``importance`` and the
    stem-prefix ``match`` (by row) give each row its floor (:func:`floors`). In order:

    1. rows whose relevance cannot reach the floor are out; those whose lower bound reaches it are in;
    2. the best relevance is at least the best lower bound ``L`` of the rows surely in, so only rows
       whose upper bound reaches ``L`` can hold it: they are rescored and the best found exactly;
    3. with the best known, rows whose upper relevance is below ``best - margin`` are out, and the
       k-th best lower-bound score of the rows surely in prunes the rest, as in :func:`bounded_top_k`;
    4. the survivors are rescored and gated exactly; the rows in the uncertain band around the floor
       that were pruned are rescored too, so that the count below the floor is exact.
    """
    rows = np.arange(static.shape[0]) if candidates is None else np.asarray(candidates)
    if rows.size == 0 or k <= 0:
        return rows[:0], np.zeros(0), 0
    # by row, even when every row has the same floor: the rows are selected by masks below
    floor = np.broadcast_to(
        np.asarray(
            floors(
                weights,
                None if importance is None else np.asarray(importance)[rows],
                None if match is None else np.asarray(match)[rows],
                None if own is None else np.asarray(own)[rows],
            ),
            dtype=np.float64,
        ),
        rows.shape,
    )
    lex = np.zeros(rows.size) if lexical_part is None else np.asarray(lexical_part, dtype=np.float64)[rows]
    approx, slack = approx_similarity[rows], similarity_slack[rows]
    lo, hi = approx - slack, approx + slack
    exact = np.full(rows.size, np.nan)

    def rescore(mask: np.ndarray) -> None:
        todo = np.flatnonzero(mask & np.isnan(exact))
        if todo.size:
            exact[todo] = np.asarray(exact_similarity(rows[todo]), dtype=np.float64)

    possible = hi + lex >= floor
    certain = lo + lex >= floor
    margin = weights.margin
    best: float | None = None  # set only with a margin
    if margin is not None and possible.any():
        lower_best = float((lo + lex)[certain].max()) if certain.any() else -np.inf
        rescore(possible & (hi + lex >= lower_best))
        gated = possible & ~np.isnan(exact) & (exact + lex >= floor)
        if not gated.any():  # nothing reaches the floor
            rescore(possible)
            return (
                rows[:0],
                np.zeros(0),
                int(np.count_nonzero(~possible) + np.count_nonzero((exact + lex)[possible] < floor[possible])),
            )
        best = float((exact + lex)[gated].max())
        possible &= hi + lex >= best - margin
        certain &= lo + lex >= best - margin
    w = weights.similarity
    st = static[rows]
    if np.count_nonzero(certain) > k:
        threshold = kth_largest_lower_bound(w * (lo + lex)[certain] + st[certain], k)
        possible &= w * (hi + lex) + st >= threshold
    rescore(possible)
    ok = possible & (exact + lex >= floor)
    if best is not None and margin is not None:  # the best row itself may have been pruned by the threshold
        ok &= exact + lex >= best - margin
    below = 0
    if weights.floor is not None:
        rescore((lo + lex < floor) & (hi + lex >= floor))  # the uncertain band: decided exactly
        below = int(np.count_nonzero(hi + lex < floor) + np.count_nonzero((hi + lex >= floor) & (exact + lex < floor)))
    chosen = np.flatnonzero(ok)
    totals = w * (exact[chosen] + lex[chosen]) + st[chosen]
    if keys is None:
        order = np.lexsort((rows[chosen], -totals))[:k]
    else:
        order = top_k_positions(totals, lambda i: keys[rows[chosen[i]]], k)
    picked = chosen[order]
    return rows[picked], exact[picked], below


def kth_largest_lower_bound(values: np.ndarray, k: int) -> float:
    """A value no larger than the k-th largest of ``values``, found cheaply.

    The k-th largest of the block maxima is a valid bound: k blocks each hold an element at least
    that large. It is exact when the top k fall in different blocks, and costs one reduction
    instead of a partition of every value.
    """
    n = values.shape[0]
    blocks = n // THRESHOLD_BLOCK
    if blocks < 4 * k:
        return float(np.partition(values, n - k)[n - k])
    head = values[: blocks * THRESHOLD_BLOCK].reshape(blocks, THRESHOLD_BLOCK).max(axis=1)
    if n > blocks * THRESHOLD_BLOCK:
        head = np.append(head, values[blocks * THRESHOLD_BLOCK :].max())
    return float(np.partition(head, head.size - k)[head.size - k])


def top_k_by_score(totals: np.ndarray, keys: Sequence[str], k: int) -> list[int]:
    """Positions of the k best totals, ties broken by key: the brute-force reference ordering."""
    order = sorted(range(len(totals)), key=lambda i: (-float(totals[i]), keys[i]))
    return order[:k]


def top_k_positions(totals: np.ndarray, key_of: Callable[[int], str], k: int) -> np.ndarray:
    """Same answer as :func:`top_k_by_score`, sorting only the k best and their ties in Python."""
    n = totals.shape[0]
    if n > k:
        kth = np.partition(totals, n - k)[n - k]
        pool = np.flatnonzero(totals >= kth)
    else:
        pool = np.arange(n)
    ordered = sorted(pool.tolist(), key=lambda i: (-float(totals[i]), key_of(i)))
    return np.asarray(ordered[:k], dtype=np.intp)
