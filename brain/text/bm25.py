"""Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009).

Pure: tokenised documents in, one score per document out; no store, no tokenizer of its own (pair it
with :func:`brain.text.keywords.tokenize`). Turn search and specialist routing both rank with it,
so one implementation keeps their lexical scores on the same scale.
"""

from __future__ import annotations

import math
from bisect import bisect_left
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
        self._vocabulary: list[str] | None = None  # sorted, for prefix lookups; built on first use

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document; a query word counts once however often it is repeated."""
        out = np.zeros(self.size, dtype=np.float64)
        for token in dict.fromkeys(query_tokens):
            posting = self._postings.get(token)
            if posting is None:
                continue
            rows, freqs, idf = posting
            out[rows] += self._term_weight(idf, freqs, rows)
        return out

    def _term_weight(self, idf: float, tf: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """BM25's weight of a term occurring ``tf`` times in each of ``docs``."""
        return idf * tf * (self._k1 + 1.0) / (tf + self._norm[docs])

    def max_score(self, query_tokens: Sequence[str]) -> float:
        """An upper bound of :meth:`scores` for these tokens: ``sum(idf * (k1 + 1))`` over the distinct
        tokens some document holds (term frequency saturates below ``k1 + 1``). Dividing by it puts a
        query's lexical match on a 0..1 scale whatever the query's length."""
        return sum(self._postings[t][2] * (self._k1 + 1.0) for t in dict.fromkeys(query_tokens) if t in self._postings)

    def related_terms(self, token: str, min_prefix: int = 5) -> list[str]:
        """The indexed terms ``token`` matches by stem prefix: itself, and every term one of the two is
        a prefix of, the shorter being at least ``min_prefix`` characters long. Snowball stems some
        forms of a word differently ("allergies" -> "allergi", "allergic" -> "allerg"); the prefix
        joins them, and the minimum length keeps short stems ("art", "read") from matching widely."""
        terms = [token] if token in self._postings else []
        if len(token) < min_prefix:
            return terms
        terms += [token[:n] for n in range(min_prefix, len(token)) if token[:n] in self._postings]
        if self._vocabulary is None:
            self._vocabulary = sorted(self._postings)
        at = bisect_left(self._vocabulary, token)
        while at < len(self._vocabulary) and self._vocabulary[at].startswith(token):
            if self._vocabulary[at] != token:
                terms.append(self._vocabulary[at])
            at += 1
        return terms

    def prefix_match(self, query_tokens: Sequence[str], min_prefix: int = 5, docs=None) -> np.ndarray:
        """Each document's match with the query by stem prefix, 0..1: per distinct query token the best
        BM25 term score among its :meth:`related_terms`, summed, over the largest sum possible (each
        token's best ``idf * (k1 + 1)``). Tokens no document matches count for nothing, as in
        :meth:`max_score`; no such token at all gives zeros. ``docs`` (document numbers): only those,
        in that order (a search needs a few, and a few cost a few binary searches per term)."""
        docs = np.arange(self.size) if docs is None else np.asarray(docs, dtype=np.int64)
        out = np.zeros(docs.size, dtype=np.float64)
        top = 0.0
        for token in dict.fromkeys(query_tokens):
            terms = self.related_terms(token, min_prefix)
            if not terms:
                continue
            best = np.zeros(docs.size, dtype=np.float64)
            for term in terms:
                np.maximum(best, self._term_scores(term, docs), out=best)
            out += best
            top += max(self._postings[t][2] for t in terms) * (self._k1 + 1.0)
        return out / top if top > 0 else out

    def _term_scores(self, term: str, docs: np.ndarray) -> np.ndarray:
        """BM25 score of one indexed term in each of ``docs`` (its postings are in document order)."""
        rows, freqs, idf = self._postings[term]
        at = np.minimum(np.searchsorted(rows, docs), rows.size - 1)
        return self._term_weight(idf, np.where(rows[at] == docs, freqs[at], 0.0), docs)


__all__ = ["BM25Index"]
