"""EngramMirror: brain's documents in one SQLite file that engramai opens as its own.

One connection, WAL mode, foreign keys on, guarded by a lock (safe to share between the threads of one
process). Writes happen in transactions: every public write opens one, and :meth:`EngramMirror.transaction`
lets a caller group several writes with work elsewhere, e.g. the store writes the mirror rows, then Chroma,
and only then commits, so that a failed Chroma write rolls the mirror back::

    with mirror.transaction():
        mirror.upsert(docs)
        write_to_chroma(docs)      # raises -> the mirror rows are rolled back

The lock is held for the whole ``with`` block. Nested ``transaction()`` blocks are savepoints.

Recall over the configured model's vectors is exact cosine over a float32 matrix cached in process; the
cache is rebuilt after our own writes and after other connections' commits that touched vectors, row
metadata or namespaces, or deleted rows (``PRAGMA data_version`` says another connection committed; a
trigger-kept counter in ``engram_meta`` says whether recall is affected).

Opening checks the file (``PRAGMA quick_check``); a damaged file, then or during any later read or
write, raises :class:`~brain.mirror.integrity.MirrorCorrupt` (see :mod:`brain.mirror.integrity`).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from brain.errors import EmbedderError, Problem, StoreUnavailable, ValidationError
from brain.mirror import mapping, protocol, schema
from brain.mirror.fingerprint import content_hash
from brain.mirror.integrity import MirrorCorrupt, corruption_named, is_corruption, quick_check
from brain.mirror.protocol import (
    DIMENSION_MISMATCH,
    Coverage,
    EmbeddingProtocolError,
    MigrationReport,
    check_model_name,
)
from brain.progress import ProgressOptions, open_progress
from brain.results import Hit
from brain.schemas import DOC_TYPES, check_scope, from_chroma, parse_timestamp

log = logging.getLogger(__name__)

_CHUNK = 500  # ids per IN (...) list
MIN_BATCH, MAX_BATCH = 100, 1000


@dataclass
class MirrorDocument:
    """One mirrored document. Unpacks as ``id, text, metadata, embedding``.

    ``metadata`` is our metadata, rebuilt from the row's JSON (for a foreign row, derived from engram's
    columns, see :mod:`brain.mirror.mapping`); ``embedding`` is the configured model's vector or None;
    ``foreign`` marks rows engram wrote itself.
    """

    id: str
    text: str
    metadata: dict[str, Any]
    embedding: np.ndarray | None = field(default=None, repr=False)
    foreign: bool = False

    def __iter__(self) -> Iterator[Any]:
        return iter((self.id, self.text, self.metadata, self.embedding))


@dataclass
class KeywordHit:
    """A full-text match. ``bm25`` is its BM25 relevance from SQLite FTS5 (higher is better): it depends
    on the query and on the whole file, so it ranks the hits of one query and is no cosine similarity."""

    id: str
    text: str
    metadata: dict[str, Any]
    bm25: float

    @property
    def score(self) -> float:
        return self.bm25

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "metadata": self.metadata, "bm25": self.bm25}


def _named_corruption(method: Callable) -> Callable:
    """SQLite's corruption errors inside ``method`` become :class:`MirrorCorrupt` naming the file."""

    @functools.wraps(method)
    def wrapper(self: "EngramMirror", *args: Any, **kwargs: Any) -> Any:
        with corruption_named(self.path):
            return method(self, *args, **kwargs)

    return wrapper


@dataclass
class _Matrix:
    """The configured model's unit vectors with what recall filters on, for one state of the file."""

    generation: int
    data_version: int
    changes: str
    ids: list[str]
    matrix: np.ndarray  # (n, d) float32, rows L2-normalised
    type_codes: np.ndarray
    type_names: dict[str, int]
    scope_codes: np.ndarray
    scope_names: dict[str, int]

    def mask(self, types: Iterable[str] | None, scopes: Iterable[str] | None) -> np.ndarray | None:
        mask = None
        for codes, names, wanted in ((self.type_codes, self.type_names, types), (self.scope_codes, self.scope_names, scopes)):
            if wanted is None:
                continue
            chosen = [names[w] for w in _as_list(wanted) if w in names]
            part = np.isin(codes, np.asarray(chosen, dtype=codes.dtype))
            mask = part if mask is None else mask & part
        return mask


