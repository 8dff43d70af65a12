"""The mirror as a follower of the store's writes (:mod:`brain.store.events`).

Write-through and transactional: ``stage`` writes the event's rows in an open mirror transaction
before Chroma is called; ``commit`` commits it once Chroma took the write, ``abort`` rolls it back
when Chroma refused it, so a failed Chroma write leaves the mirror as it was.

A damaged mirror never fails a write: it is switched off (``health`` says why, and counts the
documents it missed from then on) and the store goes on with Chroma alone. Nor does a mirror that
cannot be written now (a read-only file, a full disk, another program holding its lock): the write
goes on in Chroma, the mirror is ``degraded`` and notes the ids it missed, and before each later
write (and on :meth:`MirrorSubscriber.catch_up`) it tries to write them again from what Chroma holds,
until it succeeds; a restart's catch-up (:func:`brain.features.mirror.sync.catch_up`) covers them too. Access times
(``metadata`` events that change only ``last_used``) are not mirrored: the mirror keeps content.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.features.mirror.guard import adopt_store
from brain.features.mirror.integrity import MirrorHealth
from brain.features.mirror.store import EngramMirror, unwritable
from brain.model.errors import EmbeddingModelMismatch, MirrorCorrupt, StoreUnavailable
from brain.model.schemas import from_chroma
from brain.store.chroma import ChromaAccess
from brain.store.events import WriteEvent, WriteSubscriber

if TYPE_CHECKING:
    from brain.store import Store


class _ChromaRefused(Exception):
    """Passed into an open mirror transaction to roll it back."""


class MirrorSubscriber(WriteSubscriber):
    """Keeps ``mirror`` in step with a store's writes of ``types``. ``owns``: close the mirror with the store."""

    def __init__(self, mirror: EngramMirror | None, health: MirrorHealth, types: Iterable[str], *, owns: bool = True):
        self.mirror = mirror
        self.health = health
        self.types = frozenset(types)
        self.owns = owns
        self._open: dict[int, ExitStack] = {}  # sequence -> the open transaction of a staged event
        self._behind: set[str] = set()  # ids whose writes the mirror missed while it could not be written
        # the store's Chroma access, where missed documents are read back from (set by the opener)
        self.source: Callable[[], ChromaAccess] | None = None

    def stage(self, event: WriteEvent) -> None:
        count = self._count(event)
        if count is None:
            return
        if self.mirror is None:
            if self.health.status == "degraded":  # it could not be written when the store opened
                self._fall_behind(event, self.health.unwritable or "")
            else:
                self.health.missed(count, _ACTION[event.op])
            return
        reason = self.mirror.unwritable()  # before the file is touched (see EngramMirror.unwritable)
        if reason is None and self._behind:
            _, reason = self._try_catch_up()
        if reason is not None:
            self._fall_behind(event, reason)
            return
        if self.mirror is None:  # it broke while catching up
            self.health.missed(count, _ACTION[event.op])
            return
        try:
            with ExitStack() as stack:
                mirror = stack.enter_context(self.mirror.transaction())
                self._write(mirror, event)
                self._open[event.sequence] = stack.pop_all()
        except MirrorCorrupt as exc:
            self._broke(exc)
            self.health.missed(count, _ACTION[event.op])
        except (StoreUnavailable, sqlite3.OperationalError) as exc:  # the file is fine but cannot be written now
            self._fall_behind(event, str(exc))

    def commit(self, event: WriteEvent) -> None:
        stack = self._open.pop(event.sequence, None)
        if stack is None:
            return
        try:
            stack.close()
        except MirrorCorrupt as exc:  # the mirror rolled the rows back and is now off
            self._broke(exc)
            self.health.missed(self._count(event) or 0, _ACTION[event.op])
        except (StoreUnavailable, sqlite3.OperationalError) as exc:  # rolled back; Chroma holds the write
            self._fall_behind(event, str(exc))

    def follow(self, store: Store) -> None:
        """Read the documents the mirror missed back from ``store`` (held weakly: the store owns this)."""
        ref = weakref.ref(store)

        def source() -> ChromaAccess:
            followed = ref()
            if followed is None:
                raise StoreUnavailable("the store the mirror follows is closed")
            return followed.chroma

        self.source = source

    @property
    def behind(self) -> int:
        """How many documents wait to be mirrored (their writes went to Chroma alone)."""
        return len(self._behind)

    def catch_up(self) -> int:
        """Mirror the documents whose writes the mirror missed, as Chroma holds them now; returns how
        many were caught up. The caller holds the store's write lock. Raises :class:`StoreUnavailable`
        while the file still cannot be written (they stay behind)."""
        if not self._behind or self.mirror is None:
            return 0
        path, done = self.mirror.path, 0
        reason = self.mirror.unwritable()
        if reason is None:
            done, reason = self._try_catch_up()
        if reason is not None:
            self.health.fell_behind(reason, len(self._behind))
            raise StoreUnavailable(
                f"the mirror {path} still cannot be written ({reason}); "
                f"{len(self._behind)} documents wait to be mirrored"
            )
        return done

    def abort(self, event: WriteEvent) -> None:
        stack = self._open.pop(event.sequence, None)
        if stack is None:
            return
        refused = _ChromaRefused("Chroma refused the write")
        try:
            stack.__exit__(_ChromaRefused, refused, None)
        except _ChromaRefused:
            pass
        except MirrorCorrupt as exc:
            self._broke(exc)

    def close(self) -> None:
        mirror, self.mirror = self.mirror, None
        if mirror is not None and self.owns:
            mirror.close()

    def _count(self, event: WriteEvent) -> int | None:
        """How many mirror rows ``event`` touches; None when the mirror skips it."""
        if event.op == "metadata":
            return None  # access times only (see the module docstring)
        if event.op == "delete":
            return len(event.ids)
        return sum(1 for m in event.metadatas or () if m.get("type") in self.types)

    def _write(self, mirror: EngramMirror, event: WriteEvent) -> None:
        if event.op == "delete":
            mirror.delete(list(event.ids))
            return
        metas = event.metadatas or ()
        rows = [j for j, m in enumerate(metas) if m.get("type") in self.types]
        others = [event.ids[j] for j, m in enumerate(metas) if m.get("type") not in self.types]
        if others:
            mirror.delete(others)  # an id may have changed to a type that is not mirrored
        if rows:
            texts, vectors = event.texts or (), event.vectors
            mirror.upsert(
                {
                    "id": event.ids[j],
                    "text": texts[j],
                    "metadata": from_chroma(metas[j]),
                    "embedding": None if vectors is None else vectors[j],
                }
                for j in rows
            )

    def _fall_behind(self, event: WriteEvent, reason: str) -> None:
        self._behind.update(event.ids)
        self.health.fell_behind(reason, len(self._behind))

    def _try_catch_up(self) -> tuple[int, str | None]:
        """Write the missed documents from Chroma, a batch per transaction: how many were written, and
        None when all are mirrored, else why the mirror still cannot take them."""
        if self.source is None:  # nothing to read them from: a restart's catch-up repairs them
            return 0, "the documents it missed are caught up at the next start"
        if self.mirror is None:
            return 0, None  # switched off (broken): nothing to catch up
        target = self.mirror
        done = 0
        try:
            while self._behind:
                ids = sorted(self._behind)[:_CATCH_UP_BATCH]
                found = {}
                for page in self.source().get_ids(ids, ["documents", "metadatas", "embeddings"]):
                    for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"]):
                        found[i] = (d or "", from_chroma(m or {}), e)
                kept = [i for i in ids if i in found and found[i][1].get("type") in self.types]
                with target.transaction() as mirror:
                    gone = [i for i in ids if i not in kept]
                    if gone:
                        mirror.delete(gone)
                    mirror.upsert(
                        {"id": i, "text": found[i][0], "metadata": found[i][1], "embedding": found[i][2]} for i in kept
                    )
                self._behind.difference_update(ids)
                done += len(ids)
        except MirrorCorrupt as exc:
            self._broke(exc)
            return done, None  # broken now: health says so, and a rebuild covers the documents
        except (StoreUnavailable, sqlite3.OperationalError) as exc:
            return done, str(exc)
        self.health.caught_up(done)
        return done, None

    def _broke(self, error: MirrorCorrupt) -> None:
        """Switch a damaged mirror off (see :mod:`brain.features.mirror.integrity`)."""
        self.health.broke(error)
        self.close()


