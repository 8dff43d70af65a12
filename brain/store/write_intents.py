"""Write intents: what a write is about to change, on disk before Chroma sees it, so that a process
killed in the middle of a write leaves the store and the mirror with all of it or none of it.

A write larger than Chroma's max batch size takes several Chroma calls, and even a one-call write
reaches Chroma and the mirror in two commits; a crash between them would leave them apart. So:

1. **Record.** Before its first Chroma call the writer records the intent: the ids it upserts, the ids
   it deletes, and the previous version (document, metadata, vector) of every one of them that
   exists. The record goes to ``<dir>/<uuid>.tmp``, is fsync'd, renamed to ``<uuid>.intent`` and the
   directory fsync'd. The writer holds an exclusive ``flock`` on the file from its creation to its
   removal: a record whose lock can be taken belongs to no running writer.
2. **Write.** The mirror's rows are staged in an open SQLite transaction, Chroma is written (one call
   per max batch), and the mirror commits only after Chroma took the whole write.
3. **Remove.** The record is unlinked (directory fsync'd), then its lock released.

A crash (kill -9, power loss) at each step:

- in 1, before the rename: only a ``.tmp`` file exists and nothing was written; the next open
  deletes it.
- in 2: Chroma may hold some chunks; the mirror's transaction never committed, so SQLite drops it.
  The next open rolls the write back (below).
- after the mirror's commit, before 3 completes: Chroma and the mirror both hold the whole write;
  the next open rolls both back. The write is lost as a whole, never in part.
- during a roll-back: every step of it is idempotent, and the record goes only once it succeeded,
  so the next open simply does it again.

**Resolution** (:meth:`WriteIntentLog.resolve`, run by every :class:`~brain.store.RagStore`
open, so by the library, the CLI and ``brain serve`` alike) takes each record no live writer holds
and rolls it back: in Chroma, the ids that were new are deleted and the previous versions written
again; then the mirror is made to agree with Chroma for those ids (unless the write had bypassed the
mirror, as a restore from the mirror does: then the mirror is the source and is left alone). Rolling
back is always possible from the record, where completing would need the new versions too.
A write whose in-process undo failed (Chroma unreachable) keeps its record; the store resolves it
before its next write, so a later write to the same ids is never rolled back by an older record.

**Scope.** Records live in a directory of the data directory, one file per write in progress. With
the embedded store the data directory is one process's (see :mod:`brain.store.locking`). With a Chroma
server (``BRAIN_CHROMA_URL``) several processes may write: each process's records sit in its own
data directory and the locks tell running writers from dead ones, so a crash is resolved by the
next open of that data directory (by any process), never while its writer lives. Not covered: two
processes writing the *same ids* at once; a roll-back restores the previous versions this record
holds, over whatever another process wrote to those ids after the crash. Records in another data
directory are invisible to this one. Nor does it repair Chroma itself: an embedded Chroma killed
inside its own write can damage its vector index (seen with chromadb 1.5.9; then
``brain restore --from-mirror``). With a server, only the client dies, and Chroma's calls stay whole.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from brain.model.errors import StoreUnavailable

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; every record found at open is then resolved
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DIRECTORY = "write_intents"
_SUFFIX = ".intent"
_PARTIAL = ".tmp"
_FORMAT = 1


@dataclass(frozen=True)
class PriorVersion:
    """A document as Chroma held it before the write."""

    document: str | None
    metadata: dict[str, object]
    embedding: np.ndarray


@dataclass
class WriteIntent:
    """One write in progress (or, found at open, one that never finished)."""

    id: str
    upserted: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    prior: dict[str, PriorVersion] = field(default_factory=dict)
    mirrored: bool = True  # False: the write bypassed the mirror, so a roll-back leaves it alone
    _log: WriteIntentLog | None = field(default=None, repr=False, compare=False)
    _fd: int | None = field(default=None, repr=False, compare=False)

    @property
    def ids(self) -> list[str]:
        """Every id the write touches (upserted, then deleted), once each."""
        return list(dict.fromkeys([*self.upserted, *self.deleted]))

    @property
    def inserted(self) -> list[str]:
        """Upserted ids that did not exist before the write (a roll-back deletes them)."""
        return [i for i in dict.fromkeys(self.upserted) if i not in self.prior]

    def done(self) -> None:
        """The write finished (or was fully undone): remove the record, then release it."""
        if self._log is not None:
            self._log._remove(self)

    def keep(self) -> None:
        """The write could not be finished or undone here: leave the record for resolution (by
        :meth:`WriteIntentLog.resolve`, at this store's next write or the next open)."""
        if self._log is not None:
            self._log._release(self, kept=True)


class WriteIntentLog:
    """The records of one data directory's writes in progress (see the module docstring)."""

    def __init__(self, data_dir: Path):
        self.directory = Path(data_dir) / DIRECTORY
        self._kept = 0  # records this process left behind and has not resolved yet

    @property
    def has_kept(self) -> bool:
        """Whether this process left a record behind (an undo that failed) that is still unresolved."""
        return self._kept > 0

    def begin(
        self,
        *,
        upserted: Iterable[str] = (),
        deleted: Iterable[str] = (),
        prior: Mapping[str, PriorVersion] | None = None,
        mirrored: bool = True,
    ) -> WriteIntent:
        """Record a write durably before it starts; the caller ends it with ``done()`` or ``keep()``."""
        intent = WriteIntent(uuid.uuid4().hex, tuple(upserted), tuple(deleted), dict(prior or {}), mirrored, self)
        body = json.dumps(_encode(intent), separators=(",", ":")).encode()
        partial = self.directory / f"{intent.id}{_PARTIAL}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot record a write in {self.directory}: {exc}; check that the data "
                f"directory is writable (nothing was written)"
            ) from exc
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # a fresh file: nobody else can hold it
            _write_all(fd, body)
            os.fsync(fd)
            os.rename(partial, self._path(intent.id))
            _fsync_dir(self.directory)
        except OSError as exc:
            os.close(fd)
            _unlink(partial)
            raise StoreUnavailable(
                f"cannot record a write in {self.directory}: {exc}; check the free disk space (nothing was written)"
            ) from exc
        intent._fd = fd
        return intent

    def pending(self) -> list[str]:
        """Ids of the records on disk (those of running writes included)."""
        if not self.directory.is_dir():
            return []
        return sorted(p.name[: -len(_SUFFIX)] for p in self.directory.glob(f"*{_SUFFIX}"))

    def resolve(self, undo: Callable[[WriteIntent], None]) -> int:
        """Call ``undo`` on every record no running writer holds, removing each once ``undo``
        returned; returns how many were resolved. A failing ``undo`` raises and keeps its record
        (and the ones not reached yet) for the next call."""
        if not self.directory.is_dir():
            return 0
        for partial in self.directory.glob(f"*{_PARTIAL}"):  # never renamed: nothing was written
            fd = self._claim(partial)
            if fd is not None:
                _unlink(partial)
                os.close(fd)
        resolved = 0
        for path in sorted(self.directory.glob(f"*{_SUFFIX}")):
            fd = self._claim(path)
            if fd is None:
                continue
            try:
                intent = _decode(_read_all(fd), path.name[: -len(_SUFFIX)])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                os.close(fd)
                raise StoreUnavailable(
                    f"the write record {path} cannot be read ({exc}); the write it describes may be half done. "
                    f"Check the store with `brain mirror verify`, then delete the file"
                ) from exc
            intent._log, intent._fd = self, fd
            try:
                undo(intent)
            except BaseException:
                self._release(intent, kept=False)
                raise
            self._remove(intent)
            resolved += 1
            log.warning(
                "a write of %d documents that never finished was rolled back (record %s)", len(intent.ids), intent.id
            )
        self._kept = 0  # every record no writer holds is resolved, this process's own included
        return resolved

    # ---- files ---------------------------------------------------------------------------------
    def _path(self, intent_id: str) -> Path:
        return self.directory / f"{intent_id}{_SUFFIX}"

    def _claim(self, path: Path) -> int | None:
        """An open, locked descriptor of ``path`` when no running writer holds it, else None."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # finished meanwhile
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return None
        try:  # the writer may have removed it between our open and our lock
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
        return None

    def _remove(self, intent: WriteIntent) -> None:
        _unlink(self._path(intent.id))
        try:
            _fsync_dir(self.directory)
        except OSError as exc:  # the unlink itself happened; only its durability across power loss is unsure
            log.warning("cannot fsync %s: %s", self.directory, exc)
        self._release(intent, kept=False)

    def _release(self, intent: WriteIntent, *, kept: bool) -> None:
        if intent._fd is not None:
            os.close(intent._fd)  # closing drops the flock
            intent._fd = None
            self._kept += int(kept)
        intent._log = None


def _encode(intent: WriteIntent) -> dict[str, object]:
    return {
        "format": _FORMAT,
        "pid": os.getpid(),
        "mirrored": intent.mirrored,
        "upserted": list(intent.upserted),
        "deleted": list(intent.deleted),
        "prior": [
            {
                "id": doc_id,
                "document": p.document,
                "metadata": p.metadata,
                "embedding": base64.b64encode(np.asarray(p.embedding, dtype="<f4").tobytes()).decode("ascii"),
            }
            for doc_id, p in intent.prior.items()
        ],
    }


def _decode(body: bytes, intent_id: str) -> WriteIntent:
    data = json.loads(body)
    if data.get("format") != _FORMAT:
        raise ValueError(f"unknown record format {data.get('format')!r}")
    prior = {
        p["id"]: PriorVersion(
            p["document"],
            dict(p["metadata"]),
            np.frombuffer(base64.b64decode(p["embedding"]), dtype="<f4").astype(np.float32),
        )
        for p in data["prior"]
    }
    return WriteIntent(intent_id, tuple(data["upserted"]), tuple(data["deleted"]), prior, bool(data["mirrored"]))


def _write_all(fd: int, body: bytes) -> None:
    view = memoryview(body)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


__all__ = ["DIRECTORY", "PriorVersion", "WriteIntent", "WriteIntentLog"]