def _as_list(values: Iterable[str] | str) -> list[str]:
    return [values] if isinstance(values, str) else list(values)


def _chunks(seq: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(seq), size):
        yield seq[start : start + size]


def _marks(n: int) -> str:
    return ",".join("?" * n)


class EngramMirror:
    """The Engram-compatible SQLite mirror (see :mod:`brain.mirror`).

    ``model`` is our embedder's name (``provider/model``); recall and :meth:`iter_documents` use its
    vectors only. ``migration`` holds the :class:`~brain.mirror.protocol.MigrationReport` when opening
    migrated an older file, else None; ``protocol_version`` the version the file declared on open;
    ``fts_rebuilt`` is True when opening rebuilt the keyword index with the stemming tokenizer.
    A damaged file raises :class:`~brain.mirror.integrity.MirrorCorrupt`.
    """

    def __init__(self, path: str | Path, model: str, *, batch_size: int = 500):
        try:
            self.model = check_model_name(model)
        except EmbeddingProtocolError as exc:
            raise EmbeddingProtocolError(
                exc.code, f"{exc.detail}; the mirror needs the embedder's provider/model name (BRAIN_EMBEDDER)"
            ) from None
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not MIN_BATCH <= batch_size <= MAX_BATCH:
            raise ValidationError(f"batch_size must be an integer between {MIN_BATCH} and {MAX_BATCH}, got {batch_size!r}")
        self.batch_size = batch_size
        self.path = Path(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._generation = 0
        self._cache: _Matrix | None = None
        self.migration: MigrationReport | None = None
        self.fts_rebuilt = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"cannot open the mirror file {self.path}: {exc}; check BRAIN_MIRROR_PATH") from exc
        try:
            with corruption_named(self.path):
                self._configure()
                damage = quick_check(self._conn)
                if damage:
                    raise MirrorCorrupt(self.path, damage)
                self.protocol_version = self._set_up()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreUnavailable(f"cannot open the mirror file {self.path}: {exc}; check BRAIN_MIRROR_PATH") from exc
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        self._conn.execute("PRAGMA busy_timeout = 10000")
        mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.warning("mirror %s: WAL mode unavailable (journal_mode=%s)", self.path, mode)
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("PRAGMA foreign_keys = ON")

    # ---- opening -------------------------------------------------------------------------------
    def _set_up(self) -> int | None:
        conn = self._conn
        with self.transaction():
            fts = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts'").fetchone()
            stale_fts = fts is not None and not schema.fts_is_current(fts[0])
            for statement in schema.TABLES:
                conn.execute(statement)
            self._add_missing_columns("memories", schema.MEMORY_COLUMNS_ADDED)
            self._add_missing_columns("hebbian_links", schema.HEBBIAN_COLUMNS_ADDED)
            conn.execute(
                "INSERT OR IGNORE INTO engram_meta (key, value) VALUES ('schema_version', ?)",
                (schema.ENGRAM_SCHEMA_VERSION,),
            )
            version = protocol.read_version(conn)
            columns = protocol.table_columns(conn, "memory_embeddings")
            if version is not None and version > protocol.PROTOCOL_VERSION:
                log.warning(
                    "mirror %s declares embedding protocol version %s; this brain knows version %s and may "
                    "misread it. Upgrade brain, or point BRAIN_MIRROR_PATH at a new file",
                    self.path, version, protocol.PROTOCOL_VERSION,
                )
                for statement in schema.EMBEDDINGS_V2:
                    conn.execute(statement)
            elif columns and protocol.is_v2_table(columns):
                for statement in schema.EMBEDDINGS_V2:
                    conn.execute(statement)
                if version != protocol.PROTOCOL_VERSION:
                    protocol.write_version(conn)
            else:
                report = protocol.migrate_v1(conn, schema.EMBEDDINGS_V2)
                if columns:  # a file with version-1 embeddings, not a new file
                    self.migration = report
            conn.execute("INSERT OR IGNORE INTO engram_meta (key, value) VALUES (?, '0')", (schema.CHANGES_KEY,))
            if stale_fts:  # built without stemming: created again below and filled from the texts
                conn.execute("DROP TABLE memories_fts")
            for statement in schema.INDEXES + schema.FTS + schema.CHANGE_TRIGGERS + schema.CONTENT_HASHES:
                conn.execute(statement)
            if (fts is None or stale_fts) and conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone():
                conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
                self.fts_rebuilt = stale_fts
        if self.fts_rebuilt:
            log.info("mirror %s: keyword index rebuilt with the %r tokenizer", self.path, schema.FTS_TOKENIZER)
        return version

    def _add_missing_columns(self, table: str, wanted: Sequence[tuple[str, str]]) -> None:
        have = protocol.table_columns(self._conn, table)
        for name, decl in wanted:
            if name not in have:  # names and declarations are our constants, not input
                self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")

    # ---- transactions --------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator["EngramMirror"]:
        """Group writes: committed when the block ends, rolled back if it raises. Nested blocks are savepoints."""
        with self._lock:
            self._check_open()
            if self._depth:
                name = f"mirror_sp{self._depth}"
                with corruption_named(self.path):
                    self._conn.execute(f"SAVEPOINT {name}")
                self._depth += 1
                try:
                    yield self
                except BaseException as exc:
                    self._undo(f"ROLLBACK TO {name}", f"RELEASE {name}")
                    self._generation += 1
                    self._raise_named(exc)
                    raise
                else:
                    with corruption_named(self.path):
                        self._conn.execute(f"RELEASE {name}")
                finally:
                    self._depth -= 1
                return
            try:
                with corruption_named(self.path):
                    self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # e.g. another process holds the write lock too long
                raise StoreUnavailable(f"cannot write to the mirror {self.path}: {exc}") from exc
            self._depth = 1
            try:
                yield self
            except BaseException as exc:
                self._depth = 0
                self._undo("ROLLBACK")
                self._generation += 1
                self._raise_named(exc)
                raise
            self._depth = 0
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._undo("ROLLBACK")
                self._generation += 1
                if is_corruption(exc):
                    raise MirrorCorrupt(self.path, str(exc)) from exc
                raise StoreUnavailable(f"committing to the mirror {self.path} failed: {exc}; nothing was written") from exc

    def _raise_named(self, exc: BaseException) -> None:
        """Corruption met by statements run inside a transaction block is this file's: Python's sqlite3
        serves no other database in brain (Chroma has its own engine)."""
        if is_corruption(exc):
            raise MirrorCorrupt(self.path, str(exc)) from exc

    def _undo(self, *statements: str) -> None:
        """Roll back after a failure. On a damaged file the rollback can fail too; the first error is
        the one worth reporting, so this one is only logged."""
        try:
            for statement in statements:
                self._conn.execute(statement)
        except sqlite3.Error as exc:
            log.warning("mirror %s: rolling back failed too: %s", self.path, exc)

    def _check_open(self) -> None:
        if self._conn is None:
            raise StoreUnavailable(f"the mirror {self.path} is closed")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None  # type: ignore[assignment]
                self._cache = None

    def __enter__(self) -> "EngramMirror":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @_named_corruption
    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            self._check_open()
            return self._conn.execute(sql, params).fetchall()

    # ---- writes --------------------------------------------------------------------------------
    @_named_corruption
    def upsert(self, docs: Iterable[Any]) -> int:
        """Write documents (dicts or :class:`brain.results.Document`) with their vector for ``model``.

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
            for part in _chunks(prepared):
                ids = [p["row"]["id"] for p in part]
                existing = dict(self._conn.execute(
                    f"SELECT id, content FROM memories WHERE id IN ({_marks(len(ids))})", ids
                ).fetchall())
                self._conn.executemany(_UPSERT_MEMORY, [p["row"] for p in part])
                self._conn.executemany(
                    "INSERT INTO access_log (memory_id, accessed_at) VALUES (?, ?)",
                    [(p["row"]["id"], p["row"]["created_at"]) for p in part if p["row"]["id"] not in existing],
                )
                stale = [(p["row"]["id"],) for p in part
                         if p["row"]["id"] in existing and existing[p["row"]["id"]] != p["row"]["content"]]
                self._conn.executemany("DELETE FROM memory_embeddings WHERE memory_id = ?", stale)
                self._conn.executemany(
                    _UPSERT_EMBEDDING,
                    [(p["row"]["id"], self.model, p["blob"], p["dimensions"], now) for p in part if p["blob"] is not None],
                )
                # after the row and vector writes, whose triggers drop the old hash; a document without
                # a vector keeps the row's vector, so its hash stays if nothing else changed
                self._conn.executemany(
                    _UPSERT_HASH, [(p["row"]["id"], p["hash"]) for p in part if p["blob"] is not None]
                )
            self._generation += 1
        return len(prepared)

    @_named_corruption
    def upsert_embeddings(self, items: Iterable[tuple[str, Any]], model: str) -> int:
        """Store vectors of any ``model`` for existing memories: ``[(memory_id, vector), ...]``; all or nothing."""
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
            known = self._existing_ids(ids)
            missing = [i for i in ids if i not in known]
            if missing:
                raise ValidationError(
                    f"no memory with id {missing[0]!r} in the mirror ({len(missing)} missing); write the memory first",
                    [Problem("memory_id", "unknown memory", ids.index(i)) for i in missing],
                )
            self._check_dimension(model, [r[1] for r in rows])
            now = protocol.now_iso()
            self._conn.executemany(_UPSERT_EMBEDDING, [(i, model, b, len(b) // 4, now) for i, b in rows])
            self._generation += 1
        return len(rows)

    @_named_corruption
    def delete(self, ids: str | Iterable[str]) -> int:
        """Remove documents (their vectors, access log and links go with them); returns how many existed."""
        ids = [ids] if isinstance(ids, str) else list(ids)
        removed = 0
        with self.transaction():
            for part in _chunks(ids):
                removed += self._conn.execute(f"DELETE FROM memories WHERE id IN ({_marks(len(part))})", list(part)).rowcount
            self._generation += 1
        return removed

    def copy_foreign_rows(self, source: str | Path) -> int:
        """Copy the rows engram wrote itself, with their vectors, from another mirror file ``source``
        (e.g. a damaged one moved aside: they exist nowhere else). All or nothing; ids this file
        already has are kept. Returns the number of rows copied; a damaged ``source`` raises
        :class:`~brain.mirror.integrity.MirrorCorrupt` naming it."""
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
                        f"WHERE NOT {_IS_OURS}"
                    ).rowcount
                    if protocol.is_v2_table(protocol.table_columns(self._conn, "memory_embeddings", "source")):
                        self._conn.execute(
                            "INSERT OR IGNORE INTO main.memory_embeddings "
                            "(memory_id, model, embedding, dimensions, created_at) "
                            "SELECT e.memory_id, e.model, e.embedding, e.dimensions, e.created_at "
                            "FROM source.memory_embeddings e JOIN source.memories m ON m.id = e.memory_id "
                            f"WHERE NOT {_IS_OURS}"
                        )
                    self._generation += 1
            finally:
                self._undo("DETACH DATABASE source")
        return max(copied, 0)

    def _existing_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for part in _chunks(list(ids)):
            found.update(r[0] for r in self._conn.execute(f"SELECT id FROM memories WHERE id IN ({_marks(len(part))})", list(part)))
        return found

    def _check_dimension(self, model: str, blobs: list[bytes]) -> None:
        """All vectors of one model share a dimension: the one already stored, else the batch's first."""
        if not blobs:
            return
        row = self._conn.execute("SELECT dimensions FROM memory_embeddings WHERE model = ? LIMIT 1", (model,)).fetchone()
        expected = row[0] if row else len(blobs[0]) // 4
        for blob in blobs:
            if len(blob) // 4 != expected:
                error = EmbeddingProtocolError(
                    DIMENSION_MISMATCH, f"a {len(blob) // 4}-d vector for a model whose vectors are {expected}-d",
                    model=model,
                )
                log.warning("mirror write rejected: %s", error)
                raise error

    def _prepare(self, docs: list[Any]) -> list[dict[str, Any]]:
        """Validate a whole batch; the first protocol error, or a ValidationError listing every problem."""
        prepared: list[dict[str, Any]] = []
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
            if not isinstance(meta, Mapping):
                item.append(("metadata", f"metadata must be a dict, got {type(meta).__name__}"))
            else:
                meta = from_chroma(meta)  # the shape the store hands back (memories: tags [] when absent)
                epoch, meta_problems = _check_metadata(meta)
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
            if item:
                problems.extend(Problem(f, m, i) for f, m in item)
                continue
            seen[doc_id] = i
            try:
                row = mapping.to_row(doc_id, text, meta, epoch)
            except (TypeError, ValueError) as exc:
                problems.append(Problem("metadata", f"metadata cannot be stored as JSON: {exc}", i))
                continue
            prepared.append({
                "row": row, "blob": blob, "dimensions": len(blob) // 4 if blob is not None else None,
                "hash": None if blob is None else content_hash(text, meta, np.frombuffer(blob, dtype="<f4")),
            })
        if problems:
            summary = "; ".join(f"item {p.item}: {p.message}" for p in problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            log.warning("mirror write of %d documents rejected: %s%s", len(docs), summary, more)
            if protocol_errors:
                raise protocol_errors[0]
            raise ValidationError(f"{summary}{more} (nothing was written to the mirror)", problems)
        return prepared

    # ---- reads ---------------------------------------------------------------------------------
    @_named_corruption
    def count(self) -> int:
        """Rows in ``memories`` (ours and engram's own)."""
        return int(self._read("SELECT COUNT(*) FROM memories")[0][0])

    def count_by_type(self) -> dict[str, int]:
        """Our rows per document type, and rows engram wrote itself under ``"engram"``."""
        rows = self._read(
            f"SELECT CASE WHEN {_IS_OURS} THEN json_extract(m.metadata, '$.brain.type') ELSE 'engram' END AS kind, "
            "COUNT(*) FROM memories m GROUP BY kind ORDER BY kind"
        )
        return {kind: int(n) for kind, n in rows}

    @_named_corruption
    def ids(self, *, foreign: bool | None = None) -> set[str]:
        """Every id; ``foreign=False`` only our rows, ``foreign=True`` only rows engram wrote itself."""
        if foreign is None:
            return {r[0] for r in self._read("SELECT id FROM memories")}
        test = "NOT" if foreign else ""  # one of two constants
        return {r[0] for r in self._read(f"SELECT id FROM memories m WHERE {test} {_IS_OURS}")}

    @_named_corruption
    def get(self, ids: str | Iterable[str]) -> list[MirrorDocument]:
        """Documents by id, in the order asked; unknown ids are skipped."""
        ids = [ids] if isinstance(ids, str) else list(ids)
        found: dict[str, MirrorDocument] = {}
        for part in _chunks(ids):
            rows = self._read(f"{_SELECT_DOCS} WHERE m.id IN ({_marks(len(part))})", [self.model, *part])
            found.update((r[1], self._document(r)) for r in rows)
        return [found[i] for i in ids if i in found]

    def iter_documents(self, batch: int = 1000) -> Iterator[MirrorDocument]:
        """Every row in insertion order, ``batch`` rows per read (the lock is released between reads)."""
        last = 0
        while True:
            rows = self._read(f"{_SELECT_DOCS} WHERE m.rowid > ? ORDER BY m.rowid LIMIT ?", (self.model, last, batch))
            for r in rows:
                yield self._document(r)
            if len(rows) < batch:
                return
            last = rows[-1][0]

    def embeddings(self, memory_id: str) -> dict[str, np.ndarray]:
        """Every stored vector of one memory, by model (validated)."""
        rows = self._read("SELECT model, embedding, dimensions FROM memory_embeddings WHERE memory_id = ?", (memory_id,))
        return {m: protocol.decode_embedding(b, d, memory_id=memory_id, model=m) for m, b, d in rows}

    @_named_corruption
    def content_hashes(self) -> dict[str, bytes | None]:
        """Our rows' ids with their stored content hash (:mod:`brain.mirror.fingerprint`); None where
        the row has none (written before hashes were kept, or changed by another writer since)."""
        rows = self._read(
            f"SELECT m.id, h.hash FROM memories m LEFT JOIN brain_content_hashes h ON h.memory_id = m.id "
            f"WHERE {_IS_OURS}"
        )
        return {i: None if h is None else bytes(h) for i, h in rows}

    @_named_corruption
    def set_content_hashes(self, items: Iterable[tuple[str, bytes]]) -> int:
        """Record ``[(memory_id, hash), ...]`` for rows found equal to the documents the hashes were
        computed from (:func:`brain.mirror.sync.catch_up` does); ids not in the file are skipped.
        Returns the number recorded."""
        rows = [(i, bytes(h)) for i, h in items]
        if not rows:
            return 0
        with self.transaction():
            known = self._existing_ids([i for i, _ in rows])
            self._conn.executemany(_UPSERT_HASH, [r for r in rows if r[0] in known])
        return sum(1 for i, _ in rows if i in known)

    @_named_corruption
    def models(self) -> dict[str, int]:
        """Vectors stored per model."""
        return dict(self._read("SELECT model, COUNT(*) FROM memory_embeddings GROUP BY model ORDER BY model"))

    @_named_corruption
    def coverage(self, model: str | None = None) -> Coverage:
        with self._lock:
            self._check_open()
            return protocol.coverage(self._conn, model or self.model)

    def _document(self, row: tuple) -> MirrorDocument:
        _, doc_id, content, raw_meta, memory_type, created_at, importance, namespace, blob, dimensions = row
        meta = mapping.brain_metadata(raw_meta)
        foreign = meta is None
        if foreign:
            meta = mapping.foreign_metadata(memory_type, created_at, importance, namespace)
        vector = None
        if blob is not None:
            vector = protocol.decode_embedding(blob, dimensions, memory_id=doc_id, model=self.model)
        return MirrorDocument(doc_id, content or "", meta, vector, foreign)

    # ---- recall --------------------------------------------------------------------------------
    @_named_corruption
    def recall(
        self, query_vector: Any, k: int, *, types: Iterable[str] | None = None, scopes: Iterable[str] | None = None
    ) -> list[Hit]:
        """The ``k`` documents whose ``model`` vectors are closest in cosine to ``query_vector``.

        Only this model's vectors are compared (never another model's); none stored -> ``[]``.
        ``types`` / ``scopes`` restrict to our document types / scopes (foreign rows count as global
        memories unless their namespace names an entity scope).
        """
        _check_k(k)
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
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            raise ValidationError("the query vector is all zeros")
        scores = cache.matrix @ (query / norm)
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
        rows = self._read(f"{_SELECT_ROWS} WHERE m.id IN ({_marks(len(ids))})", ids)
        return [self._document((*r, None, None)) for r in rows]

    def _matrix(self) -> _Matrix:
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
            rows = self._conn.execute(_SELECT_MATRIX, (self.model,)).fetchall()
            cov = protocol.coverage(self._conn, self.model)
            generation = self._generation
        if not cov.sufficient:
            log.warning(
                "mirror recall: only %s; results miss the rest. Run the backfill (brain mirror backfill) "
                "to embed them with %s", cov, self.model,
            )
        ids = [r[0] for r in rows]
        matrix = protocol.decode_matrix(ids, [r[1] for r in rows], [r[2] for r in rows], model=self.model)
        if len(ids):
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            np.divide(matrix, norms, out=matrix, where=norms > 0)
        type_names: dict[str, int] = {}
        scope_names: dict[str, int] = {}
        type_codes = np.fromiter((type_names.setdefault(r[3] or "memory", len(type_names)) for r in rows), np.int32, len(rows))
        scope_codes = np.fromiter(
            (scope_names.setdefault(mapping.scope_of(r[4])[0] if r[5] is None else r[5], len(scope_names)) for r in rows),
            np.int32, len(rows),
        )
        cache = _Matrix(generation, data_version, changes, ids, np.ascontiguousarray(matrix), type_codes, type_names,
                        scope_codes, scope_names)
        with self._lock:
            if self._generation == generation:
                self._cache = cache
        return cache

    def _changes(self) -> str:
        row = self._conn.execute("SELECT value FROM engram_meta WHERE key = ?", (schema.CHANGES_KEY,)).fetchone()
        return str(row[0]) if row else ""

    @_named_corruption
    def keyword_recall(
        self, query: str, k: int, *, types: Iterable[str] | None = None, scopes: Iterable[str] | None = None
    ) -> list[KeywordHit]:
        """Full-text search (FTS5, BM25) over the texts: any of the query's words, stemmed (``peanut``
        finds ``peanuts``); no embedder needed. Best first, each with its ``bm25`` relevance.
        """
        _check_k(k)
        words = re.findall(r"\w+", query.lower()) if isinstance(query, str) else []
        if not words:
            raise ValidationError("the keyword query must contain at least one word")
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        sql = [f"SELECT m.rowid, {_ROW_COLUMNS}, bm25(memories_fts) AS rank FROM memories_fts "
               "JOIN memories m ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ?"]
        params: list[Any] = [match]
        if types is not None:
            wanted = _as_list(types)
            sql.append(f"AND coalesce({_BRAIN_FIELD.format('type')}, 'memory') IN ({_marks(len(wanted))})")
            params += wanted
        if scopes is not None:
            wanted = _as_list(scopes)
            sql.append(
                f"AND coalesce({_BRAIN_FIELD.format('scope')}, "
                f"CASE WHEN m.namespace = 'default' THEN 'global' ELSE m.namespace END) IN ({_marks(len(wanted))})"
            )
            params += wanted
        sql.append("ORDER BY rank LIMIT ?")
        params.append(k)
        rows = self._read(" ".join(sql), params)
        return [  # SQLite's bm25() is the BM25 score negated, so that ascending order puts the best first
            KeywordHit(id=d.id, text=d.text, metadata=d.metadata, bm25=-float(r[-1]))
            for r in rows
            for d in [self._document((*r[:-1], None, None))]
        ]

    # ---- backfill ------------------------------------------------------------------------------
    def backfill(
        self, embed: Callable[[list[str]], np.ndarray], model: str | None = None, *,
        progress: bool | ProgressOptions = True,
    ) -> int:
        """Embed every memory that has no vector of ``model`` (default: the configured one).

        Works in transactions of ``batch_size`` rows, each committed on its own, so an interrupted run
        keeps what it finished and a rerun does the rest. A text changed meanwhile is not written
        (its old vector would describe the wrong text). Returns the number of vectors written.
        ``progress``: a bar on a terminal, else a log line now and then (:mod:`brain.progress`).
        """
        model = check_model_name(model or self.model)
        missing_sql = ("FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e "
                       "WHERE e.memory_id = m.id AND e.model = ?)")
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
                        "INSERT OR REPLACE INTO memory_embeddings (memory_id, model, embedding, dimensions, created_at) "
                        "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE id = ? AND content = ?)",
                        [(r[1], model, b, len(b) // 4, now, r[1], r[2]) for r, b in zip(rows, blobs)],
                    )
                    written += max(cursor.rowcount, 0)  # rows inserted (not the triggers' updates)
                    self._generation += 1
                bar.update(len(rows))
                last = rows[-1][0]
        return written

    # ---- health --------------------------------------------------------------------------------
    def integrity_check(self) -> str:
        """``"ok"``, or the problems: SQLite's integrity check, foreign keys and the FTS index."""
        with self._lock:
            self._check_open()
            try:
                problems = [r[0] for r in self._conn.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]
                problems += [f"foreign key: {r[0]} row {r[1]} -> {r[2]}"
                             for r in self._conn.execute("PRAGMA foreign_key_check")]
            except sqlite3.DatabaseError as exc:  # too damaged to be checked: that is the finding
                return str(exc)
            try:
                self._conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"memories_fts: {exc}")
        return "ok" if not problems else "; ".join(problems)

    @_named_corruption
    def stats(self) -> dict[str, Any]:
        rows = self._read(
            f"SELECT COUNT(*), SUM(NOT {_IS_OURS}) FROM memories m"
        )[0]
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


def _check_metadata(meta: dict[str, Any]) -> tuple[float | None, list[tuple[str, str]]]:
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


def _check_k(k: Any) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise ValidationError(f"k must be an integer between 1 and 1000, got {k!r}")


# our rows carry {"brain": {"type": ...}} in metadata; anything else (or malformed JSON) is engram's own
_IS_OURS = "(json_valid(m.metadata) AND coalesce(json_type(m.metadata, '$.brain.type') = 'text', 0))"
_BRAIN_FIELD = "(CASE WHEN json_valid(m.metadata) THEN json_extract(m.metadata, '$.brain.{}') END)"
_ROW_COLUMNS = "m.id, m.content, m.metadata, m.memory_type, m.created_at, m.importance, m.namespace"
_SELECT_ROWS = f"SELECT m.rowid, {_ROW_COLUMNS} FROM memories m"
_SELECT_DOCS = (
    f"SELECT m.rowid, {_ROW_COLUMNS}, e.embedding, e.dimensions FROM memories m "
    "LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND e.model = ?"
)
_SELECT_MATRIX = (
    f"SELECT e.memory_id, e.embedding, e.dimensions, {_BRAIN_FIELD.format('type')}, m.namespace, "
    f"{_BRAIN_FIELD.format('scope')} "
    "FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id WHERE e.model = ? ORDER BY m.rowid"
)
# An update touches only the columns derived from our document, and only when one of them changed:
# engram's own columns (strengths, pinned, consolidation, contradictions) are left alone, and an
# unchanged document costs no FTS work.
_UPSERT_MEMORY = """
INSERT INTO memories (id, content, memory_type, layer, created_at, working_strength, core_strength, importance,
                      source, namespace, metadata)
VALUES (:id, :content, :memory_type, :layer, :created_at, 1.0, :core_strength, :importance, :source, :namespace,
        :metadata)
ON CONFLICT(id) DO UPDATE SET
    content = excluded.content, memory_type = excluded.memory_type, layer = excluded.layer,
    created_at = excluded.created_at, importance = excluded.importance, source = excluded.source,
    namespace = excluded.namespace, metadata = excluded.metadata
WHERE content IS NOT excluded.content OR memory_type IS NOT excluded.memory_type OR layer IS NOT excluded.layer
   OR created_at IS NOT excluded.created_at OR importance IS NOT excluded.importance
   OR source IS NOT excluded.source OR namespace IS NOT excluded.namespace OR metadata IS NOT excluded.metadata
"""
_UPSERT_HASH = "INSERT OR REPLACE INTO brain_content_hashes (memory_id, hash) VALUES (?, ?)"
_UPSERT_EMBEDDING = (
    "INSERT OR REPLACE INTO memory_embeddings (memory_id, model, embedding, dimensions, created_at) VALUES (?, ?, ?, ?, ?)"
)
