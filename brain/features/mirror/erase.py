"""Erasing from the mirror for good: what one namespace holds, removing it, and leaving no trace in the file.

A deleted row's bytes can outlive it in three places of a SQLite file: the freed space of its pages,
the write-ahead log (``-wal``), and the full-text index, whose segments keep the tokens of deleted rows
until they are merged. :meth:`MirrorErase.scrub` clears each: the connection runs with
``secure_delete`` (freed space is zeroed; set when the file is opened), the FTS index is merged
(``optimize``), the file is vacuumed and the log checkpointed and truncated.

The copies ``brain mirror rebuild`` keeps beside the mirror (``mirror.broken-<time>.db``, see
:func:`brain.features.mirror.integrity.move_aside`) hold the same rows: :func:`kept_copies` finds them and
:func:`erase_from_copy` erases a namespace from one the same way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from brain.features.mirror.rows import MirrorParts, chunks, marks, named_corruption
from brain.model.errors import StoreUnavailable

#: the tables whose rows belong to one mirrored document (all cascade from ``memories``)
_DEPENDENT = (
    ("vectors", "memory_embeddings"),
    ("access_log", "access_log"),
    ("content_hashes", "brain_content_hashes"),
)


class MirrorErase(MirrorParts):
    """The erasing part of :class:`~brain.features.mirror.store.EngramMirror` (which holds the connection,
    the lock and the transactions)."""

    @named_corruption
    def namespace_ids(self, namespace: str) -> list[str]:
        """Ids of every row in ``namespace`` (ours and engram's own)."""
        return [r[0] for r in self._read("SELECT id FROM memories WHERE namespace = ?", (namespace,))]

    @named_corruption
    def footprint(self, ids: Iterable[str]) -> dict[str, int]:
        """How many rows ``ids`` have here: ``{"rows", "vectors", "access_log", "content_hashes"}``."""
        ids = list(dict.fromkeys(ids))
        counts = {"rows": 0, **{name: 0 for name, _ in _DEPENDENT}}
        for part in chunks(ids):
            counts["rows"] += self._read(f"SELECT COUNT(*) FROM memories WHERE id IN ({marks(len(part))})", part)[0][0]
            for name, table in _DEPENDENT:  # table names are our constants, not input
                counts[name] += self._read(
                    f"SELECT COUNT(*) FROM {table} WHERE memory_id IN ({marks(len(part))})", part
                )[0][0]
        return counts

    @named_corruption
    def scrub(self) -> dict[str, object]:
        """Leave no bytes of deleted rows in the file or its log (see the module docstring). Needs every
        other connection to the file to be idle (engram's, if one is open): it waits up to the busy
        timeout, then raises :class:`StoreUnavailable` naming the retry."""
        with self._lock:
            self._check_open()
            try:
                self._conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
                self._conn.execute("VACUUM")
                busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(
                    f"could not compact the mirror {self.path} ({exc}); the rows are deleted, "
                    f"but their bytes may remain in the file until it is compacted: close other "
                    f"programs using it and run the forget again"
                ) from exc
            self._generation += 1
        return {"vacuumed": True, "wal_truncated": not busy}


def kept_copies(path: str | Path) -> list[Path]:
    """The copies of the mirror ``path`` that ``brain mirror rebuild`` moved aside and kept."""
    path = Path(path)
    companions = ("-wal", "-shm", "-journal")
    return sorted(
        p
        for p in path.parent.glob(f"{path.stem}.broken-*{path.suffix}")
        if p.is_file() and not p.name.endswith(companions)
    )


def copy_namespace_rows(copy: Path, namespace: str) -> int:
    """How many rows of ``namespace`` the kept copy ``copy`` holds; a copy SQLite cannot read raises
    :class:`StoreUnavailable` naming it (its bytes may hold the namespace's text)."""
    with _copy_connection(copy) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM memories WHERE namespace = ?", (namespace,)).fetchone()[0])


def erase_from_copy(copy: Path, namespace: str) -> int:
    """Delete every row of ``namespace`` from the kept copy ``copy`` and leave no byte of them in it (as
    :meth:`MirrorErase.scrub`); returns how many rows went."""
    with _copy_connection(copy) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            removed = conn.execute("DELETE FROM memories WHERE namespace = ?", (namespace,)).rowcount
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'").fetchone():
                conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return max(removed, 0)


class _copy_connection:
    """A connection to a kept copy, set up to erase (``secure_delete``, cascading deletes); SQLite's
    errors become :class:`StoreUnavailable` saying what to do with the copy."""

    def __init__(self, copy: Path):
        self.copy = Path(copy)

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.conn = sqlite3.connect(str(self.copy), timeout=10, isolation_level=None)
            self.conn.execute("PRAGMA secure_delete = ON")
            self.conn.execute("PRAGMA foreign_keys = ON")  # vectors, access log and hashes go with their row
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        return self.conn

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self.conn.close()
        if isinstance(exc, sqlite3.Error):
            raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> StoreUnavailable:
        return StoreUnavailable(
            f"cannot erase from {self.copy}, a copy of the mirror kept by `brain mirror rebuild` ({exc}); it may "
            f"hold the text to forget. Delete that file once nothing in it is needed, then run the forget again"
        )


__all__ = ["MirrorErase", "copy_namespace_rows", "erase_from_copy", "kept_copies"]
