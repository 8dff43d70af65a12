"""Evicted parts of the indexes kept on disk, one file each, so that an entity served again is read back in
a few milliseconds instead of from Chroma (:mod:`brain.store.partitions`).

Only for the embedded store, whose writes all pass through its one process: a file is **current** while no
write touched its scope since it was saved, and the store drops the file before such a write reaches Chroma
(:meth:`PartFiles.drop`, called from the store's ``stage``). What is current is kept in memory (scope ->
SHA-256 of the file), and across a restart in the header of the signed index snapshot
(:mod:`brain.store.snapshot`), so a file is trusted only when its digest is the one a signed snapshot
names: one put there by whoever can write the data directory is not. Without a snapshot to name them (a
crash, a snapshot refused) the files are deleted and parts are read from Chroma.

A part is saved once read from Chroma (and again at its eviction if a write dropped its file meanwhile),
on a thread of its own so that the request does not wait, and only when it holds at least
:data:`MIN_ROWS` rows (a small part reads from Chroma as fast). Each text's keyword tokens are saved with
it, so a part read back builds its lexical side without the stemmer.
Files are not flushed to the disk: a file a crash cut short fails its digest and the part is read from
Chroma.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from brain.store.partitions import Part
from brain.store.snapshot import (
    FORMAT,
    SnapshotIdentity,
    SnapshotUnusable,
    json_bytes,
    json_value,
    part_entries,
    read_archive,
    read_part,
    write_archive,
)

log = logging.getLogger(__name__)

#: parts of fewer rows are not saved: Chroma reads them about as fast
MIN_ROWS = 200
#: the files are trusted by their digest, named in a signed snapshot, not by this key
_KEY = b"brain part file"


class PartFiles:
    """The current files of evicted parts of one store, by scope. Thread-safe."""

    def __init__(self, directory: Path, identity: SnapshotIdentity):
        self.directory = directory
        self.identity = identity
        self._current: dict[str, str] = {}  # scope -> SHA-256 of its file
        self._generation: dict[str, int] = {}  # bumped when a scope is written: a save begun before is stale
        self._lock = threading.Lock()
        self._saver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="brain-part-files")
        self._pending: list[Future[None]] = []
        self.saved_since_load = False  # a file was saved that no snapshot lists yet

    def path(self, scope: str) -> Path:
        return self.directory / f"{hashlib.sha256(scope.encode()).hexdigest()[:32]}.npz"

    def current(self) -> dict[str, str]:
        """The current files (scope -> digest), for the snapshot's header."""
        with self._lock:
            return dict(self._current)

    def adopt(self, named: dict[str, str]) -> None:
        """Trust the files a loaded (signed) snapshot names; delete every other file."""
        with self._lock:
            self._current = dict(named)
            keep = {self.path(scope).name for scope in named}
        self._delete_except(keep)

    def clear(self) -> None:
        """Forget every file (the indexes were rebuilt, or no snapshot names them)."""
        with self._lock:
            for scope in self._current:
                self._generation[scope] = self._generation.get(scope, 0) + 1
            self._current = {}
        self._delete_except(set())

    def drop(self, scopes: set[str] | None) -> None:
        """A write is about to touch ``scopes`` (None: scopes unknown, so every one): their files go first."""
        with self._lock:
            gone = list(self._current) if scopes is None else [s for s in scopes if s in self._current]
            for scope in self._current if scopes is None else scopes:
                self._generation[scope] = self._generation.get(scope, 0) + 1
            for scope in gone:
                del self._current[scope]
        for scope in gone:
            self.path(scope).unlink(missing_ok=True)

    def keep(self, scope: str, part: Part) -> None:
        """Save ``scope``'s part (in the background) unless it is small or its file is current: after it was
        read from Chroma, and when it is evicted (a write may have dropped its file meanwhile). A part read
        from its file and evicted again costs nothing."""
        if sum(len(index) for index in part.values()) < MIN_ROWS:
            return
        with self._lock:
            if scope in self._current:
                return
            generation = self._generation.get(scope, 0)
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._saver.submit(self._save, scope, part, generation))

    def _save(self, scope: str, part: Part, generation: int) -> None:
        path = self.path(scope)
        for index in part.values():
            index.build_lexical()  # the tokens go with the file
        entries, _ = part_entries(part)
        entries["header"] = json_bytes({"format": FORMAT, **self.identity.to_dict(), "scope": scope})
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_archive(path, entries, _KEY, durable=False)
            digest = _digest(path)
        except OSError as exc:
            log.warning("could not save the index part of %s to %s (%s); it is read from Chroma", scope, path, exc)
            return
        with self._lock:
            if self._generation.get(scope, 0) == generation:
                self._current[scope] = digest
                self.saved_since_load = True
                return
        path.unlink(missing_ok=True)  # written to while it was saved: stale already

    def load(self, scope: str) -> Part | None:
        """``scope``'s part from its current file, or None (no file, or one that fails its digest or checks:
        then it is deleted and the part is read from Chroma)."""
        with self._lock:
            digest = self._current.get(scope)
        if digest is None:
            return None
        path = self.path(scope)
        try:
            with open(path, "rb") as stream:
                if hashlib.file_digest(stream, "sha256").hexdigest() != digest:
                    raise SnapshotUnusable("its digest is not the one the store recorded")
                stream.seek(0)
                return self._part(scope, read_archive(stream, _KEY))
        except (OSError, SnapshotUnusable, ValueError, KeyError) as exc:
            log.warning("index part file %s of %s ignored (%s); reading the part from Chroma", path, scope, exc)
            self.drop({scope})
            return None

    def _part(self, scope: str, archive: dict[str, np.ndarray]) -> Part:
        header = json_value(archive["header"])
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("scope") != scope:
            raise SnapshotUnusable("its header does not name this scope and format")
        mismatch = self.identity.mismatch(header)
        if mismatch:
            raise SnapshotUnusable(mismatch)
        return read_part(archive, self.identity, scope)[0]

    def wait(self) -> None:
        """Let the saves under way finish (before the snapshot lists the current files)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        self.wait()
        self._saver.shutdown(wait=True)

    def _delete_except(self, keep: set[str]) -> None:
        if not self.directory.is_dir():
            return
        for file in self.directory.iterdir():
            if file.name not in keep and file.suffix in (".npz", ".tmp"):
                file.unlink(missing_ok=True)


def _digest(path: Path) -> str:
    with open(path, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


__all__ = ["MIN_ROWS", "PartFiles"]
