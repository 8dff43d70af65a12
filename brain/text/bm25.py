"""Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009).

Pure: tokenised documents in, one score per document out; no store, no tokenizer of its own (pair it
with :func:`brain.text.keywords.tokenize`). Turn search and specialist routing both rank with it,
so one implementation keeps their lexical scores on the same scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


class BM25Index:
    """Okapi BM25 over a fixed list of tokenised documents.

    ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))`` (never negative), term frequency saturated by ``k1``
    and normalised by document length with ``b``. Postings are numpy arrays per term, so a query
    costs a few vector additions per query term.
    """

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75):
        self.size = len(documents)
        lengths = np.array([len(d) for d in documents], dtype=np.float64)
        mean_length = float(lengths.mean()) if self.size and lengths.mean() > 0 else 1.0
        self._norm = k1 * (1.0 - b + b * lengths / mean_length)
        self._k1 = k1
        counts: dict[str, dict[int, int]] = {}
        for row, doc in enumerate(documents):
            for token in doc:
                per_doc = counts.setdefault(token, {})
                per_doc[row] = per_doc.get(row, 0) + 1
        self._postings: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
        for token, per_doc in counts.items():
            rows = np.fromiter(per_doc.keys(), dtype=np.int64, count=len(per_doc))
            freqs = np.fromiter(per_doc.values(), dtype=np.float64, count=len(per_doc))
            idf = math.log(1.0 + (self.size - len(per_doc) + 0.5) / (len(per_doc) + 0.5))
            self._postings[token] = (rows, freqs, idf)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document; a query word counts once however often it is repeated."""
        out = np.zeros(self.size, dtype=np.float64)
        for token in dict.fromkeys(query_tokens):
            posting = self._postings.get(token)
            if posting is None:
                continue
            rows, freqs, idf = posting
            out[rows] += idf * freqs * (self._k1 + 1.0) / (freqs + self._norm[rows])
        return out

    def max_score(self, query_tokens: Sequence[str]) -> float:
        """An upper bound of :meth:`scores` for these tokens: ``sum(idf * (k1 + 1))`` over the distinct
        tokens some document holds (term frequency saturates below ``k1 + 1``). Dividing by it puts a
        query's lexical match on a 0..1 scale whatever the query's length."""
        return sum(self._postings[t][2] * (self._k1 + 1.0) for t in dict.fromkeys(query_tokens) if t in self._postings)


__all__ = ["BM25Index"]
