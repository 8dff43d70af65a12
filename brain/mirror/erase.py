"""Erasing from the mirror for good: what one namespace holds, removing it, and leaving no trace in the file.

A deleted row's bytes can outlive it in three places of a SQLite file: the freed space of its pages,
the write-ahead log (``-wal``), and the full-text index, whose segments keep the tokens of deleted rows
until they are merged. :meth:`MirrorErase.scrub` clears each: the connection runs with
``secure_delete`` (freed space is zeroed; set when the file is opened), the FTS index is merged
(``optimize``), the file is vacuumed and the log checkpointed and truncated.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from brain.errors import StoreUnavailable
from brain.mirror.rows import chunks, marks, named_corruption

#: the tables whose rows belong to one mirrored document (all cascade from ``memories``)
_DEPENDENT = (("vectors", "memory_embeddings"), ("access_log", "access_log"),
              ("content_hashes", "brain_content_hashes"))


class MirrorErase:
    """The erasing part of :class:`~brain.mirror.store.EngramMirror` (its connection, lock and transactions)."""

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
                    f"SELECT COUNT(*) FROM {table} WHERE memory_id IN ({marks(len(part))})", part)[0][0]
        return counts

    @named_corruption
    def scrub(self) -> dict[str, Any]:
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
                raise StoreUnavailable(f"could not compact the mirror {self.path} ({exc}); the rows are deleted, "
                                       f"but their bytes may remain in the file until it is compacted: close other "
                                       f"programs using it and run the forget again") from exc
            self._generation += 1
        return {"vacuumed": True, "wal_truncated": not busy}


__all__ = ["MirrorErase"]