_ACTION = {"upsert": "written", "delete": "deleted", "metadata": "updated"}
#: missed documents mirrored again per transaction
_CATCH_UP_BATCH = 1000


def open_mirror_subscriber(
    settings: Any, embedder_name: str, mirror: EngramMirror | bool | None = None, *, store: Any = None
) -> MirrorSubscriber:
    """The subscriber for a store's mirror: ``mirror`` itself (an open mirror; the caller closes it),
    none (``False``, or ``None`` with ``BRAIN_MIRROR_ENABLED`` off), or the mirror file of the settings,
    opened here. A damaged file is recorded in ``health`` (and logged with its fix) rather than
    refusing to open: Chroma is the store.

    ``store``: the :class:`~brain.store.RagStore` being opened; a mirror without rows starts following
    its collection (:func:`brain.features.mirror.guard.adopt_store`), so that a store lost or created again
    later is told from it. Nothing of the mirror is deleted here."""
    types = settings.mirrored_types
    if isinstance(mirror, EngramMirror):
        if mirror.model != embedder_name:
            raise EmbeddingModelMismatch(
                f"the mirror keeps {mirror.model} vectors but the store embeds with {embedder_name}"
            )
        opened, health, owns = mirror, MirrorHealth(mirror.path), False
    elif mirror is False or (mirror is None and not settings.mirror_enabled):
        return MirrorSubscriber(None, MirrorHealth(None, enabled=False), types)
    else:
        path: Path = settings.mirror_file
        health, owns = MirrorHealth(path), True
        reason = unwritable(path)
        if reason is not None:  # opening writes it: the store goes on without it, and the next start catches up
            health.fell_behind(f"{reason} (since the store opened; restart once it is writable)", 0)
            return MirrorSubscriber(None, health, types)
        try:
            opened = EngramMirror(path, embedder_name, batch_size=settings.mirror_batch_size)
        except MirrorCorrupt as exc:
            health.broke(exc)
            opened = None
    if opened is not None and store is not None:
        try:
            adopt_store(opened, store)
        except MirrorCorrupt as exc:  # damaged beyond the open's quick check: off, as for any write
            health.broke(exc)
            if owns:
                opened.close()
            opened = None
    return MirrorSubscriber(opened, health, types, owns=owns)


__all__ = ["MirrorSubscriber", "open_mirror_subscriber"]
