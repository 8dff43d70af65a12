"""Named errors. Every failure brain reports is one of these, and its message says what to do.

The hierarchy, by what a caller does about it::

    BrainError
    ├── ConfigError                   fix a setting
    ├── ValidationError (ValueError)  fix the input; .problems lists each Problem, nothing was written
    │   ├── FilterError               a ``where`` filter the store cannot express
    │   ├── FormationAnswerError      a model's memory-formation answer, refused whole: .problems says why
    │   └── Conflict                  ... or one the document's current state refuses: read it again
    ├── EmbeddingProtocolError (ValueError)   a vector or model name breaking the Engram protocol
    ├── EmbedderError                 the embedder failed
    │   ├── EmbedderUnavailable       ... or cannot be reached: start it, pull the model
    │   └── UnsupportedModality       ... or cannot embed this kind of input (images, audio)
    ├── EmbeddingModelMismatch        the collection was built with another embedder
    ├── SummarizerError               the summariser answered with something unusable
    │   └── SummarizerUnavailable     ... or cannot be reached
    ├── ExtractorError                the memory-formation model answered with something unusable
    │   └── ExtractorUnavailable      ... or cannot be reached
    ├── StoreUnavailable              the store cannot serve now: retry, or fix what the message names
    │   ├── StoreNotFound, StoreLocked, StoreError
    │   ├── DiskSpaceLow              too little free disk: a write was refused before anything was written
    │   └── MirrorCorrupt             the mirror file is damaged: ``brain mirror rebuild``
    ├── Forbidden                     the caller may not do this
    └── NotFound (KeyError)           no document with that id

They travel by one table: each class to its HTTP status and kind and back (``brain.ops.error_table``, read
by the API's handlers and the served client alike); the CLI prints one ``error: ...`` line and exits with
code 1 (``brain.shells.cli``).

A failure worth trying again is tried again by :func:`retry` on a :class:`Backoff` schedule, the one
way brain waits between attempts (each caller names its schedule).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: the command that repairs a damaged mirror, named in every message about one
REBUILD_COMMAND = "brain mirror rebuild"


@dataclass(frozen=True, eq=False)
class Problem(Mapping[str, Any]):
    """One thing wrong with an input: ``item``, its index in a batch (null when the problem is not about
    one item); ``field``, the field's path (``metadata.tags``); ``message``, what is wrong and how to
    fix it; ``file``, for input read from files (a PAM export, a specialists file), which file."""

    # A Problem reads as, and equals, the dict it is serialised as (p["field"], p.get("item"), {**p}),
    # so code that handles problems as mappings keeps working; to_dict() is that dict, the API's shape.

    field: str
    message: str
    item: int | None = None
    file: str | None = None

    @classmethod
    def of(cls, problem: Problem | Mapping[str, Any]) -> Problem:
        """``problem`` as a Problem (a mapping with ``field`` and ``message``; ``item`` and ``file`` optional)."""
        if isinstance(problem, Problem):
            return problem
        return cls(
            field=str(problem.get("field") or ""),
            message=str(problem.get("message") or ""),
            item=problem.get("item"),
            file=problem.get("file"),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, object] = {"item": self.item, "field": self.field, "message": self.message}
        if self.file is not None:
            out["file"] = self.file
        return out

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __hash__(self) -> int:  # Mapping's __eq__ compares items; equal problems hash alike
        return hash(tuple(self.to_dict().items()))


def joined(problems: Iterable[Problem | Mapping[str, object]]) -> str:
    """The problems' messages in one sentence, the usual message of a ValidationError."""
    return "; ".join(Problem.of(p).message for p in problems)


class BrainError(Exception):
    """Base class of every error raised by brain."""


class ConfigError(BrainError):
    """A setting is missing, malformed or out of range."""


class ValidationError(BrainError, ValueError):
    """Input failed validation; nothing was written.

    ``problems`` lists each :class:`Problem`; mappings passed in are read as Problems.
    """

    def __init__(self, message: str, problems: Iterable[Problem | Mapping[str, object]] | None = None):
        super().__init__(message)
        self.problems: list[Problem] = [Problem.of(p) for p in problems or ()]

    @classmethod
    def of(cls, field: str, message: str, *, item: int | None = None) -> ValidationError:
        """The error for one problem, its message the problem's."""
        return cls(message, [Problem(field, message, item)])


class FilterError(ValidationError):
    """A ``where`` filter that the store cannot express."""


