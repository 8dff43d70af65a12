"""Refusing writes before the disk is full.

A full disk is worse than a refused write: Chroma's bindings can block in a write while holding the
interpreter's lock, and then nothing answers, not even health, and the process ignores SIGTERM. So
every write is checked first: while the disk of a directory brain writes to (the data directory; the
mirror's, when it lives elsewhere) has less free space than the margin (``BRAIN_MIN_FREE_DISK_MB``),
the write is refused with :class:`~brain.model.errors.DiskSpaceLow` before anything is written, and reads
and health go on. The check is one ``statvfs`` per directory and write.

The guard is a write subscriber (:mod:`brain.store.events`): ``stage`` runs before Chroma is called,
and raising there fails the write with nothing stored.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from brain.model.errors import DiskSpaceLow
from brain.store.events import WriteEvent, WriteSubscriber

MB = 2**20


class DiskGuard(WriteSubscriber):
    """Refuses writes while a disk of ``paths`` has less than ``margin_mb`` MB free (0: never)."""

    def __init__(self, paths: Iterable[str | Path], margin_mb: int):
        self.paths = list(dict.fromkeys(Path(p) for p in paths))
        self.margin = int(margin_mb) * MB

    def stage(self, event: WriteEvent) -> None:
        if not event.restored:  # re-stating what Chroma holds after a roll-back writes nothing new
            self.check()

    def check(self) -> None:
        """Raise :class:`DiskSpaceLow` for the first directory whose disk is below the margin."""
        if self.margin <= 0:
            return
        for path, free in self._free():
            if free is not None and free < self.margin:
                raise DiskSpaceLow(path, free, self.margin)

    def status(self, *, detail: bool = False) -> dict[str, object]:
        """For health: ``ok`` (False while writes are refused); with ``detail``, the free space of the
        tightest disk and the margin, in MB."""
        free = [f for _, f in self._free() if f is not None]
        least = min(free) if free else None
        ok = self.margin <= 0 or least is None or least >= self.margin
        report: dict[str, object] = {"ok": ok}
        if detail:
            report.update(free_mb=None if least is None else least // MB, min_free_mb=self.margin // MB)
        if not ok and least is not None:  # below the margin: some disk was measured
            report["error"] = (
                f"writes are refused: the disk has {least / MB:.0f} MB free, less than "
                f"BRAIN_MIN_FREE_DISK_MB ({self.margin // MB} MB); reads go on. Free some space, "
                "or lower BRAIN_MIN_FREE_DISK_MB"
            )
        return report

    def _free(self) -> list[tuple[Path, int | None]]:
        return [(path, _free_bytes(path)) for path in self.paths]


def _free_bytes(path: Path) -> int | None:
    """Free bytes for an unprivileged writer on ``path``'s disk (its nearest existing ancestor); None
    when it cannot be told."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def guarded_paths(settings: Any) -> list[Path]:
    """The directories a store of ``settings`` writes to: the data directory, and the mirror's."""
    paths = [Path(settings.data_dir)]
    if settings.mirror_enabled:
        paths.append(Path(settings.mirror_file).parent)
    return [Path(os.path.abspath(p)) for p in paths]


__all__ = ["DiskGuard", "guarded_paths"]


def sync_directory(path: Path) -> None:
    """fsync the directory ``path``, so that a file renamed or removed in it stays so after a crash."""
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_json_durably(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON so that a crash leaves the old file or the new one, whole: a
    temporary file beside it, fsync'd, renamed over it, the directory fsync'd. Raises :class:`OSError`; the
    caller says what the file was for."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        json.dump(data, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    sync_directory(path.parent)
