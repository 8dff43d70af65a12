"""What the store knows of the mirror that follows its writes: the shapes it relies on, and the two
operations that need the store's lock.

The mirror itself (:mod:`brain.features.mirror`) sits above the store, which may not import it; the
opener (:class:`brain.app.rag_store.RagStore`) subscribes the mirror's subscriber and sets it as
``store.mirror_link``. These protocols name what the store reads of them, so the store is typed
without knowing the concrete classes.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from typing_extensions import TypeVar

from brain.model.errors import StoreUnavailable

if TYPE_CHECKING:
    from brain.store.events import WriteEvents


class Mirror(Protocol):
    """A mirror file as the store drives it: it keeps the vectors of one embedding model."""

    @property
    def model(self) -> str: ...

    def use_model(self, model: str) -> None: ...


# a plain ``Store`` is a store with any mirror: what never reads the mirror need not name its type
M = TypeVar("M", bound=Mirror, default=Any)
H = TypeVar("H", default=Any)


class MirrorLink(Protocol[M, H]):
    """The write subscriber that copies a store's writes into its mirror (``M``), with its health (``H``)."""

    mirror: M | None
    health: H

    @property
    def types(self) -> Collection[str]:
        """The document types mirrored."""
        ...

    @property
    def behind(self) -> int:
        """How many documents' writes the mirror missed while it could not be written."""
        ...

    def catch_up(self) -> int:
        """Mirror the documents it missed; returns how many."""
        ...


class Linked(Protocol):
    """A store, as far as its mirror link goes (:class:`brain.store.Store`)."""

    lock: threading.RLock
    events: WriteEvents
    mirror_link: MirrorLink | None


@contextmanager
def mirror_paused(store: Linked) -> Iterator[None]:
    """Writes to ``store`` inside the block skip the mirror (e.g. while restoring the store from it)."""
    with store.lock:
        link = store.mirror_link
        if link is None:
            yield
            return
        with store.events.muted(link):
            yield


def catch_up_mirror(store: Linked, *, wait: bool = True) -> int:
    """Mirror the documents of ``store`` whose writes the mirror missed while it could not be written
    (see :mod:`brain.features.mirror.subscriber`); returns how many, 0 when none wait or (``wait=False``)
    a write is in progress. While it still cannot be written they stay behind, and health says so."""
    link = store.mirror_link
    if link is None or not link.behind or not store.lock.acquire(blocking=wait):
        return 0
    try:
        return link.catch_up()
    except StoreUnavailable:
        return 0
    finally:
        store.lock.release()


__all__ = ["Linked", "Mirror", "MirrorLink", "catch_up_mirror", "mirror_paused"]
