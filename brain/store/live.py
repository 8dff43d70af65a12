"""The live-collection pointer: which physical Chroma collection a logical collection name serves.

``BRAIN_COLLECTION`` (``conversations``) is a *logical* name. The documents live in one *physical*
collection: at first the logical name itself, and after a re-index (:mod:`brain.app.reindex`) a
collection of the new model built beside it, ``<name>__g<generation>``. One small collection,
``<name>__live``, holds one record (id ``live``) that names the physical collection serving now,
every collection still kept (for a roll-back) and the build under way, if any. Flipping it is one
Chroma upsert of that record, so a reader sees the old collection or the new one, never a mix; the
same holds for the embedded client and for ``chroma run``. A store without the pointer collection
(every store created before re-indexing existed) serves the logical name itself.

The change feed and the position claims (``<name>__feed``, ``<name>__positions``) stay per logical
name: the sequence of writes spans a swap, and a follower learns of a swap from the feed (a
``swap`` record) on its next check.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from brain.model.errors import StoreUnavailable
from brain.providers.embeddings import Embedder
from brain.store.chroma import ChromaAccess, open_cosine_collection

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from brain.config.fields import StorageFields
    from brain.store.feed import FeedWriter
    from brain.store.pipeline import WritePipeline

LIVE_SUFFIX = "__live"
#: the id of the one record of the pointer collection
RECORD_ID = "live"
_VECTOR = [1.0]  # Chroma needs a vector per record; the pointer is never searched


@dataclass(frozen=True, slots=True)
class Generation:
    """One physical collection of a logical name: its model and when it started serving (0: never yet)."""

    collection: str
    embedder: str
    dimension: int
    since: float = 0.0
    #: documents per second the build of this collection measured (0: unknown), for estimates
    rate: float = 0.0


@dataclass(frozen=True, slots=True)
class Build:
    """A re-index under way: the collection being filled, for which model, and the change-feed
    sequence when it began (None without a feed: the embedded store, written by one process)."""

    collection: str
    embedder: str
    dimension: int
    start_sequence: int | None = None
    started: float = 0.0


@dataclass(frozen=True, slots=True)
class PointerState:
    """What the pointer record holds. ``kept`` are the physical collections still on disk, newest
    last; the live one is among them."""

    live: str
    kept: tuple[Generation, ...] = ()
    building: Build | None = None
    generation: int = 1
    swapped_at: float = 0.0
    #: the collection served before the last swap, for ``--rollback``
    previous: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def kept_named(self, name: str) -> Generation | None:
        return next((g for g in self.kept if g.collection == name), None)

    def next_name(self, logical: str) -> str:
        """The physical name of the next collection built for ``logical``."""
        return f"{logical}__g{self.generation + 1}"

    def to_json(self) -> str:
        return json.dumps(
            {
                "live": self.live,
                "kept": [asdict(g) for g in self.kept],
                "building": asdict(self.building) if self.building else None,
                "generation": self.generation,
                "swapped_at": self.swapped_at,
                "previous": self.previous,
                "extra": self.extra,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> PointerState:
        raw = json.loads(text)
        return cls(
            live=raw["live"],
            kept=tuple(Generation(**g) for g in raw.get("kept", [])),
            building=Build(**raw["building"]) if raw.get("building") else None,
            generation=int(raw.get("generation", 1)),
            swapped_at=float(raw.get("swapped_at", 0.0)),
            previous=raw.get("previous"),
            extra=dict(raw.get("extra") or {}),
        )


def pointer_name(logical: str) -> str:
    return logical + LIVE_SUFFIX


def _translate(exc: Exception, what: str) -> StoreUnavailable:
    return StoreUnavailable(f"cannot {what} the live-collection pointer: {exc}")


def read_pointer(client: Any, logical: str) -> PointerState | None:
    """The pointer of ``logical``, or None when it has none (the logical name is the collection)."""
    from chromadb.errors import NotFoundError

    try:
        col = client.get_collection(pointer_name(logical), embedding_function=None)
    except NotFoundError:
        return None
    except ValueError as exc:  # older chromadb raise ValueError for a missing collection
        if "does not exist" in str(exc):
            return None
        raise _translate(exc, "read") from exc
    except Exception as exc:  # connection or server errors from chromadb
        raise _translate(exc, "read") from exc
    try:
        got = col.get(ids=[RECORD_ID], include=["documents"])
    except Exception as exc:  # connection or server errors from chromadb
        raise _translate(exc, "read") from exc
    if not got["ids"]:
        return None
    return PointerState.from_json(got["documents"][0])


def live_collection(client: Any, logical: str) -> str:
    """The physical collection that serves ``logical`` now."""
    state = read_pointer(client, logical)
    return logical if state is None else state.live


def write_pointer(client: Any, logical: str, state: PointerState) -> PointerState:
    """Replace the pointer record with ``state`` (one upsert: readers see the old record or this one)."""
    try:
        col = client.get_or_create_collection(
            pointer_name(logical), embedding_function=None, metadata={"brain": "live collection pointer", "of": logical}
        )
        col.upsert(
            ids=[RECORD_ID],
            documents=[state.to_json()],
            embeddings=[_VECTOR],
            metadatas=[{"live": state.live, "generation": state.generation, "at": time.time()}],
        )
    except Exception as exc:  # connection or server errors from chromadb
        raise _translate(exc, "write") from exc
    return state


def initial_state(logical: str, live: str, embedder: str, dimension: int) -> PointerState:
    """The pointer of a store that never had one: ``live`` serves (the logical name itself)."""
    return PointerState(live=live, kept=(Generation(live, embedder, dimension),), generation=1)


def swapped(state: PointerState, to: str, *, rate: float = 0.0) -> PointerState:
    """``state`` after ``to`` (a kept collection, or the build) became live."""
    build = state.building
    kept = list(state.kept)
    if build is not None and build.collection == to:
        kept = [g for g in kept if g.collection != to] + [
            Generation(to, build.embedder, build.dimension, time.time(), rate)
        ]
    else:
        held = state.kept_named(to)
        assert held is not None  # callers swap to the build or to a kept collection
        kept = [g for g in kept if g.collection != to] + [replace(held, since=time.time())]
    return replace(state, live=to, kept=tuple(kept), building=None, swapped_at=time.time(), previous=state.live)


class LiveBound(Protocol):
    """A store, as far as moving it to another physical collection goes (:class:`brain.store.Store`)."""

    collection_name: str
    lock: threading.RLock
    client: ClientAPI
    embedder: Embedder
    embedder_for: Callable[[str], Embedder] | None
    chroma: ChromaAccess
    writes: WritePipeline
    feed_writer: FeedWriter | None

    @property
    def settings(self) -> StorageFields: ...

    def bind(self, collection: Collection, embedder: Embedder) -> None: ...


def follow_live(store: LiveBound, *, embedder: Embedder | None = None, since: int | None = None) -> bool:
    """Serve from ``store`` the collection the live pointer names now, if it is another one (a re-index
    swapped it, in this process or another): with ``embedder``, or one built for the model that
    collection records. Returns whether the store moved. Under the store's lock, so no write or
    applied feed record straddles the move.

    ``since``: the change-feed sequence of the swap. The store's writes numbered after it went to the
    old collection (it had not seen the swap yet); they are copied into the new one, embedded with its
    model, and announced again, so no write is lost to the swap."""
    with store.lock:
        live = live_collection(store.client, store.settings.collection)
        if live == store.collection_name and embedder is None:
            return False
        recorded = store.client.get_collection(live, embedding_function=None).metadata or {}
        if embedder is None:
            embedder = _embedder_of(store, live, recorded.get("embedder"))
        old = store.chroma
        store.collection_name = live
        store.bind(
            open_cosine_collection(
                store.client,
                live,
                embedder,
                schema_version=1,
                switch=f"the live collection {live!r} changed model while it was opened",
                rename="use another BRAIN_COLLECTION",
            ),
            embedder,
        )
        if since is not None:
            _carry_late_writes(store, old, since)
        return True


def _embedder_of(store: LiveBound, live: str, model: object) -> Embedder:
    """What embeds for collection ``live``, which records ``model``: the store's own embedder when it is that
    model's, else one its opener's ``embedder_for`` builds."""
    if model == store.embedder.name:
        return store.embedder
    if not isinstance(model, str) or store.embedder_for is None:
        raise StoreUnavailable(
            f"the live collection is now {live!r}, built with embedder {model!r}, and this store was opened "
            f"without a way to build that embedder; open the store again"
        )
    return store.embedder_for(model)


def _carry_late_writes(store: LiveBound, old: ChromaAccess, since: int) -> None:
    """Copy ``store``'s writes numbered after ``since`` from ``old`` into the live collection."""
    writer = store.feed_writer
    if writer is None:
        return
    ids = list(
        dict.fromkeys(
            i for r in writer.feed.after(since) if r.writer == writer.writer and r.op != "swap" for i in r.ids
        )
    )
    if not ids:
        return
    rows = {
        i: (d or "", dict(m or {}))
        for page in old.get_ids(ids, ["documents", "metadatas"])
        for i, d, m in zip(page["ids"], page["documents"], page["metadatas"])
    }
    gone = [i for i in ids if i not in rows]
    if gone:
        store.chroma.delete(gone)
    if rows:
        texts = [t for t, _ in rows.values()]
        store.chroma.upsert(list(rows), texts, [m for _, m in rows.values()], store.embedder.embed_documents(texts))
    store.writes.restate(ids)  # numbered again: the other processes fetch them from the live collection


__all__ = [
    "LIVE_SUFFIX",
    "Build",
    "Generation",
    "LiveBound",
    "PointerState",
    "follow_live",
    "initial_state",
    "live_collection",
    "pointer_name",
    "read_pointer",
    "swapped",
    "write_pointer",
]
