"""The mirror as a follower of the store's writes (:mod:`brain.store.events`).

Write-through and transactional: ``stage`` writes the event's rows in an open mirror transaction
before Chroma is called; ``commit`` commits it once Chroma took the write, ``abort`` rolls it back
when Chroma refused it, so a failed Chroma write leaves the mirror as it was.

A damaged mirror never fails a write: it is switched off (``health`` says why, and counts the
documents it missed from then on) and the store goes on with Chroma alone. Access times
(``metadata`` events that change only ``last_used``) are not mirrored: the mirror keeps content.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from brain.errors import EmbeddingModelMismatch, StoreUnavailable
from brain.mirror.guard import adopt_store
from brain.mirror.integrity import MirrorCorrupt, MirrorHealth
from brain.mirror.store import EngramMirror
from brain.schemas import from_chroma
from brain.store.events import WriteEvent, WriteSubscriber


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

    def stage(self, event: WriteEvent) -> None:
        count = self._count(event)
        if count is None:
            return
        if self.mirror is None:
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

    def commit(self, event: WriteEvent) -> None:
        stack = self._open.pop(event.sequence, None)
        if stack is None:
            return
        try:
            stack.close()
        except MirrorCorrupt as exc:  # the mirror rolled the rows back and is now off
            self._broke(exc)
            self.health.missed(self._count(event) or 0, _ACTION[event.op])
        except Exception as exc:
            raise StoreUnavailable(f"the mirror could not be updated ({exc}); run `brain mirror sync` once the "
                                   f"mirror file is writable again") from exc

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
            mirror.upsert({"id": event.ids[j], "text": texts[j], "metadata": from_chroma(metas[j]),
                           "embedding": vectors[j]} for j in rows)

    def _broke(self, error: MirrorCorrupt) -> None:
        """Switch a damaged mirror off (see :mod:`brain.mirror.integrity`)."""
        self.health.broke(error)
        self.close()


_ACTION = {"upsert": "written", "delete": "deleted", "metadata": "updated"}


def open_mirror_subscriber(settings: Any, embedder_name: str, mirror: EngramMirror | bool | None = None, *,
                           store: Any = None) -> MirrorSubscriber:
    """The subscriber for a store's mirror: ``mirror`` itself (an open mirror; the caller closes it),
    none (``False``, or ``None`` with ``BRAIN_MIRROR_ENABLED`` off), or the mirror file of the settings,
    opened here. A damaged file is recorded in ``health`` (and logged with its fix) rather than
    refusing to open: Chroma is the store.

    ``store``: the :class:`~brain.store.RagStore` being opened; a mirror without rows starts following
    its collection (:func:`brain.mirror.guard.adopt_store`), so that a store lost or created again
    later is told from it. Nothing of the mirror is deleted here."""
    types = settings.mirrored_types
    if isinstance(mirror, EngramMirror):
        if mirror.model != embedder_name:
            raise EmbeddingModelMismatch(f"the mirror keeps {mirror.model} vectors but the store embeds with {embedder_name}")
        opened, health, owns = mirror, MirrorHealth(mirror.path), False
    elif mirror is False or (mirror is None and not settings.mirror_enabled):
        return MirrorSubscriber(None, MirrorHealth(None, enabled=False), types)
    else:
        path: Path = settings.mirror_file
        health, owns = MirrorHealth(path), True
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
