"""Scoring specialists against a request: pure numpy over their vectors, no store access.

For a request vector ``q`` (all vectors unit length, ``sim`` = cosine similarity put into the reference
embedder's units, ``(cosine - shift) / spread``, :class:`SimilarityUnits`)::

    base    = w_c * sim(q, canonical) + w_p * sim(q, mean predicates) + w_o * sim(q, mean objects)
    penalty = not_penalty * max(0, max_i sim(q, not_i) - not_margin)
    lexical = bm25(request, specialist) / max(4, sum of bm25(request, s) over every specialist s)
    score   = base - penalty + w_lex * lexical

with weights 0.5 / 0.3 / 0.2 by default (normalised to sum 1), ``not_penalty`` 1.0 and
``not_margin`` 0.50. Each mean is renormalised to unit length, so all three parts compare by
cosine alike. The penalty only bites when the request is closer than ``not_margin`` to one of the
specialist's ``not`` examples; below that, resemblance to a negative example is the ordinary
overlap of sentences about the same things (with MiniLM, a margin of 0.40 already cost right
matches on the calibration set: "check my rental agreement" is 0.59 from docs' "email the contract
to my landlord").

Every number of the formula was chosen with all-MiniLM-L6-v2, the reference embedder, whose units are
its cosines as they are. Another embedder's cosines may sit elsewhere: multilingual-e5-small puts
unrelated sentences near 0.73 (MiniLM: 0.03) and spreads them four times narrower, so a ``not_margin``
of 0.50 would penalise every specialist and the lexical share would outweigh the dense part. Its
similarities are mapped through its relevance calibration (:mod:`brain.rules.relevance`) so that its
unrelated pairs land where MiniLM's do, and the weights, the margin and the lexical weight keep their
meaning. The map makes scores comparable, not equally reliable, so the confidence and the bands below
are fitted per embedder.

The lexical share (``w_lex`` 0.2, ``BRAIN_SPECIALIST_WEIGHT_LEXICAL``; 0 turns it off) is Okapi BM25
(:mod:`brain.rules.turn_search`, stemmed words) of the request against each specialist's canonical phrase,
predicates and objects, as a share of the total: words like "fahrenheit", "python" or "forecast" are
decisive where the small embedder blurs a long, data-laden request. On a blind set of requests it
lifted top-1 from 0.76 to the figures in ``bench/SPECIALISTS_RESULTS.md``. The floor of 4 points
keeps one common word shared with one specialist a small share, not all of it.

The band says how far a caller may trust a match. A raw score does not say it alone: all-MiniLM-L6-v2
scores a right match around 0.2-0.6, and the longer the request, the lower its cosine to any short
phrase tends to be, so a long request full of pasted data can be right at a score a short
chit-chat line also reaches. So each match gets a **confidence**, a logistic
fit on the development sets (``bench/SPECIALISTS_RESULTS.md``) of whether the top-1 is right and the
request is one a specialist serves::

    confidence = 1 / (1 + exp(-(intercept + c_s * score + c_l * ln(min(words, 40)))))

with -6.30 / 13.75 / 1.36 for MiniLM (:class:`SpecialistConfidence`, ``BRAIN_SPECIALIST_CONFIDENCE_*``)
and ``words`` the request's words (runs of letters and digits). Past 40 words the development sets
have almost no requests, so the length term stops growing there. The bands are thresholds on the
confidence (:class:`SpecialistBands`). The coefficients and the bands of each embedder measured on the
development sets are one table, ``brain.config.SPECIALIST_EMBEDDER_DEFAULTS`` (:func:`embedder_params`
says what an embedder without an entry gets). The score's margin over the runner-up and the lexical share
were tried as further features and added nothing once length was in.
Ties in score rank by specialist id, so a ranking is deterministic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from brain.config import (
    SPECIALIST_BAND_DEFAULTS,
    SPECIALIST_CONFIDENCE_DEFAULTS,
    SPECIALIST_EMBEDDER_DEFAULTS,
    SPECIALIST_REFERENCE_EMBEDDER,
    specialist_bands_in_order,
)
from brain.features.specialists.model import Specialist
from brain.model.errors import ConfigError
from brain.model.vectors import unit_rows
from brain.rules.relevance import Calibration, spread_scale
from brain.text import BM25Index, tokenize

#: weight of the lexical share (BM25 over each specialist's canonical, predicates and objects) added to
#: the dense score (in the reference embedder's units); 0 gives the plain 0.5/0.3/0.2 formula. Chosen on
#: the development sets (bench/SPECIALISTS_RESULTS.md): MiniLM misses keyword-heavy requests ("in
#: fahrenheit", "python script")
DEFAULT_LEXICAL_WEIGHT = 0.2
DEFAULT_NOT_PENALTY = 1.0
DEFAULT_NOT_MARGIN = 0.50
#: the BM25 total below which the lexical shares are scaled down
LEXICAL_FLOOR = 4.0
BANDS = ("strong", "good", "possible", "weak")
#: the request length beyond which the confidence's length term stays put
CONFIDENCE_MAX_WORDS = 40
_WORD = re.compile(r"\w+")


def request_words(request: str) -> int:
    """The words of a request the confidence counts: runs of letters and digits, at least 1."""
    return max(1, len(_WORD.findall(request)))


#: the mean similarity of unrelated pairs of the reference embedder (local/minilm-l6-v2) on the relevance
#: calibration's pairs (brain.rules.relevance): the origin of the units the formula's numbers are in
REFERENCE_UNRELATED_MEAN = 0.0346


@dataclass(frozen=True)
class SimilarityUnits:
    """An embedder's cosine similarities put into the reference embedder's units before they are
    weighted: ``(similarity - shift) / spread``. The weights, ``not_margin`` and the lexical weight were
    chosen with all-MiniLM-L6-v2, whose similarities spread about four times wider than
    multilingual-e5-small's (unrelated sentences: 0.03 +- 0.08 against 0.73 +- 0.02); in one unit they
    keep one meaning. The identity (0, 1) leaves the reference's similarities exactly as they are."""

    shift: float = 0.0
    spread: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.shift) and math.isfinite(self.spread)) or self.spread <= 0:
            raise ConfigError(f"similarity units need a finite shift and spread > 0, got {self.shift} / {self.spread}")

    @classmethod
    def from_calibration(cls, calibration: Calibration) -> SimilarityUnits:
        """The units of an embedder from its relevance calibration: its unrelated pairs' mean lands on the
        reference's and their spread becomes the reference's. The spread is
        :func:`brain.rules.relevance.spread_scale` (two decimals) and the shift is rounded to three, so
        that measuring the same embedder on other hardware gives the same scores."""
        spread = spread_scale(calibration)
        return cls(shift=round(calibration.mean - REFERENCE_UNRELATED_MEAN * spread, 3), spread=spread)

    def __call__(self, similarities: np.ndarray) -> np.ndarray:
        return (similarities - self.shift) / self.spread


