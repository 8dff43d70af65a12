"""One process per embedded data directory.

Embedded Chroma (``PersistentClient``) is thread-safe but not process-safe: two processes writing
the same directory can corrupt it. The first process to open a data directory takes an exclusive
``flock`` on ``<data dir>/brain.lock`` and keeps it while any store in that process uses the
directory; a second process gets :class:`~brain.model.errors.StoreLocked` naming the holder's pid and
the way out (a Chroma server via ``BRAIN_CHROMA_URL``). The kernel drops the lock when the holder
exits, however it exits, so a crash never leaves a stale lock behind.

The lock file holds the holder's pid and, when the holder is ``brain serve``, the address of its HTTP
API (:func:`announce`): :class:`~brain.model.errors.StoreLocked` carries both, so the CLI run beside the
server reaches the store through the server instead of opening the directory a second time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from brain.model.errors import StoreLocked, StoreUnavailable

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

    def acquire(self) -> DataDirLock:
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
            holder, url = _read_holder(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            if url:
                who = f"`brain serve` ({who}, serving {url})"
            raise StoreLocked(
                f"the data directory {self.path.parent} is in use by {who}. The embedded Chroma store is "
                f"single-process: stop the other process, give this one its own BRAIN_DATA_DIR, or run a "
                f"Chroma server (`chroma run --path {self.path.parent / 'chroma'}`) and set BRAIN_CHROMA_URL "
                f"in every process",
                holder=holder,
                server_url=url,
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def announce(data_dir: Path, url: str) -> None:
    """Record ``url``, where this process serves the HTTP API, in the lock file of ``data_dir``, which
    this process must hold (the kernel's lock going with the process, a stale address is never read)."""
    path = (Path(data_dir) / LOCK_NAME).resolve()
    with _guard:
        fd, users = _held.get(path, (-1, 0))
        if users == 0 or fd < 0:
            raise StoreUnavailable(f"cannot announce {url}: this process does not hold {path}")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{url}\n".encode(), 0)


def _read_holder(fd: int) -> tuple[int | None, str | None]:
    """(pid, server address) from a lock file; None for what it does not say."""
    try:
        lines = os.pread(fd, 1024, 0).decode(errors="replace").split()
    except OSError:
        return None, None
    pid = int(lines[0]) if lines and lines[0].isdigit() else None
    url = lines[1] if len(lines) > 1 and lines[1].startswith("http://") else None
    return pid, url
