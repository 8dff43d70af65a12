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
write, raises :class:`~brain.features.mirror.integrity.MirrorCorrupt` (see :mod:`brain.features.mirror.integrity`).

The class is assembled from one module per job: :mod:`brain.features.mirror.writes` (documents, vectors,
deletes, backfill), :mod:`brain.features.mirror.reads` (documents, counts, hashes, health),
:mod:`brain.features.mirror.recall` (vector and keyword recall), :mod:`brain.features.mirror.erase` (erasing for
good); this module holds the connection, the opening and migration of the file, and the transactions.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from brain.features.mirror import protocol, schema
from brain.features.mirror.erase import MirrorErase
from brain.features.mirror.integrity import corruption_named, is_corruption, quick_check
from brain.features.mirror.protocol import MigrationReport, check_model_name
from brain.features.mirror.reads import MirrorReads
from brain.features.mirror.recall import MirrorRecall
from brain.features.mirror.rows import KeywordHit, MirrorDocument, RecallMatrix, named_corruption
from brain.features.mirror.writes import MirrorWrites
from brain.model.errors import EmbeddingProtocolError, MirrorCorrupt, StoreUnavailable, ValidationError

log = logging.getLogger(__name__)

MIN_BATCH, MAX_BATCH = 100, 1000

__all__ = ["MAX_BATCH", "MIN_BATCH", "EngramMirror", "KeywordHit", "MirrorDocument", "unwritable"]


def unwritable(path: str | Path) -> str | None:
    """Why the mirror file ``path`` (or its log or shared-memory file) cannot be written now, or None.
    Checked before the store writes it: SQLite maps the shared-memory file (``-shm``), and writing a
    mapping of a file that became read-only kills the process (SIGBUS) rather than raising, so such a
    file is never touched."""
    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        part = path.with_name(path.name + suffix)
        if part.exists() and not os.access(part, os.W_OK):
            return f"{part} is read-only"
    if not path.with_name(path.name + "-wal").exists():  # the log is created beside it (the directory too)
        directory = path.parent
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent
        if not os.access(directory, os.W_OK):
            return f"the directory {directory} is read-only"
    return None


class EngramMirror(MirrorWrites, MirrorReads, MirrorRecall, MirrorErase):
    """The Engram-compatible SQLite mirror (see :mod:`brain.features.mirror`).

    ``model`` is our embedder's name (``provider/model``); recall and :meth:`iter_documents` use its
    vectors only. ``migration`` holds the :class:`~brain.features.mirror.protocol.MigrationReport` when opening
    migrated an older file, else None; ``protocol_version`` the version the file declared on open;
    ``fts_rebuilt`` is True when opening rebuilt the keyword index with the stemming tokenizer.
    A damaged file raises :class:`~brain.features.mirror.integrity.MirrorCorrupt`.
    """

    def __init__(self, path: str | Path, model: str, *, batch_size: int = 500):
        try:
            self.model = check_model_name(model)
        except EmbeddingProtocolError as exc:
            raise EmbeddingProtocolError(
                exc.code, f"{exc.detail}; the mirror needs the embedder's provider/model name (BRAIN_EMBEDDER)"
            ) from None
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not MIN_BATCH <= batch_size <= MAX_BATCH:
            raise ValidationError(
                f"batch_size must be an integer between {MIN_BATCH} and {MAX_BATCH}, got {batch_size!r}"
            )
        self.batch_size = batch_size
        self.path = Path(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._generation = 0
        self._cache: RecallMatrix | None = None
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
        # a deleted memory's text is zeroed, not left in the file's free space (see brain.features.mirror.erase)
        self._conn.execute("PRAGMA secure_delete = ON")

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
                    self.path,
                    version,
                    protocol.PROTOCOL_VERSION,
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
    def transaction(self) -> Iterator[EngramMirror]:
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
                raise StoreUnavailable(
                    f"committing to the mirror {self.path} failed: {exc}; nothing was written"
                ) from exc

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

    def unwritable(self) -> str | None:
        """Why the file cannot be written now, or None (see :func:`unwritable`)."""
        return unwritable(self.path)

    def use_model(self, model: str) -> None:
        """Recall and write ``model``'s vectors from now on (the store was re-indexed for it); the
        vectors of other models stay until :meth:`drop_models`."""
        model = check_model_name(model)
        with self._lock:
            self.model = model
            self._cache = None
            self._generation += 1

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                reason = self.unwritable()
                if reason is None:
                    self._conn.close()
                else:
                    # closing makes SQLite write its shared memory, which kills the process (SIGBUS) when the
                    # file became read-only: the connection stays open, never freed, until the process ends
                    log.warning("mirror %s left open (%s); the next start catches it up", self.path, reason)
                    ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._conn))
                self._conn = None  # type: ignore[assignment]
                self._cache = None

    def __enter__(self) -> EngramMirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @named_corruption
    def _read(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            self._check_open()
            return self._conn.execute(sql, params).fetchall()
