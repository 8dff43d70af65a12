"""The in-process ranking index of memory documents (and of the other searchable types).

Chroma is the store of record; this index is a cache of every ``memory`` document laid out for
exact ranking. The store keeps one per indexed type (``BRAIN_INDEX_TYPES``): persona, faq and
summary documents are ranked by similarity alone with the same machinery, because Chroma's
filtered query (``where={"type": ...}``) scans metadata and measured 40-110 ms at 100k documents.
Layout: unit vectors in one contiguous float32 matrix (for exact rescoring), the same vectors
as int8 codes with a per-row scale and error bound (for the pre-score, a quarter of the bytes), and
importance, epoch, scope, validity window, expiry and row kind as arrays so the query-independent
parts of the score and the filters are vector operations. The row kind comes from the typed fields: an
active memory, a part (``part_of``: a chunk or vector row, ranked only when asked for), superseded
(``status: superseded``: ranked only by searches of every row, and by searches of a past time, ``at``,
that fall in its validity window) or retired (another inactive ``status``: ranked only by searches of
every row). A memory past its ``expires_at`` is left out of every search but those of every row. The
store keeps it in step with every write it makes, and rebuilds it from Chroma when it notices that
someone else changed the collection.

:class:`MemoryIndex` is longer than most classes here: the arrays must change together on every add,
replace and remove, and keeping those operations in one class keeps that invariant in one place.

Memory per memory document: 4*d (float32) + d (int8) + ~24 bytes of arrays, plus its text and
metadata as Python objects. At d=768: about 3.9 KB + text.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import numpy as np

from brain.model.results import GatedHits, MemoryHit
from brain.rules import ranking
from brain.rules.ranking import ScoreWeights
from brain.store.memory_query import MemoryQuery, Rows
from brain.store.memory_rows import ARRAYS, ROW_KINDS, check_export, finite_number, read_row
from brain.text import BM25Index, BM25Union, tokenize
from brain.text.language import LANGUAGES, in_another_language
from brain.text.language import distribution as language_distribution

log = logging.getLogger(__name__)

# Below this many candidate rows, exact float32 scoring of just those rows beats a full int8 pass.
SMALL_CANDIDATE_SET = 2048
#: Python objects per row (id, text, metadata, tags, keyword tokens and postings), beside the arrays: an
#: estimate for a memory of a sentence or two, checked against RSS by ``bench/bench_partitions.py``
ROW_OBJECT_BYTES = 1024


class MemoryIndex:
    """Exact top-k over memory vectors. Thread-safe."""

    # the per-row arrays of ARRAYS, allocated (and grown) by _alloc
    _f32: np.ndarray
    _i8: np.ndarray
    _scale: np.ndarray
    _qerr: np.ndarray
    _importance: np.ndarray
    _epoch: np.ndarray
    _used: np.ndarray
    _scope: np.ndarray
    _kind: np.ndarray
    _from: np.ndarray
    _until: np.ndarray
    _expires: np.ndarray
    _langs: np.ndarray  # by row, its language distribution (NaN: not told yet); allocated by _alloc too

    def __init__(self, dimension: int, capacity: int = 1024):
        self.dimension = dimension
        self._lock = threading.RLock()
        self._n = 0
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._texts: list[str] = []
        self._metas: list[dict[str, object]] = []
        self._tags: list[frozenset[str]] = []
        self._scope_code: dict[str, int] = {}
        # rows stored with values the index cannot use: id -> {field: what was done instead}
        self._problems: dict[str, dict[str, str]] = {}
        # (half_life, recency_from, t_ref, 2**((t-t_ref)/h))
        self._growth: ranking.RecencyFactors | None = None
        # the lexical side, built on the first search that weighs it and again after a change:
        # BM25 over every row in row order, and each text's keyword tokens by id (kept across rebuilds)
        self._bm25: BM25Index | None = None
        self._tokens: dict[str, list[str]] = {}
        # per scope, the sum of its rows' vectors and their count (the first-person floor's background), built
        # on first use and dropped by every write
        self._scope_sums: dict[str, tuple[np.ndarray, int]] = {}
        self._alloc(capacity)

    # ---- layout ------------------------------------------------------------------------------
    def _alloc(self, capacity: int) -> None:
        old_n = self._n if hasattr(self, "_f32") else 0  # the rows kept from the arrays being replaced
        for name, (dtype, per_dimension) in ARRAYS.items():
            arr: np.ndarray = np.zeros((capacity, self.dimension) if per_dimension else capacity, dtype=dtype)
            if old_n:
                arr[:old_n] = getattr(self, name)[:old_n]
            setattr(self, name, arr)
        # each row's language distribution (brain.text.language), NaN until a search first needs it; not in
        # ARRAYS: a snapshot does not carry it, since it is cheap to tell again for the few rows that need it
        langs = np.full((capacity, len(LANGUAGES)), np.nan, dtype=np.float32)
        if old_n:
            langs[:old_n] = self._langs[:old_n]
        self._langs = langs
        self._growth = None
        self._capacity = capacity

    def __len__(self) -> int:
        return self._n

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self._row

    @property
    def ids(self) -> list[str]:
        with self._lock:
            return list(self._ids)

    def nbytes(self) -> int:
        """Bytes held by the numeric arrays (excluding texts and metadata)."""
        return sum(getattr(self, name).nbytes for name in ARRAYS)

    @staticmethod
    def row_bytes(dimension: int) -> int:
        """Bytes the numeric arrays hold per row of vectors of ``dimension`` (float32 and int8 copies, and the
        per-row numbers), without the text and metadata objects or spare capacity."""
        return sum(
            np.dtype(dtype).itemsize * (dimension if per_dimension else 1) for dtype, per_dimension in ARRAYS.values()
        )

    def footprint(self) -> int:
        """The memory this index holds, estimated: its arrays and :data:`ROW_OBJECT_BYTES` per row."""
        return self.nbytes() + self._n * ROW_OBJECT_BYTES

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in one allocation (e.g. before a rebuild of known size)."""
        with self._lock:
            if rows > self._capacity:
                self._alloc(rows)

    def scope_names(self) -> set[str]:
        """The scopes of the rows held."""
        with self._lock:
            codes = set(np.unique(self._scope[: self._n]).tolist())
            return {scope for scope, code in self._scope_code.items() if code in codes}

    def problems(self) -> dict[str, dict[str, str]]:
        """Rows stored with values the index could not use: ``{id: {field: what was done instead}}``
        (rows left out entirely are listed too, under ``scope``)."""
        with self._lock:
            return {doc_id: dict(p) for doc_id, p in self._problems.items()}

    def note_problems(self, problems: dict[str, dict[str, str]]) -> None:
        """Report, with this index's own, the problems of rows another index found belong to no part."""
        with self._lock:
            self._problems.update(problems)

    def clear(self) -> None:
        with self._lock:
            self._n = 0
            self._ids, self._row, self._texts, self._metas, self._tags = [], {}, [], [], []
            self._scope_code = {}
            self._problems = {}
            self._bm25, self._tokens = None, {}
            self._scope_sums = {}
            self._alloc(1024)

    def _code(self, scope: str) -> int:
        code = self._scope_code.get(scope)
        if code is None:
            code = self._scope_code[scope] = len(self._scope_code)
        return code

    # ---- writes ------------------------------------------------------------------------------
    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str],
        metadatas: Sequence[dict[str, object]],
    ) -> None:
        if not len(ids):
            return
        unit = ranking.normalize_rows(np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimension))
        codes, scale, qerr = ranking.quantize_rows(unit)
        with self._lock:
            self._growth = None
            self._bm25 = None
            self._scope_sums = {}
            unusable, reported = [], []
            for j, doc_id in enumerate(ids):
                meta = metadatas[j]
                values, problems = read_row(meta)
                if problems:
                    self._problems[doc_id] = problems
                    reported.append(f"{doc_id}: {'; '.join(problems.values())}")
                else:
                    self._problems.pop(doc_id, None)
                if values is None:
                    unusable.append(doc_id)
                    continue
                row = self._row.get(doc_id)
                if row is None:
                    if self._n == self._capacity:
                        self._alloc(max(self._capacity + self._capacity // 2, 16))
                    row = self._n
                    self._n += 1
                    self._row[doc_id] = row
                    self._ids.append(doc_id)
                    self._texts.append("")
                    self._metas.append({})
                    self._tags.append(frozenset())
                self._f32[row] = unit[j]
                self._i8[row] = codes[j]
                self._scale[row] = scale[j]
                self._qerr[row] = qerr[j]
                self._importance[row] = values["importance"]
                self._epoch[row] = values["epoch"]
                self._used[row] = values["used"]
                self._scope[row] = self._code(values["scope"])
                self._kind[row] = values["kind"]
                self._from[row] = values["from"]
                self._until[row] = values["until"]
                self._expires[row] = values["expires"]
                if self._texts[row] != texts[j]:
                    self._tokens.pop(doc_id, None)
                    self._langs[row] = np.nan
                self._texts[row] = texts[j]
                self._metas[row] = dict(meta)
                self._tags[row] = values["tags"]
            if unusable:  # a row rewritten into something unusable leaves the index
                kept = {doc_id: self._problems[doc_id] for doc_id in unusable}
                self.remove(unusable)
                self._problems.update(kept)
        if reported:
            log.warning(
                "%d stored rows hold values the index cannot use (RagStore.index_problems() lists them): %s",
                len(reported),
                " | ".join(reported[:5]) + (" | ..." if len(reported) > 5 else ""),
            )

    def remove(self, ids: Iterable[str]) -> int:
        removed = 0
        with self._lock:
            self._growth = None
            self._bm25 = None
            self._scope_sums = {}
            for doc_id in ids:
                self._problems.pop(doc_id, None)
                self._tokens.pop(doc_id, None)
                row = self._row.pop(doc_id, None)
                if row is None:
                    continue
                last = self._n - 1
                if row != last:  # move the last row into the hole
                    moved = self._ids[last]
                    self._row[moved] = row
                    self._ids[row] = moved
                    self._texts[row] = self._texts[last]
                    self._metas[row] = self._metas[last]
                    self._tags[row] = self._tags[last]
                    for name in ARRAYS:
                        arr = getattr(self, name)
                        arr[row] = arr[last]
                    self._langs[row] = self._langs[last]
                self._ids.pop()
                self._texts.pop()
                self._metas.pop()
                self._tags.pop()
                self._n -= 1
                removed += 1
        return removed

    def set_last_used(self, used: dict[str, float]) -> dict[str, dict[str, object]]:
        """Record when rows were last retrieved (``last_used`` epoch; never moves back in time).

        Returns the updated metadata of each row still present, for persisting.
        """
        out: dict[str, dict[str, object]] = {}
        with self._lock:
            for doc_id, epoch in used.items():
                row = self._row.get(doc_id)
                if row is None:
                    continue
                meta = self._metas[row]
                before = finite_number(meta.get("last_used"))  # None too when the stored value is unusable
                if before is None or before < epoch:
                    meta = self._metas[row] = {**meta, "last_used": float(epoch)}
                    self._used[row] = float(epoch)
                    self._growth = None
                    problems = self._problems.get(doc_id)
                    if problems and problems.pop("last_used", None) and not problems:
                        del self._problems[doc_id]
                out[doc_id] = dict(meta)
        return out

    # ---- snapshots -----------------------------------------------------------------------------
    def export(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Everything the index holds, as numeric arrays (row order, copies) and JSON-ready rows
        (``ids``, ``texts``, ``metas``, ``tags``, ``scopes`` in code order, ``problems``, and ``tokens`` when
        the lexical side was built), for
        :meth:`restore` in another process (see :mod:`brain.store.snapshot`)."""
        with self._lock:
            n = self._n
            arrays = {name.lstrip("_"): getattr(self, name)[:n].copy() for name in ARRAYS}
            rows = {
                "ids": list(self._ids),
                "texts": list(self._texts),
                "metas": [dict(m) for m in self._metas],
                "tags": [sorted(t) for t in self._tags],
                "scopes": sorted(self._scope_code, key=self._scope_code.__getitem__),
                "problems": {doc_id: dict(p) for doc_id, p in self._problems.items()},
            }
            # each text's keyword tokens, when every row has them: a restore then builds BM25 without the stemmer
            if n and all(doc_id in self._tokens for doc_id in self._ids):
                rows["tokens"] = [self._tokens[doc_id] for doc_id in self._ids]
        return arrays, rows

    @classmethod
    def restore(cls, dimension: int, arrays: dict[str, np.ndarray], rows: dict[str, Any]) -> MemoryIndex:
        """The index :meth:`export` described, without recomputing a row. Raises ``ValueError`` naming
        what does not fit (a missing array, a shape, a dtype, rows of another length)."""
        check_export(dimension, arrays, rows)
        ids, texts, metas, tags, scopes = (rows[key] for key in ("ids", "texts", "metas", "tags", "scopes"))
        problems, n = rows["problems"], len(ids)
        index = cls(dimension, capacity=max(n, 16))
        index._n = n
        for name in ARRAYS:
            getattr(index, name)[:n] = arrays[name.lstrip("_")]
        index._ids, index._texts, index._metas = list(ids), list(texts), list(metas)
        index._row = {doc_id: row for row, doc_id in enumerate(ids)}
        index._tags = [frozenset(t) for t in tags]
        index._scope_code = {scope: code for code, scope in enumerate(scopes)}
        index._problems = {doc_id: dict(p) for doc_id, p in problems.items()}
        tokens = rows.get("tokens")
        if isinstance(tokens, list) and len(tokens) == n:
            if not all(isinstance(t, list) and all(isinstance(w, str) for w in t) for t in tokens):
                raise ValueError("tokens must be lists of strings")
            index._tokens = dict(zip(ids, tokens))
        return index

    # ---- reads -------------------------------------------------------------------------------
    def metadata(self, doc_id: str) -> dict[str, object] | None:
        """A copy of one row's metadata, or None."""
        with self._lock:
            row = self._row.get(doc_id)
            return None if row is None else dict(self._metas[row])

    def document(self, doc_id: str) -> tuple[str, dict[str, object]] | None:
        """One row's text and a copy of its metadata (as stored), or None."""
        with self._lock:
            row = self._row.get(doc_id)
            return None if row is None else (self._texts[row], dict(self._metas[row]))

    def metadatas(self) -> list[dict[str, object]]:
        """Copies of every row's metadata, in row order."""
        with self._lock:
            return [dict(m) for m in self._metas]

    def vectors(self) -> tuple[list[str], np.ndarray]:
        """(ids, unit float32 vectors): a copy, for checks and exports."""
        with self._lock:
            return list(self._ids), self._f32[: self._n].copy()

    def _candidate_rows(
        self,
        scopes: Collection[str] | None,
        tags: Sequence[str] | None,
        min_importance: int | None,
        equals: dict[str, object] | None = None,
        rows: Rows = "all",
        now: float | None = None,
        at: float | None = None,
    ) -> np.ndarray | None:
        """Row indexes passing the filters, or None for 'every row'. Unless every row is asked for, rows
        expired at ``now`` are left out; with ``at``, only rows whose validity window holds ``at`` and that
        had not expired by then."""
        n = self._n
        mask: np.ndarray | None = None
        if rows != "all":
            kinds = ROW_KINDS[rows]
            mask = self._kind[:n] == kinds[0]
            for kind in kinds[1:]:
                mask |= self._kind[:n] == kind
            if now is not None and at is None:
                mask &= self._expires[:n] > now
        if at is not None:
            held = (self._from[:n] <= at) & (self._until[:n] > at) & (self._expires[:n] > at)
            mask = held if mask is None else mask & held
        if scopes is not None:
            codes = [self._scope_code[s] for s in scopes if s in self._scope_code]
            scope_mask: np.ndarray | None = None
            if len(codes) == len(self._scope_code):
                pass  # every scope present is allowed: no mask
            elif len(codes) <= 4:  # a comparison per scope beats np.isin's sort for the usual 1-2 scopes
                scope_mask = np.zeros(n, dtype=bool)
                for code in codes:
                    scope_mask |= self._scope[:n] == code
            else:
                scope_mask = np.isin(self._scope[:n], np.asarray(codes, dtype=np.int32))
            if scope_mask is not None:
                mask = scope_mask if mask is None else mask & scope_mask
        if min_importance is not None:
            imp = self._importance[:n] >= min_importance
            mask = imp if mask is None else mask & imp
        if tags:
            wanted = frozenset(tags)
            tag_mask = np.fromiter((wanted <= t for t in self._tags), dtype=bool, count=n)
            mask = tag_mask if mask is None else mask & tag_mask
        if equals:  # last, and only over the rows still in: a metadata read per row is the slow test
            items = list(equals.items())
            metas = self._metas
            rows_in = range(n) if mask is None else np.flatnonzero(mask).tolist()
            kept = [r for r in rows_in if all(metas[r].get(key) == value for key, value in items)]
            return np.asarray(kept, dtype=np.intp)
        return None if mask is None else np.flatnonzero(mask)

    def scope_sum(self, scope: str) -> tuple[np.ndarray, int]:
        """The sum of the vectors of ``scope``'s rows (float64) and how many they are (the caller holds the lock)."""
        cached = self._scope_sums.get(scope)
        if cached is None:
            code = self._scope_code.get(scope)
            mine = np.zeros(self._n, dtype=bool) if code is None else self._scope[: self._n] == code
            cached = self._scope_sums[scope] = (
                self._f32[: self._n][mine].sum(axis=0, dtype=np.float64),
                int(np.count_nonzero(mine)),
            )
        return cached

    def lexical(self, query_text: str) -> np.ndarray:
        """Every row's lexical match with ``query_text``, 0..1: its BM25 score (over every row, in
        keyword tokens) divided by the largest score the query's tokens can reach."""
        with self._lock:
            bm25 = self._lexical_side()
            tokens = tokenize(query_text)
            top = bm25.max_score(tokens)
            if top <= 0:
                return np.zeros(self._n)
            return bm25.scores(tokens) / top

    def prefix_match(self, query_text: str, rows: np.ndarray | None = None) -> np.ndarray:
        """Each row's stem-prefix match with ``query_text``, 0..1 (:meth:`BM25Index.prefix_match`):
        the evidence an important memory needs for its lower floor. ``rows``: only those."""
        with self._lock:
            return self._lexical_side().prefix_match(tokenize(query_text), docs=rows)

    def build_lexical(self) -> None:
        """Build the lexical side now (a search would on first use), e.g. so that an export holds the tokens."""
        with self._lock:
            self._lexical_side()

    def _lexical_side(self) -> BM25Index:
        """BM25 over every row, built again after a write changed the rows (the caller holds the lock)."""
        if self._bm25 is None:
            for doc_id, text in zip(self._ids, self._texts):
                if doc_id not in self._tokens:
                    self._tokens[doc_id] = tokenize(text)
            self._bm25 = BM25Index([self._tokens[doc_id] for doc_id in self._ids])
        return self._bm25

    def languages(self, rows: np.ndarray) -> np.ndarray:
        """The language distributions of ``rows`` (:func:`brain.text.language.distribution`, by row), told
        now for the rows whose language no search has needed yet."""
        rows = np.asarray(rows, dtype=np.intp)
        unknown = rows[np.isnan(self._langs[rows, 0])]
        for row in unknown.tolist():
            self._langs[row] = language_distribution(self._texts[row])
        known: np.ndarray = self._langs[rows]
        return known

    def _recency(self, now: float, weights: ScoreWeights) -> np.ndarray:
        """Every row's recency part (:class:`~brain.rules.ranking.RecencyFactors`, kept until the next write)."""
        n = self._n
        epochs = self._used[:n] if weights.recency_from == "last_used" else self._epoch[:n]
        if self._growth is None or not self._growth.fits(weights):
            self._growth = ranking.RecencyFactors.of(epochs, weights)
        return self._growth.part(epochs, now, weights)

    def search(self, query: MemoryQuery) -> GatedHits[MemoryHit]:
        """The exact top rows of ``query``: :func:`search_parts` over this index alone."""
        return search_parts([self], query)


def _every_row(rows: np.ndarray, n: int) -> bool:
    """Whether ``rows`` are 0..n-1 in order."""
    return (
        rows.size == n and n > 0 and rows[0] == 0 and rows[-1] == n - 1 and (n < 3 or bool((np.diff(rows) == 1).all()))
    )


def _rows_of(matrix: np.ndarray, n: int, rows: np.ndarray) -> np.ndarray:
    """``matrix[rows]``, as a view when ``rows`` are all of its ``n`` rows in order."""
    return matrix[:n] if _every_row(rows, n) else matrix[rows]


class _Keys(Sequence[str]):
    """The ids of ``rows`` of a space, looked up only when asked (ties are broken by a few of them)."""

    def __init__(self, space: _Space, rows: np.ndarray | None = None):
        self._space, self._rows = space, rows

    def __len__(self) -> int:
        return self._space.n if self._rows is None else int(self._rows.size)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        row = int(i) if self._rows is None else int(self._rows[i])
        part, local = self._space.locate(row)
        return part._ids[local]


class _Space:
    """The rows of one or more indexes as one row space, index i's rows numbered after index i-1's (a
    search over an entity's part and the global part). With one index its own arrays are used, uncopied;
    with several, only the per-row numbers are joined (the vectors stay where they are)."""

    def __init__(self, parts: Sequence[MemoryIndex]):
        self.parts = list(parts)
        self.starts = np.cumsum([0, *(p._n for p in self.parts)])
        self.n = int(self.starts[-1])
        self.one = self.parts[0] if len(self.parts) == 1 else None
        self.ids: Sequence[str] = self.one._ids if self.one is not None else _Keys(self)
        self._bm25: BM25Union | None = None

    def column(self, name: str) -> np.ndarray:
        if self.one is not None:
            own: np.ndarray = getattr(self.one, name)[: self.n]
            return own
        return np.concatenate([getattr(p, name)[: p._n] for p in self.parts])

    def joined(self, per_part: Callable[[MemoryIndex], np.ndarray]) -> np.ndarray:
        if self.one is not None:
            return per_part(self.one)
        return np.concatenate([per_part(p) for p in self.parts])

    def in_scope(self, scope: str) -> np.ndarray:
        """Whether each row is of ``scope``."""
        return self.joined(
            lambda p: p._scope[: p._n] == p._scope_code[scope] if scope in p._scope_code else np.zeros(p._n, dtype=bool)
        )

    def locate(self, row: int) -> tuple[MemoryIndex, int]:
        """The index holding row ``row`` of the space, and the row there."""
        if self.one is not None:
            return self.one, row
        i = int(np.searchsorted(self.starts, row, side="right")) - 1
        return self.parts[i], row - int(self.starts[i])

    def exact(self, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """float32 similarities of ``rows`` with ``q`` (a part whose every row is asked for, in order, is read
        in place: no copy of its vectors)."""
        rows = np.asarray(rows, dtype=np.intp)
        if self.one is not None:
            return ranking.float_dots(q, _rows_of(self.one._f32, self.n, rows))
        if _every_row(rows, self.n):
            return np.concatenate([ranking.float_dots(q, p._f32[: p._n]) for p in self.parts])
        out = np.empty(rows.size, dtype=np.float64)
        which = np.searchsorted(self.starts, rows, side="right") - 1
        for i in np.unique(which).tolist():
            at = np.flatnonzero(which == i)
            part = self.parts[i]
            out[at] = ranking.float_dots(q, _rows_of(part._f32, part._n, rows[at] - self.starts[i]))
        return out

    def approx(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = [ranking.approx_similarities(q, p._i8[: p._n], p._scale[: p._n], p._qerr[: p._n]) for p in self.parts]
        if len(pairs) == 1:
            return pairs[0]
        return np.concatenate([a for a, _ in pairs]), np.concatenate([s for _, s in pairs])

    def candidate_rows(self, *args: Any) -> np.ndarray | None:
        picked = [p._candidate_rows(*args) for p in self.parts]
        if self.one is not None:
            return picked[0]
        if all(rows is None for rows in picked):
            return None
        return np.concatenate(
            [
                (np.arange(p._n) if rows is None else rows) + start
                for p, rows, start in zip(self.parts, picked, self.starts)
            ]
        ).astype(np.intp)

    def lexical_side(self) -> BM25Union:
        if self._bm25 is None:
            self._bm25 = BM25Union([p._lexical_side() for p in self.parts])
        return self._bm25

    def lexical(self, query_text: str) -> np.ndarray:
        """Every row's lexical match with ``query_text`` (:meth:`MemoryIndex.lexical`), over the union."""
        bm25 = self.lexical_side()
        tokens = tokenize(query_text)
        top = bm25.max_score(tokens)
        if top <= 0:
            return np.zeros(self.n)
        return bm25.scores(tokens) / top

    def across_floors(
        self, message: str, floor: float, rows: np.ndarray, upper: np.ndarray, passes: np.ndarray
    ) -> np.ndarray:
        """By row, ``floor`` for each of ``rows`` that may need it (its similarity can reach it, ``upper``, and
        it does not pass the usual floor anyway, ``passes``; both by row of ``rows``) and whose text is in
        another language than ``message``; +inf for every other row. Only those rows' languages are told (and
        kept), so a search pays for the memories near the floor, not for every row."""
        out = np.full(self.n, np.inf)
        near = np.asarray(rows, dtype=np.intp)[(np.asarray(upper) >= floor) & ~np.asarray(passes)]
        if near.size:
            asked = language_distribution(message)
            which = np.searchsorted(self.starts, near, side="right") - 1
            for i in np.unique(which).tolist():
                at = near[which == i]
                other = in_another_language(self.parts[i].languages(at - self.starts[i]), asked)
                out[at[other]] = floor
        return out

    def matches(self, texts: Sequence[str], rows: np.ndarray) -> np.ndarray:
        """The best stem-prefix match of each of ``rows`` with any of ``texts``."""
        bm25 = self.lexical_side()
        best: np.ndarray = np.max([bm25.prefix_match(tokenize(t), docs=rows) for t in texts], axis=0)
        return best

    def band_match(
        self,
        texts: Sequence[str],
        rows: np.ndarray,
        low: np.ndarray,
        high: np.ndarray,
        weights: ScoreWeights,
        importance: np.ndarray,
        own: np.ndarray | None = None,
    ) -> np.ndarray:
        """The match of every row (NaN: not needed), computed only for the ``rows`` whose relevance,
        between ``low`` and ``high`` (by position in ``rows``), may fall between their lowest possible
        floor and the plain one: a row above the plain floor or below its lowest passes or fails
        whatever its match, so the gate and its count below the floor are the same as with every match.
        A row whose first-person floor (``own``) is lower still passes or fails by that one below it."""
        match = np.full(self.n, np.nan)
        lowest = ranking.floors(replace(weights, floor_importance_match=0.0), importance[rows])
        plain = np.inf if weights.floor is None else weights.floor
        upper = plain if own is None else np.minimum(plain, own[rows])
        band = rows[(high >= lowest) & (low < upper)]
        if band.size:
            match[band] = self.matches(texts, band)
        return match


def search_parts(parts: Sequence[MemoryIndex], query: MemoryQuery) -> GatedHits[MemoryHit]:
    """The exact top ``query.k`` rows of ``parts`` taken together (see :class:`MemoryQuery`): the answer one index
    holding every part's rows would give, BM25's statistics included."""
    k, weights, now, at = query.k, query.weights, query.now, query.at
    scopes, query_text, about = query.scopes, query.query_text, query.about
    equals = None if query.equals is None else dict(query.equals)
    rows = query.kinds
    q = ranking.normalize_rows(np.asarray(query.vector, dtype=np.float32).reshape(1, -1))[0]
    gate_floor, gate_margin = weights.floor, weights.margin
    with ExitStack() as held:
        for part in parts:  # callers list parts in one order (global first), so two searches never deadlock
            held.enter_context(part._lock)
        space = _Space([p for p in parts if p._n] or parts[:1])
        n = space.n
        if n == 0 or k <= 0:
            return GatedHits(floor=gate_floor, margin=gate_margin)
        picked = space.candidate_rows(scopes, query.tags, query.min_importance, equals, rows, now, at)
        candidates = n if picked is None else int(picked.size)
        importance = space.column("_importance")
        imp_part = ranking.importance_part(importance, weights)
        rec_part = space.joined(lambda p: p._recency(now, weights))
        static = imp_part + rec_part
        lex_part = None
        if weights.lexical > 0 and query_text:
            lex_part = weights.lexical * space.lexical(query_text)
        match = None  # the evidence an important memory needs for its lower floor
        texts = [t for t in (query_text, *query.topic_texts) if t]
        needs_match = ranking.lowers_floor(weights) and weights.floor_importance_match > 0 and bool(texts)
        ids = space.ids

        def exact(sel: np.ndarray) -> np.ndarray:
            return space.exact(q, sel)

        own = None  # each row's first-person floor (+inf: none)
        if about is not None and weights.floor is not None and weights.first_person_floor is not None:
            scoped = space.in_scope(about)
            sums = [p.scope_sum(about) for p in space.parts]
            count = sum(c for _, c in sums)
            if count:
                relevance_sum = float(q.astype(np.float64) @ np.sum([v for v, _ in sums], axis=0))
                if lex_part is not None:
                    relevance_sum += float(lex_part[scoped].sum())
                own = np.where(scoped, ranking.own_floor(weights, relevance_sum, count), np.inf)

        across = weights.floor is not None and weights.across_floor is not None and query_text is not None

        def with_across(rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
            """A memory in another language than the message may pass the floor across languages instead
            (``lower`` and ``upper``: bounds of the similarity of ``rows``)."""
            nonlocal own
            assert weights.floor is not None and weights.across_floor is not None and query_text is not None
            lex = 0.0 if lex_part is None else lex_part[rows]
            passes = lower + lex >= weights.floor  # no floor of its own can matter to these
            floors = space.across_floors(query_text, weights.across_floor, rows, upper, passes)
            own = floors if own is None else np.minimum(own, floors)

        below = 0
        if picked is not None and picked.size <= max(SMALL_CANDIDATE_SET, 4 * k):
            sims = exact(picked)
            if across:
                with_across(picked, sims, sims)
            lex = 0.0 if lex_part is None else lex_part[picked]
            if needs_match:
                match = space.band_match(texts, picked, sims + lex, sims + lex, weights, importance, own)
            if weights.gated:
                positions, below = ranking.gated_top_k_reference(
                    sims,
                    lex,
                    static[picked],
                    _Keys(space, picked),
                    k,
                    weights,
                    importance[picked],
                    None if match is None else match[picked],
                    None if own is None else own[picked],
                )
                order = np.asarray(positions, dtype=np.intp)
            else:
                totals = weights.similarity * (sims + lex) + static[picked]
                order = ranking.top_k_positions(totals, lambda i: ids[picked[i]], k)
            top, top_sims = picked[order], sims[order]
        else:
            approx, slack = space.approx(q)
            if across:
                every = np.arange(n) if picked is None else picked
                with_across(every, approx[every] - slack[every], approx[every] + slack[every])
            if needs_match:
                cand = np.arange(n) if picked is None else picked
                lex = 0.0 if lex_part is None else lex_part[cand]
                match = space.band_match(
                    texts,
                    cand,
                    approx[cand] - slack[cand] + lex,
                    approx[cand] + slack[cand] + lex,
                    weights,
                    importance,
                    own,
                )
            if weights.gated:
                top, top_sims, below = ranking.gated_bounded_top_k(
                    static,
                    approx,
                    slack,
                    lex_part,
                    k,
                    exact,
                    weights,
                    candidates=picked,
                    keys=ids,
                    importance=importance,
                    match=match,
                    own=own,
                )
            else:
                with_lex = static if lex_part is None else static + weights.similarity * lex_part
                top, top_sims = ranking.bounded_top_k(
                    with_lex, approx, slack, k, exact, weights.similarity, candidates=picked, keys=ids
                )
        if match is not None:  # the hits' own matches, for the floor each reached
            unknown = np.asarray(top)[np.isnan(match[top])]
            if unknown.size:
                match[unknown] = space.matches(texts, unknown)
        hits = []
        for r, s in zip(top, top_sims):
            lexical = 0.0 if lex_part is None else float(weights.similarity * lex_part[r])
            floor = (
                None
                if weights.floor is None
                else float(
                    ranking.floors(
                        weights, importance[r], None if match is None else match[r], None if own is None else own[r]
                    )
                )
            )
            part, row = space.locate(int(r))
            hits.append(
                MemoryHit(
                    id=part._ids[row],
                    text=part._texts[row],
                    metadata=dict(part._metas[row]),
                    score=float(weights.similarity * s + lexical + static[r]),
                    similarity=float(s),
                    similarity_part=float(weights.similarity * s),
                    importance_part=float(imp_part[r]),
                    recency_part=float(rec_part[r]),
                    lexical_part=lexical,
                    floor=floor,
                )
            )
        return GatedHits(hits, candidates=candidates, below_floor=below, floor=gate_floor, margin=gate_margin)
