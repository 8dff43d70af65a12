"""Access tracking (``RAG_TRACK_ACCESS``): when each memory was last put into a context.

A memory's ``last_used`` (epoch seconds, a typed field of :class:`~brain.model.schemas.MemoryMetadata`)
lets ranking measure its age from its last use (``RAG_RECENCY_FROM=last_used``). :meth:`AccessTracker.note`
sets it in the store's in-process memory index at once, so the next ranking sees it, and buffers it;
the buffer is persisted about every second by the summary worker, and by :meth:`AccessTracker.flush`
(called by ``wait_for_summaries`` and ``close``).

**Where it is written: the index and Chroma, not the mirror, and not through the write path.**
Persisting goes through :func:`brain.store.retrieval.record_memory_use`, which checks the values are epoch seconds,
never moves a ``last_used`` back in time, skips memories deleted meanwhile, and merges the one key
into Chroma's stored metadata. It deliberately bypasses the full write path, because:

- a use is recorded on every retrieval; the write path would re-validate and rewrite each memory
  whole (text, vector, every key) in Chroma and the Engram mirror, doubling the cost of a chat
  request's writes for a ranking hint;
- a whole-metadata rewrite from this process's copy would overwrite what another process changed
  meanwhile (importance, tags); merging the single key cannot.

The mirror therefore never holds ``last_used`` from tracking: ``brain mirror verify`` and sync ignore
the key (:mod:`brain.features.mirror.sync`), and a store restored from the mirror gives memories the
``last_used`` of their last full write, so recency by last use falls back to that after a restore.
Nothing else is lost: ``last_used`` is not part of a memory's content. Uses noted but not yet
flushed when the process dies are lost the same way (at most about a second's worth).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from brain.model.errors import BrainError
from brain.store.indexes import memory_index
from brain.store.retrieval import record_memory_use

if TYPE_CHECKING:
    from brain.store import Store

log = logging.getLogger(__name__)

#: seconds between writes of recorded memory uses, and a buffer size that forces one
ACCESS_FLUSH_SECONDS = 1.0
ACCESS_FLUSH_SIZE = 512


class AccessTracker:
    """Buffers memory uses and persists them in batches (see the module docstring). Thread-safe.

    ``clock``: epoch seconds of a use (injectable, so tests and replays can set the time);
    ``on_due``: called when the buffer reached :data:`ACCESS_FLUSH_SIZE` (the chat layer wakes its
    worker to flush)."""

    def __init__(
        self, store: Store, *, clock: Callable[[], float] = time.time, on_due: Callable[[], object] | None = None
    ):
        self.store = store
        self.clock = clock
        self._on_due = on_due
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()

    def note(self, ids: Sequence[str]) -> None:
        """The memories ``ids`` were used now: ranking sees it at once; it is persisted at the next flush."""
        now = self.clock()
        memory_index(self.store).set_last_used({i: now for i in ids})
        with self._lock:
            for doc_id in ids:
                self._used[doc_id] = now
            due = len(self._used) >= ACCESS_FLUSH_SIZE
        if due and self._on_due is not None:
            self._on_due()

    def pending(self) -> int:
        """Memories whose use is noted but not yet persisted."""
        with self._lock:
            return len(self._used)

    def maybe_flush(self) -> int:
        """:meth:`flush` when a second has passed since the last one or the buffer is full, else 0."""
        with self._lock:
            due = bool(self._used) and (
                time.monotonic() - self._last_flush >= ACCESS_FLUSH_SECONDS or len(self._used) >= ACCESS_FLUSH_SIZE
            )
        return self.flush() if due else 0

    def flush(self) -> int:
        """Persist the uses noted since the last flush; returns how many memories were written. A store
        failure is logged and the uses stay buffered for the next flush."""
        with self._lock:
            pending, self._used = self._used, {}
            self._last_flush = time.monotonic()
        if not pending:
            return 0
        try:
            return record_memory_use(self.store, pending)
        except BrainError as exc:
            log.error("could not persist the last use of %d memories (will retry): %s", len(pending), exc)
            with self._lock:
                for doc_id, epoch in pending.items():
                    self._used[doc_id] = max(epoch, self._used.get(doc_id, epoch))
            return 0


__all__ = ["ACCESS_FLUSH_SECONDS", "ACCESS_FLUSH_SIZE", "AccessTracker"]
