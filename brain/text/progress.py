"""Progress of a long job, on stderr: a bar on a terminal, a plain line now and then otherwise.

One helper for every long job (knowledge-base ingestion, the mirror's backfill). On a terminal it is
a tqdm bar, moved by each batch, with the rate and the time left. When stderr is a file or a pipe (a
CI log, a service's journal) a bar would fill it with carriage returns and half-lines, so the job
writes one line at most every ``interval`` seconds instead, and a closing line if it wrote any: a job
shorter than ``interval`` stays silent.

    with open_progress(True, total=300, desc="embedding", unit="doc") as progress:
        for batch in batches:
            ...
            progress.update(len(batch))
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

#: seconds between two log lines when stderr is not a terminal
LOG_INTERVAL = 10.0


@dataclass(frozen=True)
class ProgressOptions:
    """How to report progress: ``stream`` (default: ``sys.stderr`` when the job starts), ``bar``
    (None: a bar exactly when the stream is a terminal) and ``interval`` (seconds between log lines)."""

    stream: TextIO | None = None
    bar: bool | None = None
    interval: float = LOG_INTERVAL


class Progress:
    """Counts done units of a job of ``total`` units and shows it (see the module docstring)."""

    def __init__(
        self, total: int, desc: str, unit: str, options: ProgressOptions | None = None, *, enabled: bool = True
    ):
        options = options or ProgressOptions()
        self.total = max(int(total), 0)
        self.desc = desc
        self.unit = unit
        self.done = 0
        self.lines = 0  # log lines written
        self._stream = options.stream if options.stream is not None else sys.stderr
        self._interval = max(float(options.interval), 0.0)
        self._enabled = enabled and self.total > 0
        self._started = self._last = time.monotonic()
        self._bar: Any = None
        if self._enabled and (options.bar if options.bar is not None else _is_terminal(self._stream)):
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=unit, file=self._stream, dynamic_ncols=True)

    def update(self, n: int) -> None:
        if n <= 0:
            return
        self.done += n
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            self._write(self._line(now))

    def note(self, line: str) -> None:
        """One line of the job's own (an estimate, say), written where the progress goes, when it is shown."""
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.write(line, file=self._stream)
            return
        self._write(line)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._enabled and self.lines:
            elapsed = time.monotonic() - self._started
            self._write(f"{self.desc}: {self.done}/{self.total} {_plural(self.unit)} done in {_duration(elapsed)}")
        self._enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self.done / elapsed
        percent = 100.0 * self.done / self.total
        left = (
            f", about {_duration((self.total - self.done) / rate)} left" if rate > 0 and self.done < self.total else ""
        )
        units = _plural(self.unit)
        return f"{self.desc}: {self.done}/{self.total} {units} ({percent:.0f}%), {rate:.1f} {units}/s{left}"

    def _write(self, line: str) -> None:
        self.lines += 1
        print(line, file=self._stream, flush=True)


def open_progress(progress: bool | ProgressOptions | None, *, total: int, desc: str, unit: str) -> Progress:
    """A :class:`Progress` for a job: ``progress`` False or None shows nothing, True the defaults,
    a :class:`ProgressOptions` its choices."""
    if isinstance(progress, ProgressOptions):
        return Progress(total, desc, unit, progress)
    return Progress(total, desc, unit, enabled=bool(progress))


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _plural(unit: str) -> str:
    return unit[:-1] + "ies" if unit.endswith("y") and unit[-2:-1] not in "aeiou" else unit + "s"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def duration_text(seconds: float) -> str:
    """``seconds`` as people read a time left: ``45 s``, ``3 min 05 s``, ``2 h 10 min``."""
    return _duration(seconds)


__all__ = ["LOG_INTERVAL", "Progress", "ProgressOptions", "duration_text", "open_progress"]