@dataclass(frozen=True)
class SpecialistWeights:
    """Weights of the three similarities; normalised to sum 1 so scores stay on one scale."""

    canonical: float = 0.5
    predicates: float = 0.3
    objects: float = 0.2

    def __post_init__(self) -> None:
        values = (self.canonical, self.predicates, self.objects)
        if any(not math.isfinite(v) or v < 0 for v in values) or sum(values) <= 0:
            raise ConfigError(
                f"specialist weights must be >= 0 with a positive sum, got canonical={self.canonical}, "
                f"predicates={self.predicates}, objects={self.objects}"
            )

    def normalised(self) -> tuple[float, float, float]:
        total = self.canonical + self.predicates + self.objects
        return self.canonical / total, self.predicates / total, self.objects / total


@dataclass(frozen=True)
class SpecialistBands:
    """Thresholds of the bands on a match's confidence (:class:`SpecialistConfidence`):
    ``confidence > strong`` is strong, ``>= good`` good, ``>= possible`` possible, anything lower weak.
    Thresholds must be finite with ``possible <= good <= strong`` (the rule
    :func:`brain.config.specialist_bands_in_order` that Settings applies too); equal thresholds leave
    the band between them empty.

    The defaults are MiniLM's (``brain.config.SPECIALIST_BAND_DEFAULTS``), chosen on the six
    development sets of ``bench/`` with its confidence: ``possible`` (0.62) is the
    cut that best serves both "a clear request is right and not weak" and "a request no specialist
    serves is weak" (the larger of the two smaller shares; every leave-one-set-out fold put it
    between 0.615 and 0.623); ``good`` (0.65) leaves a narrow possible band above that cut for
    matches a slightly different set would have put below it; ``strong`` (0.90) is where at least 19
    in 20 top-1s of the development sets are right. The same rules on the same sets give another
    embedder's entry of ``brain.config.SPECIALIST_EMBEDDER_DEFAULTS`` (multilingual-e5-small:
    ``bench/SPECIALISTS_E5_RESULTS.md``).
    """

    strong: float = SPECIALIST_BAND_DEFAULTS["strong"]
    good: float = SPECIALIST_BAND_DEFAULTS["good"]
    possible: float = SPECIALIST_BAND_DEFAULTS["possible"]

    def __post_init__(self) -> None:
        if not specialist_bands_in_order(self.strong, self.good, self.possible):
            raise ConfigError(
                f"specialist bands must satisfy possible <= good <= strong, got possible={self.possible}, "
                f"good={self.good}, strong={self.strong}"
            )

    def band(self, confidence: float) -> str:
        if confidence > self.strong:
            return "strong"
        if confidence >= self.good:
            return "good"
        if confidence >= self.possible:
            return "possible"
        return "weak"


