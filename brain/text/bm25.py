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
        self._lengths = lengths
        self._k1, self._b = k1, b
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
        weight: np.ndarray = idf * tf * (self._k1 + 1.0) / (tf + self._norm[docs])
        return weight

    def unseen_idf(self) -> float:
        """The idf of a term no document holds: what a query word missing from every document weighs."""
        return math.log(1.0 + (self.size + 0.5) / 0.5)

    def idf(self, term: str) -> float:
        posting = self._postings.get(term)
        return self.unseen_idf() if posting is None else posting[2]

    def max_score(self, query_tokens: Sequence[str]) -> float:
        """What the query itself could score: ``sum(idf * (k1 + 1))`` over its distinct tokens, a token no
        document holds weighing as much as the rarest (:meth:`unseen_idf`). It bounds :meth:`scores` (term
        frequency saturates below ``k1 + 1``), and dividing by it puts a match on a 0..1 scale that a poor
        set of documents cannot inflate: a query whose words are mostly missing stays a poor match, however
        few documents a search may see."""
        return sum(self.idf(t) * (self._k1 + 1.0) for t in dict.fromkeys(query_tokens))

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

    def prefix_match(
        self, query_tokens: Sequence[str], min_prefix: int = 5, docs: np.ndarray | None = None
    ) -> np.ndarray:
        """Each document's match with the query by stem prefix, 0..1: per distinct query token the best
        BM25 term score among its :meth:`related_terms`, summed, over the largest sum possible (each
        token's best ``idf * (k1 + 1)``). Unlike :meth:`max_score`, tokens no document matches count for
        nothing: this is evidence of a shared word, not a measure of the whole query. ``docs`` (document
        numbers): only those, in that order (a search needs a few, and a few cost a few binary searches
        per term)."""
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


class BM25Union:
    """BM25 over several indexes' documents as if they were one list (index i's documents numbered after
    index i-1's): the document count, mean length and each term's document frequency are the union's, so
    the scores equal those of one :class:`BM25Index` over every document. A search over several parts of
    an index (an entity's memories and the global ones) ranks with it; one index is used as it is."""

    def __init__(self, indexes: Sequence[BM25Index]):
        self.indexes = list(indexes)
        self.size = sum(ix.size for ix in self.indexes)
        self.starts = np.cumsum([0, *(ix.size for ix in self.indexes)])
        first = self.indexes[0]
        self._k1 = first._k1
        total = float(sum(ix._lengths.sum() for ix in self.indexes))
        mean_length = total / self.size if self.size and total > 0 else 1.0
        self._norms = [ix._k1 * (1.0 - ix._b + ix._b * ix._lengths / mean_length) for ix in self.indexes]
        self._idfs: dict[str, float] = {}

    def unseen_idf(self) -> float:
        """:meth:`BM25Index.unseen_idf` over the union."""
        return math.log(1.0 + (self.size + 0.5) / 0.5)

    def _idf(self, term: str) -> float:
        idf = self._idfs.get(term)
        if idf is None:
            held = sum(ix._postings[term][0].size for ix in self.indexes if term in ix._postings)
            idf = self._idfs[term] = math.log(1.0 + (self.size - held + 0.5) / (held + 0.5))
        return idf

    def _known(self, term: str) -> bool:
        return any(term in ix._postings for ix in self.indexes)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """:meth:`BM25Index.scores` over the union."""
        if len(self.indexes) == 1:
            return self.indexes[0].scores(query_tokens)
        out = np.zeros(self.size, dtype=np.float64)
        for token in dict.fromkeys(query_tokens):
            if not self._known(token):
                continue
            idf = self._idf(token)
            for ix, start, norm in zip(self.indexes, self.starts, self._norms):
                posting = ix._postings.get(token)
                if posting is not None:
                    rows, freqs, _ = posting
                    out[start + rows] += idf * freqs * (self._k1 + 1.0) / (freqs + norm[rows])
        return out

    def max_score(self, query_tokens: Sequence[str]) -> float:
        """:meth:`BM25Index.max_score` over the union."""
        if len(self.indexes) == 1:
            return self.indexes[0].max_score(query_tokens)
        return sum(self._idf(t) * (self._k1 + 1.0) for t in dict.fromkeys(query_tokens))

    def prefix_match(
        self, query_tokens: Sequence[str], min_prefix: int = 5, docs: np.ndarray | None = None
    ) -> np.ndarray:
        """:meth:`BM25Index.prefix_match` over the union (``docs`` numbered in the union)."""
        if len(self.indexes) == 1:
            return self.indexes[0].prefix_match(query_tokens, min_prefix, docs)
        docs = np.arange(self.size) if docs is None else np.asarray(docs, dtype=np.int64)
        part = np.searchsorted(self.starts, docs, side="right") - 1
        out = np.zeros(docs.size, dtype=np.float64)
        top = 0.0
        for token in dict.fromkeys(query_tokens):
            terms = list(dict.fromkeys(t for ix in self.indexes for t in ix.related_terms(token, min_prefix)))
            if not terms:
                continue
            best = np.zeros(docs.size, dtype=np.float64)
            for term in terms:
                idf = self._idf(term)
                for i, (ix, start, norm) in enumerate(zip(self.indexes, self.starts, self._norms)):
                    posting = ix._postings.get(term)
                    mine = np.flatnonzero(part == i)
                    if posting is None or not mine.size:
                        continue
                    rows, freqs, _ = posting
                    local = docs[mine] - start
                    at = np.minimum(np.searchsorted(rows, local), rows.size - 1)
                    tf = np.where(rows[at] == local, freqs[at], 0.0)
                    np.maximum.at(best, mine, idf * tf * (self._k1 + 1.0) / (tf + norm[local]))
            out += best
            top += max(self._idf(t) for t in terms) * (self._k1 + 1.0)
        return out / top if top > 0 else out


__all__ = ["BM25Index", "BM25Union"]
