"""One process per embedded data directory.

Embedded Chroma (``PersistentClient``) is thread-safe but not process-safe: two processes writing
the same directory can corrupt it. The first process to open a data directory takes an exclusive
``flock`` on ``<data dir>/brain.lock`` and keeps it while any store in that process uses the
directory; a second process gets :class:`~brain.errors.StoreLocked` naming the holder's pid and
the way out (a Chroma server via ``BRAIN_CHROMA_URL``). The kernel drops the lock when the holder
exits, however it exits, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from brain.errors import StoreLocked, StoreUnavailable

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; the single-process rule is then only documented
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = "brain.lock"

_held: dict[Path, tuple[int, int]] = {}  # lock file -> (fd, users in this process)
_guard = threading.Lock()


class DataDirLock:
    """A process's claim on an embedded data directory; :meth:`release` once per :meth:`acquire`."""

    def __init__(self, data_dir: Path):
        self.path = (Path(data_dir) / LOCK_NAME).resolve()
        self._released = True

    def acquire(self) -> "DataDirLock":
        with _guard:
            fd, users = _held.get(self.path, (-1, 0))
            if users == 0:
                fd = self._lock_file()
            _held[self.path] = (fd, users + 1)
        self._released = False
        return self

    def release(self) -> None:
        with _guard:
            if self._released:
                return
            self._released = True
            fd, users = _held.get(self.path, (-1, 0))
            if users <= 1:
                _held.pop(self.path, None)
                if fd >= 0:
                    os.close(fd)  # closing the descriptor drops the flock
            else:
                _held[self.path] = (fd, users - 1)

    def _lock_file(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the lock file {self.path}: {exc}; set BRAIN_DATA_DIR") from exc
        if fcntl is None:
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise StoreLocked(
                f"the data directory {self.path.parent} is in use by {who}. The embedded Chroma store is "
                f"single-process: stop the other process, give this one its own BRAIN_DATA_DIR, or run a "
                f"Chroma server (`chroma run --path {self.path.parent / 'chroma'}`) and set BRAIN_CHROMA_URL "
                f"in every process"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def _read_pid(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 32).decode(errors="replace").strip()
    except OSError:
        return ""