@dataclass(frozen=True)
class SpecialistConfidence:
    """How likely a match is right, from its score and the request's length (module docstring):
    ``1 / (1 + exp(-(intercept + score * s + length * ln(min(words, 40)))))``.

    ``score`` must be >= 0 (a higher score never lowers the confidence); ``length`` may have either
    sign. The defaults are MiniLM's, ``brain.config.SPECIALIST_CONFIDENCE_DEFAULTS``; another embedder's
    are its entry of ``brain.config.SPECIALIST_EMBEDDER_DEFAULTS``.
    """

    intercept: float = SPECIALIST_CONFIDENCE_DEFAULTS["intercept"]
    score: float = SPECIALIST_CONFIDENCE_DEFAULTS["score"]
    length: float = SPECIALIST_CONFIDENCE_DEFAULTS["length"]

    def __post_init__(self) -> None:
        values = (self.intercept, self.score, self.length)
        if any(not math.isfinite(v) for v in values) or self.score < 0:
            raise ConfigError(
                f"specialist confidence coefficients must be finite with score >= 0, got intercept={self.intercept}, "
                f"score={self.score}, length={self.length}"
            )

    def __call__(self, score: float, words: int) -> float:
        z = self.intercept + self.score * score + self.length * math.log(min(max(words, 1), CONFIDENCE_MAX_WORDS))
        # written so that exp never overflows, whatever the coefficients
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@dataclass(frozen=True)
class ScoringParams:
    """Everything the formula takes besides the vectors (see the module docstring)."""

    weights: SpecialistWeights = field(default_factory=SpecialistWeights)
    not_penalty: float = DEFAULT_NOT_PENALTY
    not_margin: float = DEFAULT_NOT_MARGIN
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT
    bands: SpecialistBands = field(default_factory=SpecialistBands)
    confidence: SpecialistConfidence = field(default_factory=SpecialistConfidence)
    units: SimilarityUnits = field(default_factory=SimilarityUnits)

    def __post_init__(self) -> None:
        if not math.isfinite(self.not_penalty) or self.not_penalty < 0:
            raise ConfigError(f"not_penalty must be >= 0, got {self.not_penalty}")
        if not math.isfinite(self.not_margin) or not -1.0 <= self.not_margin <= 1.0:
            raise ConfigError(f"not_margin must be between -1 and 1, got {self.not_margin}")
        if not math.isfinite(self.lexical_weight) or not 0.0 <= self.lexical_weight <= 1.0:
            raise ConfigError(f"lexical_weight must be between 0 and 1, got {self.lexical_weight}")


def embedder_params(
    embedder: str,
    calibration: Callable[[], Calibration],
    *,
    confidence: SpecialistConfidence | Mapping[str, float] | None = None,
    bands: SpecialistBands | Mapping[str, float] | None = None,
    units: SimilarityUnits | None = None,
) -> tuple[SimilarityUnits, SpecialistConfidence, SpecialistBands]:
    """The units, confidence and bands an embedder is scored with: its entry of
    ``brain.config.SPECIALIST_EMBEDDER_DEFAULTS``, under what the caller gives (a whole object, or a mapping
    of some of its fields, e.g. the settings that are set). An embedder without an entry has not been
    measured on the development sets: its units come from its relevance calibration (``calibration`` is
    called only then) and its confidence and bands are the reference embedder's, which then read as
    rough."""
    entry = SPECIALIST_EMBEDDER_DEFAULTS.get(embedder)
    if units is None:
        units = SimilarityUnits(**entry["units"]) if entry else SimilarityUnits.from_calibration(calibration())
    entry = entry or SPECIALIST_EMBEDDER_DEFAULTS[SPECIALIST_REFERENCE_EMBEDDER]
    if not isinstance(confidence, SpecialistConfidence):
        confidence = SpecialistConfidence(**{**entry["confidence"], **(confidence or {})})
    if not isinstance(bands, SpecialistBands):
        bands = SpecialistBands(**{**entry["bands"], **(bands or {})})
    return units, confidence, bands


