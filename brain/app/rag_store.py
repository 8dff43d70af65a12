"""``from brain.app.rag_store import RagStore``: the store, opened the one way every entry point uses.

``RagStore()``, ``RagStore(settings)``, :func:`brain.open_store` and ``brain.open().store`` are the same
object wired the same: the embedder the settings name (and, when a re-index swaps the live collection to
another model, that model's, built with the same settings), the change feed on a Chroma server (every write
numbered across processes, other processes' writes followed; :mod:`brain.store.feed`), the Engram mirror per
``BRAIN_MIRROR_ENABLED`` (subscribed before the unfinished writes of a dead process are rolled back, so the
mirror follows that roll-back too) and the persona rule that reads the current version. The machinery is
:class:`brain.store.Store`; this layer adds the parts the store does not import.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from chromadb.api import ClientAPI

from brain.config import Settings
from brain.store import Store
from brain.wiring import get_embedder, get_embedder_named

if TYPE_CHECKING:
    from brain.features.mirror import EngramMirror, MirrorHealth
    from brain.providers.embeddings.base import Embedder


class RagStore(Store["EngramMirror", "MirrorHealth"]):
    """Typed documents in one Chroma collection, with exact memory ranking, wired as the module says.

    ``settings`` default to ``Settings()`` (the environment and the project's env files). ``mirror``: an
    open :class:`~brain.features.mirror.EngramMirror` (the caller closes it), ``False`` for none, or ``None`` for
    the mirror file of the settings when ``BRAIN_MIRROR_ENABLED``. ``create=False`` raises
    :class:`~brain.model.errors.StoreNotFound` rather than create a store that does not exist.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        client: ClientAPI | None = None,
        create: bool = True,
        mirror: EngramMirror | bool | None = None,
    ):
        from brain.features.persona import current_version

        settings = settings or Settings()
        super().__init__(
            settings,
            embedder=embedder or get_embedder(settings),
            embedder_for=functools.partial(get_embedder_named, settings),
            client=client,
            create=create,
            attach=lambda store: _wire(store, settings, mirror),
            persona_version=current_version,
        )


def _wire(store: Store[EngramMirror, MirrorHealth], settings: Settings, mirror: EngramMirror | bool | None) -> None:
    from brain.features.mirror.subscriber import open_mirror_subscriber

    # several processes share a Chroma server, never an embedded store (its directory is locked):
    # only there do writes go through the change feed
    if settings.chroma_url:
        from brain.store.feed import ChangeFeed
        from brain.store.follower import attach_feed
        from brain.store.positions import PositionClaims

        attach_feed(
            store,
            ChangeFeed(store.client, settings.collection, settings.chroma_url, keep=settings.feed_keep),
            PositionClaims(store.client, settings.collection, settings.chroma_url),
        )
    link = open_mirror_subscriber(settings, store.embedder.name, mirror, store=store)
    link.follow(store)  # what the mirror misses while it cannot be written is read back from the store
    store.subscribe(link, close=link.close)
    store.mirror_link = link


__all__ = ["RagStore"]
