"""The mirror's reads: counts, ids, documents by id or in insertion order, vectors, content hashes,
coverage, and the file's health and statistics."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from brain.features.mirror import mapping, protocol
from brain.features.mirror.protocol import Coverage
from brain.features.mirror.rows import (
    IS_OURS,
    SELECT_DOCS,
    VECTOR_COLUMNS,
    MirrorDocument,
    MirrorParts,
    chunks,
    marks,
    named_corruption,
)
from brain.model.errors import EmbeddingProtocolError


class MirrorReads(MirrorParts):
    """The reading half of :class:`~brain.features.mirror.store.EngramMirror`."""

    @named_corruption
    def count(self) -> int:
        """Rows in ``memories`` (ours and engram's own)."""
        return int(self._read("SELECT COUNT(*) FROM memories")[0][0])

    def count_by_type(self) -> dict[str, int]:
        """Our rows per document type, and rows engram wrote itself under ``"engram"``."""
        rows = self._read(
            f"SELECT CASE WHEN {IS_OURS} THEN json_extract(m.metadata, '$.brain.type') ELSE 'engram' END AS kind, "
            "COUNT(*) FROM memories m GROUP BY kind ORDER BY kind"
        )
        return {kind: int(n) for kind, n in rows}

    @named_corruption
    def ids(self, *, foreign: bool | None = None) -> set[str]:
        """Every id; ``foreign=False`` only our rows, ``foreign=True`` only rows engram wrote itself."""
        if foreign is None:
            return {r[0] for r in self._read("SELECT id FROM memories")}
        test = "NOT" if foreign else ""  # one of two constants
        return {r[0] for r in self._read(f"SELECT id FROM memories m WHERE {test} {IS_OURS}")}

    @named_corruption
    def get(self, ids: str | Iterable[str], *, bad_vectors: str = "raise") -> list[MirrorDocument]:
        """Documents by id, in the order asked; unknown ids are skipped. ``bad_vectors``: as for
        :meth:`iter_documents`."""
        skip = _skip_bad(bad_vectors)
        ids = [ids] if isinstance(ids, str) else list(ids)
        found: dict[str, MirrorDocument] = {}
        for part in chunks(ids):
            rows = self._read(f"{SELECT_DOCS} WHERE m.id IN ({marks(len(part))})", [self.model, *part])
            found.update((r[1], self._document(r, skip_bad_vector=skip)) for r in rows)
        return [found[i] for i in ids if i in found]

    def iter_documents(self, batch: int = 1000, *, bad_vectors: str = "raise") -> Iterator[MirrorDocument]:
        """Every row in insertion order, ``batch`` rows per read (the lock is released between reads).
        A stored vector that breaks the protocol (NaN, a short BLOB) raises; with ``bad_vectors="skip"``
        the row comes without it, ``vector_problem`` saying what was wrong (a restore embeds its text)."""
        skip = _skip_bad(bad_vectors)
        last = 0
        while True:
            rows = self._read(f"{SELECT_DOCS} WHERE m.rowid > ? ORDER BY m.rowid LIMIT ?", (self.model, last, batch))
            for r in rows:
                yield self._document(r, skip_bad_vector=skip)
            if len(rows) < batch:
                return
            last = rows[-1][0]

    def embeddings(self, memory_id: str) -> dict[str, np.ndarray]:
        """Every stored vector of one memory, by model (validated)."""
        rows = self._read(
            f"SELECT e.model, {VECTOR_COLUMNS} FROM memory_embeddings e WHERE e.memory_id = ?", (memory_id,)
        )
        return {m: protocol.decode_embedding(b, d, memory_id=memory_id, model=m, stored_as=k) for m, b, k, d in rows}

    @named_corruption
    def vectors_of(self, ids: Iterable[str], model: str) -> dict[str, tuple[str, np.ndarray]]:
        """The ``model`` vectors stored for ``ids``, with the text each was embedded from:
        ``{id: (text, vector)}``; ids without one are absent. A re-index reuses them."""
        found: dict[str, tuple[str, np.ndarray]] = {}
        for part in chunks(list(ids)):
            rows = self._read(
                f"SELECT m.id, m.content, {VECTOR_COLUMNS} FROM memories m JOIN memory_embeddings e "
                f"ON e.memory_id = m.id AND e.model = ? WHERE m.id IN ({marks(len(part))})",
                [model, *part],
            )
            for doc_id, text, blob, kind, dimensions in rows:
                found[doc_id] = (
                    text,
                    protocol.decode_embedding(blob, dimensions, memory_id=doc_id, model=model, stored_as=kind),
                )
        return found

    def content_hashes(self) -> dict[str, bytes | None]:
        """Our rows' ids with their stored content hash (:mod:`brain.features.mirror.fingerprint`); None where
        the row has none (written before hashes were kept, or changed by another writer since)."""
        rows = self._read(
            f"SELECT m.id, h.hash FROM memories m LEFT JOIN brain_content_hashes h ON h.memory_id = m.id "
            f"WHERE {IS_OURS}"
        )
        return {i: None if h is None else bytes(h) for i, h in rows}

    @named_corruption
    def ids_with_vector(self, model: str) -> set[str]:
        """The ids of the rows that have a vector of ``model``."""
        return {r[0] for r in self._read("SELECT memory_id FROM memory_embeddings WHERE model = ?", (model,))}

    @named_corruption
    def meta(self, key: str) -> str | None:
        """A value of ``engram_meta`` (None when absent)."""
        rows = self._read("SELECT value FROM engram_meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    @named_corruption
    def models(self) -> dict[str, int]:
        """Vectors stored per model."""
        return dict(self._read("SELECT model, COUNT(*) FROM memory_embeddings GROUP BY model ORDER BY model"))

    @named_corruption
    def coverage(self, model: str | None = None) -> Coverage:
        with self._lock:
            self._check_open()
            return protocol.coverage(self._conn, model or self.model)

    def _document(self, row: tuple[Any, ...], *, skip_bad_vector: bool = False) -> MirrorDocument:
        _, doc_id, content, raw_meta, memory_type, created_at, importance, namespace, blob, kind, dimensions = row
        ours = mapping.brain_metadata(raw_meta)
        foreign = ours is None
        meta = mapping.foreign_metadata(memory_type, created_at, importance, namespace) if ours is None else ours
        vector, problem = None, None
        if kind not in (None, "null"):  # None: the row has no vector of this model
            try:
                vector = protocol.decode_embedding(blob, dimensions, memory_id=doc_id, model=self.model, stored_as=kind)
            except EmbeddingProtocolError as exc:
                if not skip_bad_vector:
                    raise
                problem = str(exc)
        return MirrorDocument(doc_id, content or "", meta, vector, foreign, problem)

    # ---- health --------------------------------------------------------------------------------
    def integrity_check(self) -> str:
        """``"ok"``, or the problems: SQLite's integrity check, foreign keys and the FTS index."""
        with self._lock:
            self._check_open()
            try:
                problems = [r[0] for r in self._conn.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]
                problems += [
                    f"foreign key: {r[0]} row {r[1]} -> {r[2]}" for r in self._conn.execute("PRAGMA foreign_key_check")
                ]
            except sqlite3.DatabaseError as exc:  # too damaged to be checked: that is the finding
                return str(exc)
            try:
                self._conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"memories_fts: {exc}")
        return "ok" if not problems else "; ".join(problems)

    @named_corruption
    def stats(self) -> dict[str, object]:
        rows = self._read(f"SELECT COUNT(*), SUM(NOT {IS_OURS}) FROM memories m")[0]
        return {
            "path": str(self.path),
            "model": self.model,
            "documents": int(rows[0]),
            "foreign": int(rows[1] or 0),
            "by_type": self.count_by_type(),
            "vectors": self.models(),
            "coverage": self.coverage().ratio,
            "embedding_protocol_version": protocol.PROTOCOL_VERSION,
        }


def _skip_bad(bad_vectors: str) -> bool:
    if bad_vectors not in ("raise", "skip"):
        raise ValueError(f"bad_vectors is 'raise' or 'skip', not {bad_vectors!r}")
    return bad_vectors == "skip"