class FormationAnswerError(ValidationError):
    """A model's answer to a memory-formation request that is refused whole: not JSON, the wrong shape, or
    facts that break a rule (an importance out of range, an unknown turn or memory key, another entity).
    ``problems`` names every problem (the field's path in the answer and what is wrong), so one repair
    request can ask for all of it; ``content`` is the answer as the model gave it. Nothing was written."""

    content: str = ""

    def __init__(
        self, message: str, problems: Iterable[Problem | Mapping[str, object]] | None = None, *, content: str = ""
    ):
        super().__init__(message, problems)
        self.content = content


class Conflict(ValidationError):
    """Valid input that the document's current state refuses (a memory superseded already: its successor is
    the one to supersede); nothing was written. Read the document again and act on what it is now."""


class EmbeddingProtocolError(BrainError, ValueError):
    """A vector or model name that breaks the Engram Embedding Protocol v2 (:mod:`brain.features.mirror.protocol`).

    ``code`` is one of that module's ``ERROR_CODES``; ``memory_id`` and ``model`` say which row, when known.
    """

    # an error received from a server carries its message only (brain.ops.error_table)
    code: str = ""
    detail: str = ""
    memory_id: str | None = None
    model: str | None = None

    def __init__(self, code: str, message: str, *, memory_id: str | None = None, model: str | None = None):
        where = ", ".join(f"{k} {v!r}" for k, v in (("memory", memory_id), ("model", model)) if v is not None)
        super().__init__(f"{code}: {message}" + (f" ({where})" if where else ""))
        self.code = code
        self.detail = message
        self.memory_id = memory_id
        self.model = model


class EmbedderError(BrainError):
    """The embedder failed (bad model files, bad output)."""


class EmbedderUnavailable(EmbedderError):
    """The embedder cannot be reached (e.g. Ollama is not running or the model is not pulled)."""


class UnsupportedModality(EmbedderError):
    """The embedder cannot embed this kind of input (brain's embedders embed text only)."""


class EmbeddingModelMismatch(BrainError):
    """The collection was built with another embedder; vectors from different spaces never mix."""


class CalibrationError(BrainError):
    """The relevance calibration data cannot be read (a damaged installation)."""


class ReindexError(BrainError):
    """A re-index that cannot start or go on (nothing to do, nothing to roll back to); the live
    collection is untouched."""


class SummarizerError(BrainError):
    """The summariser answered, but with something unusable (not JSON, no text, an error status)."""


class SummarizerUnavailable(SummarizerError):
    """The summariser cannot be reached or did not answer in time (e.g. Ollama is not running)."""


class ExtractorError(BrainError):
    """The memory-formation model answered at the transport level with something unusable (not an Ollama
    chat response, no message text, a refused request)."""


class ExtractorUnavailable(ExtractorError):
    """The memory-formation model cannot be reached, did not answer in time, or is not pulled."""


class UpstreamError(BrainError):
    """The chat model the proxy stands in front of could not be asked. The message is a client's to see: it names
    the setting, never the model's address (the server's log does) nor its key."""


class UpstreamUnreachable(UpstreamError):
    """Nothing answered at the chat model's address, or it broke off its answer (502)."""


class UpstreamTimeout(UpstreamError):
    """The chat model accepted the request and then did not answer in time (504)."""


class UpstreamRefused(UpstreamUnreachable):
    """The chat model refused the proxy's own credentials (its 401 or 403, as brain's 502)."""


class UpstreamTooLarge(UpstreamError):
    """The chat model's answer is longer than the proxy reads (BRAIN_CHAT_UPSTREAM_MAX_BYTES; 502)."""


class StoreUnavailable(BrainError):
    """The Chroma store cannot be opened or reached."""


class StoreNotFound(StoreUnavailable):
    """There is no store where the settings point, and the caller asked not to create one."""


class StoreLocked(StoreUnavailable):
    """Another process has the embedded data directory open (embedded Chroma is single-process).
    ``holder``: that process's id, when known; ``server_url``: where it serves the HTTP API, when it is
    ``brain serve`` (the CLI then reaches the store through it)."""

    holder: int | None = None
    server_url: str | None = None

    def __init__(self, message: str, *, holder: int | None = None, server_url: str | None = None):
        super().__init__(message)
        self.holder = holder
        self.server_url = server_url


class StoreError(StoreUnavailable):
    """Chroma failed or refused an operation on the collection (an internal error, a request it
    cannot serve). The message names the operation and what to check; nothing of a failed write is
    kept by brain's own state."""