@dataclass(frozen=True)
class SpecialistMatch:
    """One ranked specialist: ``score = weighted similarities - penalty + lexical``, with every part,
    and its ``confidence`` (from the score and the request's length), which gives the ``band``."""

    id: str
    description: str
    score: float
    band: str
    canonical: float  # cosine similarity of the request to the canonical phrase
    predicates: float  # ... to the mean of the predicates
    objects: float  # ... to the mean of the objects
    not_similarity: float | None  # highest similarity to a not example (None: it has none)
    closest_not: str | None  # that not example
    penalty: float
    lexical: float = 0.0  # this specialist's share of the request's BM25 evidence (0..1)
    confidence: float = 0.0  # how likely the match is right (0..1); the band is read from it

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, eq=False)  # arrays do not compare with ==
class SpecialistVectors:
    """One specialist and the vectors it is scored by (unit length, float32)."""

    spec: Specialist
    canonical: np.ndarray
    predicates: np.ndarray  # the unit mean of the predicates' vectors
    objects: np.ndarray  # the unit mean of the objects' vectors
    nots: np.ndarray  # (n_not, d), one row per not example

    @classmethod
    def from_embeddings(cls, spec: Specialist, vectors: np.ndarray) -> SpecialistVectors:
        """From the vectors of :attr:`Specialist.embedded_texts`, in that order."""
        s = spec.semantics
        p, o = len(s.predicates), len(s.objects)
        return cls(
            spec=spec,
            canonical=vectors[0].astype(np.float32),
            predicates=unit_mean(vectors[1 : 1 + p]),
            objects=unit_mean(vectors[1 + p : 1 + p + o]),
            nots=np.ascontiguousarray(vectors[1 + p + o :], dtype=np.float32),
        )


def unit_mean(rows: np.ndarray) -> np.ndarray:
    """The mean of unit vectors, renormalised to unit length."""
    mean = rows.mean(axis=0)
    # the inputs are unit vectors of phrases about one thing; a mean near zero would mean they cancel
    return unit_rows(mean if float(np.linalg.norm(mean)) > 1e-6 else rows[0])


class ScoringTable:
    """Every specialist's vectors stacked for one matrix product per part, and their BM25 index.

    Immutable once built; build a new one when the specialists change.
    """

    def __init__(self, specialists: Sequence[SpecialistVectors], dimension: int):
        entries = sorted(specialists, key=lambda e: e.spec.id)
        self.ids = [e.spec.id for e in entries]
        self._specs = [e.spec for e in entries]

        def stack(rows: list[np.ndarray]) -> np.ndarray:
            return np.stack(rows).astype(np.float32) if rows else np.zeros((0, dimension), dtype=np.float32)

        self._canonical = stack([e.canonical for e in entries])
        self._predicates = stack([e.predicates for e in entries])
        self._objects = stack([e.objects for e in entries])
        self._nots = stack([v for e in entries for v in e.nots])
        self._not_owner = np.array([i for i, e in enumerate(entries) for _ in range(len(e.nots))], dtype=np.int64)
        self._not_text = [t for e in entries for t in e.spec.semantics.not_]
        self._lexical = BM25Index([tokenize(e.spec.lexical_text) for e in entries])

    def __len__(self) -> int:
        return len(self.ids)

    def rank(self, q: np.ndarray, request: str, params: ScoringParams) -> tuple[SpecialistMatch, ...]:
        """Every specialist scored for the request vector ``q`` (and ``request``'s words for the
        lexical share, "" leaves it out, and for the confidence's length), best first."""
        n = len(self.ids)
        if not n:
            return ()
        wc, wp, wo = params.weights.normalised()
        sc, sp, so = self._canonical @ q, self._predicates @ q, self._objects @ q
        units = params.units
        base = wc * units(sc) + wp * units(sp) + wo * units(so)
        not_max = np.full(n, -np.inf)
        not_arg = np.full(n, -1)
        if len(self._not_owner):
            sims = self._nots @ q
            for j, (owner, sim) in enumerate(zip(self._not_owner, sims)):
                if sim > not_max[owner]:
                    not_max[owner], not_arg[owner] = sim, j
        penalty = np.where(
            np.isfinite(not_max), params.not_penalty * np.maximum(0.0, units(not_max) - params.not_margin), 0.0
        )
        lexical = np.zeros(n)
        if params.lexical_weight > 0 and request:
            bm25 = self._lexical.scores(tokenize(request))
            lexical = bm25 / max(float(bm25.sum()), LEXICAL_FLOOR)
        scores = base - penalty + params.lexical_weight * lexical
        order = sorted(range(n), key=lambda i: (-scores[i], self.ids[i]))
        words = request_words(request)
        out = []
        for i in order:
            spec = self._specs[i]
            has_not = not_arg[i] >= 0
            confidence = params.confidence(float(scores[i]), words)
            out.append(
                SpecialistMatch(
                    id=spec.id,
                    description=spec.description,
                    score=float(scores[i]),
                    band=params.bands.band(confidence),
                    canonical=float(sc[i]),
                    predicates=float(sp[i]),
                    objects=float(so[i]),
                    not_similarity=float(not_max[i]) if has_not else None,
                    closest_not=self._not_text[not_arg[i]] if has_not else None,
                    penalty=float(penalty[i]),
                    lexical=float(lexical[i]),
                    confidence=confidence,
                )
            )
        return tuple(out)
