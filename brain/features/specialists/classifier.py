"""Which specialist a request is for, learnt from labelled requests: a softmax regression.

The semantic score (:mod:`brain.features.specialists.scoring`) measures what a request is *about*. Users'
requests often name another specialist's subject ("draft a reply to Tom saying I can't make
Friday" is about a day, and asks for email) or talk about a specialist's subject without asking for
its action ("how does OCR work"). Requests labelled with the specialist that serves them, or with
none, teach both.

The classes are the registered specialists and "none". A request's features are its unit vector,
every specialist's score and lexical share (so a phrase the YAML covers still counts), and
ln(words, at most 40). They are standardised with the training rows' mean and spread. The model is
a multinomial logistic regression with a light L2 penalty, fitted by full-batch gradient descent
from zero, so the same examples always give the same model. A specialist's probability is its
match's confidence, and the bands are read from it.

How it was chosen, and what it scores on requests written blind, is in
``bench/SPECIALISTS_RESULTS.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pydantic

from brain.features.specialists.scoring import CONFIDENCE_MAX_WORDS, SpecialistBands, SpecialistMatch
from brain.model.errors import ConfigError

#: a specialist (and "none") needs at least this many labelled requests for the classifier to be used
MIN_EXAMPLES = 5
L2 = 1.0
ITERATIONS = 400
LEARNING_RATE = 0.5


class SpecialistExample(pydantic.BaseModel):
    """One labelled request: ``expected`` is the id of the specialist that serves it, or null for none."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    request: str = pydantic.Field(min_length=1)
    expected: str | None


def examples_path(specialists_path: str | Path) -> Path:
    """Where the labelled requests of a specialists file live: beside it, ``<stem>_examples.jsonl``."""
    path = Path(specialists_path)
    return path.with_name(f"{path.stem}_examples.jsonl")


def load_examples(path: str | Path) -> list[SpecialistExample]:
    """Every labelled request of a JSON Lines file, validated whole: a bad line raises
    :class:`ConfigError` naming the file and the line, and nothing is returned."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the specialists' labelled requests {path}: {exc}") from exc
    out, problems = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(SpecialistExample.model_validate(json.loads(line)))
        except (json.JSONDecodeError, pydantic.ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, pydantic.ValidationError) else str(exc)
            problems.append(f"line {number}: {detail}")
    if problems:
        raise ConfigError(
            f"{path}: {len(problems)} bad line(s); each line must be "
            '{"request": "<text>", "expected": "<specialist id>" or null}: ' + "; ".join(problems[:5])
        )
    return out


def request_features(q: np.ndarray, ranking: Sequence[SpecialistMatch], ids: Sequence[str], words: int) -> np.ndarray:
    """The classifier's raw inputs for one request: its vector ``q``, the score and lexical share of
    each specialist in ``ids`` (from ``ranking``), and ln(words, at most 40)."""
    by_id = {m.id: m for m in ranking}
    return np.concatenate(
        [
            np.asarray(q, dtype=np.float64),
            [by_id[i].score for i in ids],
            [by_id[i].lexical for i in ids],
            [np.log(max(1, min(words, CONFIDENCE_MAX_WORDS)))],
        ]
    )


@dataclass(frozen=True, eq=False)
class SpecialistClassifier:
    """A fitted model: ``ids`` are the specialists it knows (sorted), its last class is "none"."""

    ids: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # (features, classes)
    bias: np.ndarray  # (classes,)

    @classmethod
    def fit(cls, features: np.ndarray, labels: Sequence[str | None], ids: Sequence[str]) -> SpecialistClassifier:
        """Fit on rows of :func:`request_features` and their labels (a specialist id in ``ids`` or None)."""
        ids = tuple(ids)
        classes = [*ids, None]
        y = np.array([classes.index(label) for label in labels])
        x = np.asarray(features, dtype=np.float64)
        mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
        x = (x - mean) / scale
        n, k = len(x), len(classes)
        onehot = np.eye(k)[y]
        weights, bias = np.zeros((x.shape[1], k)), np.zeros(k)
        for _ in range(ITERATIONS):
            grad = _softmax(x @ weights + bias) - onehot
            weights -= LEARNING_RATE * (x.T @ grad / n + L2 / n * weights)
            bias -= LEARNING_RATE * grad.mean(axis=0)
        return cls(ids, mean, scale, weights, bias)

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Per row of features: the probability of each specialist in ``ids``, then of none."""
        x = (np.atleast_2d(features) - self.mean) / self.scale
        return _softmax(x @ self.weights + self.bias)

    def rerank(
        self, ranking: Sequence[SpecialistMatch], q: np.ndarray, words: int, bands: SpecialistBands
    ) -> tuple[SpecialistMatch, ...]:
        """``ranking`` ordered by the classifier's probability, which becomes each match's confidence
        and gives its band (ties by id)."""
        p = self.probabilities(request_features(q, ranking, self.ids, words))[0]
        prob = dict(zip(self.ids, p.tolist()))
        out = [replace(m, confidence=prob.get(m.id, 0.0), band=bands.band(prob.get(m.id, 0.0))) for m in ranking]
        return tuple(sorted(out, key=lambda m: (-m.confidence, m.id)))


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return p


__all__ = [
    "MIN_EXAMPLES",
    "SpecialistClassifier",
    "SpecialistExample",
    "examples_path",
    "load_examples",
    "request_features",
]