class DiskSpaceLow(StoreUnavailable):
    """A write was refused, before anything was written, because the disk holding the data has less free
    space than ``BRAIN_MIN_FREE_DISK_MB``. ``path`` is the directory checked; ``free`` and ``margin`` in bytes
    (None in an error received from a server, which sends the message only)."""

    path: Path | None = None
    free: int | None = None
    margin: int | None = None

    def __init__(self, path: str | Path, free: int, margin: int):
        self.path = Path(path)
        self.free = free
        self.margin = margin
        super().__init__(
            f"the disk of {self.path} has {free / 2**20:.0f} MB free, less than BRAIN_MIN_FREE_DISK_MB "
            f"({margin / 2**20:.0f} MB): the write was refused and nothing was written. Free some space, or "
            f"lower BRAIN_MIN_FREE_DISK_MB; reads go on meanwhile"
        )


class MirrorCorrupt(StoreUnavailable):
    """The mirror file is damaged. brain keeps working from Chroma without it; ``brain mirror rebuild``
    moves it aside and rebuilds it from the store. ``path`` is the file, ``detail`` SQLite's finding."""

    path: Path | None = None
    detail: str = ""

    def __init__(self, path: str | Path, detail: str):
        self.path = Path(path)
        self.detail = detail
        super().__init__(
            f"the mirror {self.path} is damaged ({detail}); brain keeps working from Chroma without it. "
            f"Run `{REBUILD_COMMAND}` to move the file aside and rebuild the mirror from the store"
        )


class StoreLooksLost(BrainError):
    """The store does not look like the one the mirror follows (empty, much smaller, re-created, or
    half restored), so it is not the truth the mirror is emptied to match: nothing was deleted. The
    message says how to restore the store from the mirror, or how to confirm that the store is right.
    ``mirror_rows``: brain's rows in the mirror; ``would_delete``: how many a catch-up would delete."""

    mirror_rows: int = 0
    would_delete: int = 0

    def __init__(self, message: str, *, mirror_rows: int = 0, would_delete: int = 0):
        super().__init__(message)
        self.mirror_rows = mirror_rows
        self.would_delete = would_delete


class RestoreUnfinished(StoreLooksLost):
    """A restore from the mirror into the store began and did not finish (a kill, a crash): the store
    holds part of the mirror. Running ``brain restore --from-mirror`` again completes it."""


class Forbidden(BrainError):
    """The caller may not do this: e.g. a token bound to one entity asked for another's data."""


class ConversationOwned(Forbidden):
    """Turns in one scope appended to a conversation another scope owns (a conversation belongs to the
    scope of its first turns, claimed once, across processes too)."""


class NotFound(BrainError, KeyError):
    """No document with that id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"


# ---- trying again ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """A retry schedule: wait ``first`` seconds after the first failure and ``factor`` times the last
    wait after each next one, never more than ``cap``; ``retries`` waits in all (None: no end, for a
    caller that polls until a deadline of its own)."""

    first: float
    retries: int | None
    factor: float = 2.0
    cap: float = math.inf

    def wait(self, n: int) -> float:
        """The wait before retry ``n`` (0 for the first)."""
        return min(self.first * self.factor**n, self.cap)

    def waits(self) -> Iterator[float]:
        n = 0
        while self.retries is None or n < self.retries:
            yield self.wait(n)
            n += 1


def retry(
    call: Callable[[], T],
    schedule: Backoff,
    *,
    on: type[BaseException] | tuple[type[BaseException], ...],
    when: Callable[[BaseException], bool] | None = None,
    before_wait: Callable[[BaseException, int, float], None] | None = None,
    sleep: Callable[[float], Any] = time.sleep,
) -> T:
    """``call()``, called again after each failure of type ``on`` (that ``when``, if given, accepts)
    once the schedule's next wait has passed; the failure is raised when the schedule is spent.
    ``before_wait(failure, retry number, wait)`` runs before each wait and may raise to give up early
    (a deadline); ``sleep`` returning True (a stop event's ``wait``) gives up too, raising the failure."""
    waits = schedule.waits()
    n = 0
    while True:
        try:
            return call()
        except on as exc:
            wait = next(waits, None) if when is None or when(exc) else None
            if wait is None:
                raise
            if before_wait is not None:
                before_wait(exc, n, wait)
            if sleep(wait) is True:
                raise
            n += 1
