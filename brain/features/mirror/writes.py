"""The mirror's writes: documents with their vectors and content hashes, vectors of other models, deletes,
engram's own rows copied from another file, and the backfill of missing vectors. Each public write is
one transaction (or a savepoint inside the caller's :meth:`EngramMirror.transaction`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brain.features.mirror import mapping, protocol
from brain.features.mirror.fingerprint import content_hash
from brain.features.mirror.integrity import corruption_named
from brain.features.mirror.protocol import DIMENSION_MISMATCH, check_model_name
from brain.features.mirror.rows import (
    IS_OURS,
    UPSERT_EMBEDDING,
    UPSERT_HASH,
    UPSERT_MEMORY,
    MirrorParts,
    chunks,
    marks,
    named_corruption,
)
from brain.model.errors import EmbedderError, EmbeddingProtocolError, Problem, ValidationError
from brain.model.schemas import DOC_TYPES, check_scope, from_chroma, parse_timestamp
from brain.text.progress import ProgressOptions, open_progress

log = logging.getLogger("brain.features.mirror.store")


class MirrorWrites(MirrorParts):
    """The writing half of :class:`~brain.features.mirror.store.EngramMirror` (which holds the connection,
    the lock and the transactions)."""

    @named_corruption
    def upsert(self, docs: Iterable[object]) -> int:
        """Write documents (dicts or :class:`brain.model.results.Document`) with their vector for ``model``.

        The whole batch is validated first (``ValidationError`` or ``EmbeddingProtocolError``; nothing
        written). A new row also gets its creation in ``access_log``; a changed text drops the row's
        vectors of every model (they described the old text). Returns the number of documents.
        """
        prepared = self._prepare(list(docs))
        if not prepared:
            return 0
        with self.transaction():
            self._check_dimension(self.model, [p["blob"] for p in prepared if p["blob"] is not None])
            now = protocol.now_iso()
            for part in chunks(prepared):
                ids = [p["row"]["id"] for p in part]
                existing = dict(
                    self._conn.execute(
                        f"SELECT id, content FROM memories WHERE id IN ({marks(len(ids))})", ids
                    ).fetchall()
                )
                self._conn.executemany(UPSERT_MEMORY, [p["row"] for p in part])
                self._conn.executemany(
                    "INSERT INTO access_log (memory_id, accessed_at) VALUES (?, ?)",
                    [(p["row"]["id"], p["row"]["created_at"]) for p in part if p["row"]["id"] not in existing],
                )
                stale = [
                    (p["row"]["id"],)
                    for p in part
                    if p["row"]["id"] in existing and existing[p["row"]["id"]] != p["row"]["content"]
                ]
                self._conn.executemany("DELETE FROM memory_embeddings WHERE memory_id = ?", stale)
                self._conn.executemany(
                    UPSERT_EMBEDDING,
                    [
                        (p["row"]["id"], self.model, p["blob"], p["dimensions"], now)
                        for p in part
                        if p["blob"] is not None
                    ],
                )
                # after the row and vector writes, whose triggers drop the old hash; a document without
                # a vector keeps the row's vector, so its hash stays if nothing else changed
                self._conn.executemany(
                    UPSERT_HASH, [(p["row"]["id"], p["hash"]) for p in part if p["blob"] is not None]
                )
            self._generation += 1
        return len(prepared)

    @named_corruption
    def upsert_embeddings(self, items: Iterable[tuple[str, object]], model: str, *, skip_unknown: bool = False) -> int:
        """Store vectors of any ``model`` for existing memories: ``[(memory_id, vector), ...]``; all or
        nothing. An id the file does not hold is an error, or with ``skip_unknown`` left out."""
        model = check_model_name(model)
        rows = []
        try:
            for memory_id, vector in items:
                rows.append((memory_id, protocol.encode_embedding(vector, memory_id=memory_id, model=model)))
        except EmbeddingProtocolError as exc:
            log.warning("mirror write rejected: %s", exc)
            raise
        if not rows:
            return 0
        with self.transaction():
            ids = [r[0] for r in rows]
            known = self.existing_ids(ids)
            missing = [i for i in ids if i not in known]
            if missing and skip_unknown:
                rows = [r for r in rows if r[0] in known]
                if not rows:
                    return 0
            elif missing:
                raise ValidationError(
                    f"no memory with id {missing[0]!r} in the mirror ({len(missing)} missing); write the memory first",
                    [Problem("memory_id", "unknown memory", ids.index(i)) for i in missing],
                )
            self._check_dimension(model, [r[1] for r in rows])
            now = protocol.now_iso()
            self._conn.executemany(UPSERT_EMBEDDING, [(i, model, b, len(b) // 4, now) for i, b in rows])
            self._generation += 1
        return len(rows)

    @named_corruption
    def drop_models(self, keep: Iterable[str]) -> int:
        """Delete the vectors of every model but ``keep`` (a re-index dropped its old collections);
        returns how many were deleted."""
        keep = sorted(set(keep) | {self.model})
        with self.transaction():
            removed = self._conn.execute(
                f"DELETE FROM memory_embeddings WHERE model NOT IN ({marks(len(keep))})", keep
            ).rowcount
            self._generation += 1
        return removed

    @named_corruption
    def delete(self, ids: str | Iterable[str]) -> int:
        """Remove documents (their vectors, access log and links go with them); returns how many existed."""
        ids = [ids] if isinstance(ids, str) else list(ids)
        removed = 0
        with self.transaction():
            for part in chunks(ids):
                removed += self._conn.execute(
                    f"DELETE FROM memories WHERE id IN ({marks(len(part))})", list(part)
                ).rowcount
            self._generation += 1
        return removed

    @named_corruption
    def set_meta(self, key: str, value: str | None) -> None:
        """Write one value of ``engram_meta``; None removes it."""
        with self.transaction():
            if value is None:
                self._conn.execute("DELETE FROM engram_meta WHERE key = ?", (key,))
            else:
                self._conn.execute("INSERT OR REPLACE INTO engram_meta (key, value) VALUES (?, ?)", (key, value))

    @named_corruption
    def set_content_hashes(self, items: Iterable[tuple[str, bytes]]) -> int:
        """Record ``[(memory_id, hash), ...]`` for rows found equal to the documents the hashes were
        computed from (:func:`brain.features.mirror.sync.catch_up` does); ids not in the file are skipped.
        Returns the number recorded."""
        rows = [(i, bytes(h)) for i, h in items]
        if not rows:
            return 0
        with self.transaction():
            known = self.existing_ids([i for i, _ in rows])
            self._conn.executemany(UPSERT_HASH, [r for r in rows if r[0] in known])
        return sum(1 for i, _ in rows if i in known)

    def copy_foreign_rows(self, source: str | Path) -> int:
        """Copy the rows engram wrote itself, with their vectors, from another mirror file ``source``
        (e.g. a damaged one moved aside: they exist nowhere else). All or nothing; ids this file
        already has are kept. Returns the number of rows copied; a damaged ``source`` raises
        :class:`~brain.features.mirror.integrity.MirrorCorrupt` naming it."""
        with self._lock:
            self._check_open()
            with corruption_named(source):
                self._conn.execute("ATTACH DATABASE ? AS source", (str(source),))  # not allowed in a transaction
            try:
                with corruption_named(source), self.transaction():
                    theirs = protocol.table_columns(self._conn, "memories", "source")
                    columns = ", ".join(c for c in protocol.table_columns(self._conn, "memories") if c in theirs)
                    copied = self._conn.execute(  # only column names our own table has
                        f"INSERT OR IGNORE INTO main.memories ({columns}) SELECT {columns} FROM source.memories m "
                        f"WHERE NOT {IS_OURS}"
                    ).rowcount
                    if protocol.is_v2_table(protocol.table_columns(self._conn, "memory_embeddings", "source")):
                        self._conn.execute(
                            "INSERT OR IGNORE INTO main.memory_embeddings "
                            "(memory_id, model, embedding, dimensions, created_at) "
                            "SELECT e.memory_id, e.model, e.embedding, e.dimensions, e.created_at "
                            "FROM source.memory_embeddings e JOIN source.memories m ON m.id = e.memory_id "
                            f"WHERE NOT {IS_OURS}"
                        )
                    self._generation += 1
            finally:
                self._undo("DETACH DATABASE source")
        return max(copied, 0)

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` this mirror holds."""
        found: set[str] = set()
        for part in chunks(list(ids)):
            found.update(
                r[0]
                for r in self._conn.execute(f"SELECT id FROM memories WHERE id IN ({marks(len(part))})", list(part))
            )
        return found

    def _check_dimension(self, model: str, blobs: list[bytes]) -> None:
        """All vectors of one model share a dimension: the one already stored, else the batch's first."""
        if not blobs:
            return
        row = self._conn.execute(
            "SELECT dimensions FROM memory_embeddings WHERE model = ? LIMIT 1", (model,)
        ).fetchone()
        expected = row[0] if row else len(blobs[0]) // 4
        for blob in blobs:
            if len(blob) // 4 != expected:
                error = EmbeddingProtocolError(
                    DIMENSION_MISMATCH,
                    f"a {len(blob) // 4}-d vector for a model whose vectors are {expected}-d",
                    model=model,
                )
                log.warning("mirror write rejected: %s", error)
                raise error

    def _prepare(self, docs: list[Any]) -> list[dict[str, Any]]:
        """Validate a whole batch; the first protocol error, or a ValidationError listing every problem."""
        prepared: list[dict[str, object]] = []
        problems: list[Problem] = []
        protocol_errors: list[EmbeddingProtocolError] = []
        seen: dict[str, int] = {}
        for i, doc in enumerate(docs):
            if isinstance(doc, Mapping):
                doc_id, text, meta, vector = doc.get("id"), doc.get("text"), doc.get("metadata"), doc.get("embedding")
            elif all(hasattr(doc, a) for a in ("id", "text", "metadata")):
                doc_id, text, meta, vector = doc.id, doc.text, doc.metadata, getattr(doc, "embedding", None)
            else:
                problems.append(Problem("document", f"expected a dict or a Document, got {type(doc).__name__}", i))
                continue
            item = []
            if not isinstance(doc_id, str) or not doc_id:
                item.append(("id", f"id must be a non-empty string, got {doc_id!r}"))
            if not isinstance(text, str):
                item.append(("text", f"text must be a string, got {type(text).__name__}"))
            epoch = None
            checked: dict[str, object] = {}
            if not isinstance(meta, Mapping):
                item.append(("metadata", f"metadata must be a dict, got {type(meta).__name__}"))
            else:
                checked = from_chroma(meta)  # the shape the store hands back (memories: tags [] when absent)
                epoch, meta_problems = check_metadata(checked)
                item.extend(meta_problems)
            blob = None
            if vector is not None and not item:
                try:
                    blob = protocol.encode_embedding(vector, memory_id=doc_id, model=self.model)
                except EmbeddingProtocolError as exc:
                    protocol_errors.append(exc)
                    item.append(("embedding", str(exc)))
            if isinstance(doc_id, str) and doc_id in seen and not item:
                item.append(("id", f"id {doc_id!r} appears twice in the batch (items {seen[doc_id]} and {i})"))
            if item or not isinstance(doc_id, str) or not isinstance(text, str):  # the last two: item says why
                problems.extend(Problem(f, m, i) for f, m in item)
                continue
            seen[doc_id] = i
            try:
                row = mapping.to_row(doc_id, text, checked, epoch)
            except (TypeError, ValueError) as exc:
                problems.append(Problem("metadata", f"metadata cannot be stored as JSON: {exc}", i))
                continue
            prepared.append(
                {
                    "row": row,
                    "blob": blob,
                    "dimensions": len(blob) // 4 if blob is not None else None,
                    "hash": None if blob is None else content_hash(text, checked, np.frombuffer(blob, dtype="<f4")),
                }
            )
        if problems:
            summary = "; ".join(f"item {p.item}: {p.message}" for p in problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            log.warning("mirror write of %d documents rejected: %s%s", len(docs), summary, more)
            if protocol_errors:
                raise protocol_errors[0]
            raise ValidationError(f"{summary}{more} (nothing was written to the mirror)", problems)
        return prepared

    # ---- backfill ------------------------------------------------------------------------------
    def backfill(
        self,
        embed: Callable[[list[str]], np.ndarray],
        model: str | None = None,
        *,
        progress: bool | ProgressOptions = True,
    ) -> int:
        """Embed every memory that has no vector of ``model`` (default: the configured one).

        Works in transactions of ``batch_size`` rows, each committed on its own, so an interrupted run
        keeps what it finished and a rerun does the rest. A text changed meanwhile is not written
        (its old vector would describe the wrong text). Returns the number of vectors written.
        ``progress``: a bar on a terminal, else a log line now and then (:mod:`brain.text.progress`).
        """
        model = check_model_name(model or self.model)
        missing_sql = (
            "FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e "
            "WHERE e.memory_id = m.id AND e.model = ?)"
        )
        total = int(self._read(f"SELECT COUNT(*) {missing_sql}", (model,))[0][0])
        written = 0
        last = 0
        with open_progress(progress, total=total, desc=f"backfill {model}", unit="memory") as bar:
            while True:
                rows = self._read(
                    f"SELECT m.rowid, m.id, m.content {missing_sql} AND m.rowid > ? ORDER BY m.rowid LIMIT ?",
                    (model, last, self.batch_size),
                )
                if not rows:
                    break
                texts = [r[2] for r in rows]
                vectors = np.asarray(embed(texts), dtype=np.float32)
                if vectors.ndim != 2 or vectors.shape[0] != len(rows):
                    raise EmbedderError(
                        f"the backfill's embed function returned shape {vectors.shape} for {len(rows)} texts"
                    )
                blobs = [protocol.encode_embedding(v, memory_id=r[1], model=model) for r, v in zip(rows, vectors)]
                with self.transaction():
                    self._check_dimension(model, blobs)
                    now = protocol.now_iso()
                    cursor = self._conn.executemany(
                        "INSERT OR REPLACE INTO memory_embeddings "
                        "(memory_id, model, embedding, dimensions, created_at) "
                        "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE id = ? AND content = ?)",
                        [(r[1], model, b, len(b) // 4, now, r[1], r[2]) for r, b in zip(rows, blobs)],
                    )
                    written += max(cursor.rowcount, 0)  # rows inserted (not the triggers' updates)
                    self._generation += 1
                bar.update(len(rows))
                last = rows[-1][0]
        return written


def check_metadata(meta: dict[str, Any]) -> tuple[float | None, list[tuple[str, str]]]:
    """Enough of our metadata to map it (the store validated the rest): the epoch and the problems."""
    problems: list[tuple[str, str]] = []
    if meta.get("type") not in DOC_TYPES:
        problems.append(("metadata.type", f"type must be one of {', '.join(DOC_TYPES)}, got {meta.get('type')!r}"))
    epoch = meta.get("ts_epoch")
    if epoch is None:
        try:
            epoch = parse_timestamp(meta.get("timestamp")).timestamp()
        except ValueError as exc:
            problems.append(("metadata.timestamp", str(exc)))
    elif isinstance(epoch, bool) or not isinstance(epoch, (int, float)) or not math.isfinite(epoch):
        problems.append(("metadata.ts_epoch", f"ts_epoch must be a finite number, got {epoch!r}"))
    if "scope" in meta:
        try:
            check_scope(meta["scope"])
        except ValueError as exc:
            problems.append(("metadata.scope", str(exc)))
    if meta.get("type") == "memory":
        level = meta.get("importance", 3)
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 5:
            problems.append(("metadata.importance", f"importance must be an integer between 1 and 5, got {level!r}"))
    return epoch, problems
