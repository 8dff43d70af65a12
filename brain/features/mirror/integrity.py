"""A damaged mirror file: how it is recognised, what brain does meanwhile, and where the old file goes.

The mirror is a copy: Chroma is the store. So a damaged mirror never stops brain. A file that is not a
database, or fails ``PRAGMA quick_check`` when it is opened, raises :class:`MirrorCorrupt`; the store
then opens without its mirror and records why in its :class:`MirrorHealth` (reported by
``/v1/health``). Damage found later, by a read or a write, raises :class:`MirrorCorrupt` as well, and
the store switches the mirror off the same way. While it is off, every write goes to Chroma alone and
is counted and logged as not mirrored. ``brain mirror rebuild`` (:func:`brain.features.mirror.sync.rebuild_mirror`)
moves the damaged file aside under a timestamped name (nothing is deleted) and rebuilds the mirror from
Chroma with Chroma's vectors.

Corruption means SQLite's own verdict, the result codes ``SQLITE_CORRUPT`` (a malformed page, index or
FTS segment) and ``SQLITE_NOTADB`` (a garbage header). Other errors (a locked or unreadable file, a full
disk) are not damage: the file is fine and the cause lies elsewhere, so they keep their own messages.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from brain.model.errors import REBUILD_COMMAND, MirrorCorrupt, StoreUnavailable

log = logging.getLogger(__name__)

_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
#: SQLite's companions of a database file, moved aside with it (a WAL belongs to its own file only)
_COMPANIONS = ("-wal", "-shm", "-journal")


def is_corruption(exc: BaseException) -> bool:
    """True when SQLite says the file itself is damaged (see the module docstring)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # raised by the sqlite3 module itself, not by SQLite: never a verdict on the file
        return False
    # an extended code (e.g. SQLITE_CORRUPT_VTAB) keeps its primary code in the low byte
    return (code & 0xFF) in _CORRUPT_CODES


@contextmanager
def corruption_named(path: str | Path) -> Iterator[None]:
    """Raise SQLite's corruption errors inside the block as :class:`MirrorCorrupt` for ``path``."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if is_corruption(exc):
            raise MirrorCorrupt(path, str(exc)) from exc
        raise


def quick_check(conn: sqlite3.Connection) -> str | None:
    """None when ``PRAGMA quick_check`` passes, else its first findings (the b-trees' structure and
    every page's reachability: O(file size), no index-content comparison)."""
    rows = [" ".join(str(r[0]).split()) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    if rows == ["ok"]:
        return None
    return "quick_check: " + "; ".join(rows)


def aside_path(path: Path, when: datetime | None = None) -> Path:
    """Where :func:`move_aside` puts ``path``: ``mirror.broken-20260301T100000Z.db`` next to it."""
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    candidate = path.with_name(f"{path.stem}.broken-{stamp}{path.suffix}")
    n = 1
    while candidate.exists():  # two rebuilds in one second keep both files
        candidate = path.with_name(f"{path.stem}.broken-{stamp}-{n}{path.suffix}")
        n += 1
    return candidate


def companions(path: str | Path) -> list[Path]:
    """The WAL, shared-memory and journal files of the SQLite file ``path`` that exist."""
    path = Path(path)
    return [c for c in (path.with_name(path.name + suffix) for suffix in _COMPANIONS) if c.exists()]


def drop_empty_wal(path: str | Path) -> None:
    """Remove the ``-wal`` and ``-shm`` files a read of ``path`` left behind (a read-only connection
    cannot remove them when it closes), when the WAL holds nothing: then they only index an empty log.
    Call it with no connection to ``path`` open."""
    path = Path(path)
    wal, shm = path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")
    if wal.exists() and wal.stat().st_size > 0:
        return  # it holds writes the file lacks: kept with it
    for sidecar in (wal, shm):
        sidecar.unlink(missing_ok=True)


def move_aside(path: str | Path) -> list[Path]:
    """Rename the file and its WAL, shared-memory and journal files to a timestamped name (kept, never
    deleted); returns the new paths, the database file first. Nothing to move -> ``[]``."""
    path = Path(path)
    if not path.exists():
        return []
    target = aside_path(path)
    moved = []
    try:
        path.rename(target)
        moved.append(target)
        for suffix in _COMPANIONS:
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                companion.rename(target.with_name(target.name + suffix))
                moved.append(target.with_name(target.name + suffix))
    except OSError as exc:
        raise StoreUnavailable(
            f"cannot move the mirror {path} aside ({exc}); check the permissions of {path.parent}"
        ) from exc
    return moved


@dataclass
class MirrorHealth:
    """The state of a store's mirror, for ``/v1/health``: ``off`` (disabled), ``ok``, ``degraded`` or
    ``broken``.

    ``error`` is why it is broken; ``unmirrored`` counts the documents written or deleted in Chroma
    alone since it broke (what a rebuild brings back into the mirror). ``unwritable`` is why the file
    cannot be written now (read-only, its disk full, locked by another program): the mirror is then
    ``degraded``, ``behind`` counts the documents whose writes it missed, and they are caught up by
    themselves once it can be written again (:class:`~brain.features.mirror.subscriber.MirrorSubscriber`).
    """

    path: Path | None
    enabled: bool = True
    error: MirrorCorrupt | None = None
    unmirrored: int = 0
    unwritable: str | None = None
    behind: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def status(self) -> str:
        if not self.enabled:
            return "off"
        if self.error is not None:
            return "broken"
        return "degraded" if self.unwritable is not None else "ok"

    def broke(self, error: MirrorCorrupt) -> None:
        self.error = error
        log.warning("%s", error)

    def missed(self, count: int, action: str = "written") -> None:
        """``count`` documents were ``action`` in Chroma alone because the mirror is broken."""
        if self.error is None or count <= 0:
            return
        with self._lock:
            self.unmirrored += count
            total = self.unmirrored
        log.warning(
            "%d documents %s in Chroma only, not in the mirror (%d since it broke): the mirror %s is damaged; "
            "run `%s` to rebuild it from the store",
            count,
            action,
            total,
            self.path,
            REBUILD_COMMAND,
        )

    def fell_behind(self, reason: str, behind: int) -> None:
        """The mirror could not take a write (``reason``); ``behind`` documents now wait for it."""
        first = self.unwritable is None
        self.unwritable, self.behind = reason, behind
        (log.warning if first else log.info)(
            "the mirror %s cannot be written (%s): writes go on in Chroma, %d documents wait to be mirrored; they "
            "are caught up once the file is writable again",
            self.path,
            reason,
            behind,
        )

    def caught_up(self, repaired: int) -> None:
        if self.unwritable is not None:
            log.warning("the mirror %s is writable again: %d documents caught up", self.path, repaired)
        self.unwritable, self.behind = None, 0

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "status": self.status,
            "ok": self.status in ("ok", "off"),
            "path": None if self.path is None else str(self.path),
        }
        if self.error is not None:
            data.update(error=self.error.detail, fix=REBUILD_COMMAND, unmirrored=self.unmirrored)
        elif self.unwritable is not None:
            data.update(
                error=f"the mirror cannot be written: {self.unwritable}",
                behind=self.behind,
                fix="make the mirror file writable again (free space, permissions); the documents "
                "behind are caught up by themselves",
            )
        return data
