"""Recall over the mirror: exact cosine over the configured model's vectors (a float32 matrix cached in
process, rebuilt when a write could change recall), and full-text search (FTS5, BM25)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import numpy as np

from brain.features.mirror import mapping, protocol, schema
from brain.features.mirror.protocol import DIMENSION_MISMATCH
from brain.features.mirror.rows import (
    BRAIN_FIELD,
    ROW_COLUMNS,
    SELECT_MATRIX,
    SELECT_ROWS,
    KeywordHit,
    MirrorDocument,
    MirrorParts,
    RecallMatrix,
    as_list,
    marks,
    named_corruption,
)
from brain.model.errors import EmbeddingProtocolError, ValidationError
from brain.model.results import Hit
from brain.model.schemas import check_k
from brain.model.vectors import unit_rows, zero_rows

log = logging.getLogger("brain.features.mirror.store")


class MirrorRecall(MirrorParts):
    """The recall half of :class:`~brain.features.mirror.store.EngramMirror`."""

    @named_corruption
    def recall(
        self, query_vector: object, k: int, *, types: Iterable[str] | None = None, scopes: Iterable[str] | None = None
    ) -> list[Hit]:
        """The ``k`` documents whose ``model`` vectors are closest in cosine to ``query_vector``.

        Only this model's vectors are compared (never another model's); none stored -> ``[]``.
        ``types`` / ``scopes`` restrict to our document types / scopes (foreign rows count as global
        memories unless their namespace names an entity scope).
        """
        check_k(k)
        query = protocol.as_vector(query_vector, model=self.model)
        cache = self._matrix()
        n = len(cache.ids)
        if n == 0:
            return []
        if query.shape[0] != cache.matrix.shape[1]:
            raise EmbeddingProtocolError(
                DIMENSION_MISMATCH,
                f"the query vector has {query.shape[0]} dimensions but the stored vectors have {cache.matrix.shape[1]}",
                model=self.model,
            )
        if zero_rows(query):
            raise ValidationError("the query vector is all zeros")
        scores = cache.matrix @ unit_rows(query)
        mask = cache.mask(types, scopes)
        available = n
        if mask is not None:
            available = int(mask.sum())
            if available == 0:
                return []
            scores = np.where(mask, scores, -np.inf)
        k = min(k, available)
        top = np.argpartition(scores, n - k)[n - k :] if k < n else np.arange(n)
        top = top[np.lexsort((top, -scores[top]))]
        chosen = [cache.ids[j] for j in top]
        docs = {d.id: d for d in self._get_rows(chosen)}
        return [
            Hit(id=i, text=docs[i].text, metadata=docs[i].metadata, similarity=float(scores[j]))
            for i, j in zip(chosen, top)
            if i in docs
        ]

    def _get_rows(self, ids: list[str]) -> list[MirrorDocument]:
        """Rows without their vectors (what recall returns)."""
        rows = self._read(f"{SELECT_ROWS} WHERE m.id IN ({marks(len(ids))})", ids)
        return [self._document((*r, None, None, None)) for r in rows]

    def _matrix(self) -> RecallMatrix:
        with self._lock:
            self._check_open()
            data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            cache = self._cache
            if cache is not None and cache.generation == self._generation:
                if cache.data_version == data_version:
                    return cache
                if self._changes() == cache.changes:  # another writer committed, nothing recall depends on
                    cache.data_version = data_version
                    return cache
            changes = self._changes()
            rows = self._conn.execute(SELECT_MATRIX, (self.model,)).fetchall()
            cov = protocol.coverage(self._conn, self.model)
            generation = self._generation
        if not cov.sufficient:
            log.warning(
                "mirror recall: only %d of %d memories (%.0f%%) with %s vectors; results miss the rest. Run the "
                "backfill (brain mirror backfill) to embed them with %s",
                cov.with_vectors,
                cov.memories,
                100 * cov.ratio,
                cov.model,
                self.model,
            )
        matrix, kept, problems = protocol.decode_matrix(
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[3] for r in rows],
            model=self.model,
            stored_as=[r[2] for r in rows],
        )
        if problems:  # one bad row must not stop recall over the others; the catch-up writes it again
            log.warning(
                "mirror recall: %d stored vectors could not be read and are left out of recall (%s%s); "
                "`brain mirror sync` writes them again from the store",
                len(problems),
                "; ".join(reason for _, reason in problems[:3]),
                ", ..." if len(problems) > 3 else "",
            )
        rows = [rows[j] for j in kept]
        ids = [r[0] for r in rows]
        if len(ids):
            matrix = unit_rows(matrix)
        type_names: dict[str, int] = {}
        scope_names: dict[str, int] = {}
        type_codes = np.fromiter(
            (type_names.setdefault(r[4] or "memory", len(type_names)) for r in rows), np.int32, len(rows)
        )
        scope_codes = np.fromiter(
            (
                scope_names.setdefault(mapping.scope_of(r[5])[0] if r[6] is None else r[6], len(scope_names))
                for r in rows
            ),
            np.int32,
            len(rows),
        )
        cache = RecallMatrix(
            generation,
            data_version,
            changes,
            ids,
            np.ascontiguousarray(matrix),
            type_codes,
            type_names,
            scope_codes,
            scope_names,
        )
        with self._lock:
            if self._generation == generation:
                self._cache = cache
        return cache

    def _changes(self) -> str:
        row = self._conn.execute("SELECT value FROM engram_meta WHERE key = ?", (schema.CHANGES_KEY,)).fetchone()
        return str(row[0]) if row else ""

    @named_corruption
    def keyword_recall(
        self, query: str, k: int, *, types: Iterable[str] | None = None, scopes: Iterable[str] | None = None
    ) -> list[KeywordHit]:
        """Full-text search (FTS5, BM25) over the texts: any of the query's words, stemmed (``peanut``
        finds ``peanuts``); no embedder needed. Best first, each with its ``bm25`` relevance.
        """
        check_k(k)
        words = re.findall(r"\w+", query.lower()) if isinstance(query, str) else []
        if not words:
            raise ValidationError("the keyword query must contain at least one word")
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        sql = [
            f"SELECT m.rowid, {ROW_COLUMNS}, bm25(memories_fts) AS rank FROM memories_fts "
            "JOIN memories m ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ?"
        ]
        params: list[object] = [match]
        if types is not None:
            wanted = as_list(types)
            sql.append(f"AND coalesce({BRAIN_FIELD.format('type')}, 'memory') IN ({marks(len(wanted))})")
            params += wanted
        if scopes is not None:
            wanted = as_list(scopes)
            sql.append(
                f"AND coalesce({BRAIN_FIELD.format('scope')}, "
                f"CASE WHEN m.namespace = 'default' THEN 'global' ELSE m.namespace END) IN ({marks(len(wanted))})"
            )
            params += wanted
        sql.append("ORDER BY rank LIMIT ?")
        params.append(k)
        rows = self._read(" ".join(sql), params)
        return [  # SQLite's bm25() is the BM25 score negated, so that ascending order puts the best first
            KeywordHit(id=d.id, text=d.text, metadata=d.metadata, bm25=-float(r[-1]))
            for r in rows
            for d in [self._document((*r[:-1], None, None, None))]
        ]
