"""The store's in-process state: the indexes of every indexed type, split by scope
(:mod:`brain.store.partitions`: the global part resident, entity parts loaded on first use under
BRAIN_INDEX_MEMORY_MB), and the turns of recently used conversations. It follows the store's
committed writes (it is a :class:`~brain.store.events.WriteSubscriber`), other processes' writes
through the change feed when the store has one (:mod:`brain.store.follower`), and writes that
bypassed every store by the collection's size, checked every ``BRAIN_INDEX_REFRESH_SECONDS``.

The indexes are built on first use: from the index snapshot when one is current
(:mod:`brain.store.snapshot`: the parts resident when it was saved; with a change feed, the records
after it are applied on top), else the global part from Chroma. :meth:`InProcessState.save_snapshot`
writes the snapshot (the store does when it closes)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from brain.config.fields import StorageFields
from brain.model.errors import BrainError
from brain.model.results import Document
from brain.model.schemas import GLOBAL_SCOPE, DocType, from_chroma
from brain.providers.cache import LRUCache
from brain.store.chroma import ChromaAccess
from brain.store.events import WriteEvent, WriteSubscriber
from brain.store.feed import ChangeFeed
from brain.store.part_files import PartFiles
from brain.store.partitions import PartitionedIndex, Partitions
from brain.store.reads import get_documents
from brain.store.snapshot import SnapshotKeeper

log = logging.getLogger(__name__)

# conversations whose turns are kept in process (least recently used beyond that are dropped)
CONVERSATIONS_CACHED = 1024


class Follower(Protocol):
    """What the state asks of the change feed's follower (:class:`brain.store.follower.FeedFollower`)."""

    feed: ChangeFeed
    applied: int

    def poll(self, *, force: bool = False) -> int: ...

    def resume(self, sequence: int) -> str | None: ...


class InProcessState(WriteSubscriber):
    """Indexes and the turn cache of one store, kept in step with its write events."""

    cache = True

    def __init__(
        self,
        settings: StorageFields,
        chroma: ChromaAccess,
        dimension: int,
        lock: threading.RLock,
        snapshots: SnapshotKeeper | None = None,
    ):
        self.settings = settings
        self.chroma = chroma
        self.dimension = dimension
        self._lock = lock
        self.partitions: Partitions | None = None
        self.indexes: dict[str, PartitionedIndex] | None = None  # the partitions' view of each type
        # the turns of recently used conversations: conversation id -> {doc id: Document} (least recently
        # used dropped first), and doc id -> conversation
        self.conversations: LRUCache[str, dict[str, Document]] = LRUCache(CONVERSATIONS_CACHED)
        self._turn_conversation: dict[str, str] = {}
        self._expected_count: int | None = None  # collection size when this state was last in step
        self._last_check = 0.0
        self.follower: Follower | None = None  # when the store has a change feed
        self.snapshots = snapshots  # the index snapshot's file, when snapshots are on
        # evicted parts' files: the embedded store's only, whose every write passes through here
        self.part_files = (
            PartFiles(snapshots.path.with_suffix(".parts"), snapshots.identity)
            if snapshots is not None and snapshots.owned
            else None
        )
        self._snapshot_tried = False  # only the first build may come from the snapshot: later ones are rebuilds

    # ---- following writes --------------------------------------------------------------------------
    def stage(self, event: WriteEvent) -> None:
        """Before a write reaches Chroma: the files of the parts it touches are no longer current."""
        files = self.part_files
        if files is None or not files.current():
            return
        scopes: set[str] = set()
        if event.op == "upsert":
            scopes |= {str(m.get("scope", GLOBAL_SCOPE)) for m in event.metadatas or ()}
        partitions = self.partitions
        unknown = []
        for doc_id in event.ids:
            scope = None if partitions is None else partitions.scope_of(doc_id)
            if scope is None:
                unknown.append(doc_id)
            else:
                scopes.add(scope)
        if unknown:  # rows not resident: their stored scope says which file holds them
            try:
                stored = self.chroma.collection.get(ids=unknown, include=["metadatas"])
                scopes |= {str((m or {}).get("scope", GLOBAL_SCOPE)) for m in stored["metadatas"] or ()}
            except Exception:  # noqa: BLE001 - not knowing which, every file goes
                files.drop(None)
                return
        files.drop(scopes)

    def commit(self, event: WriteEvent) -> None:
        with self._lock:
            if event.op == "upsert":
                self._upserted(event)
            elif event.op == "delete":
                for index in (self.indexes or {}).values():
                    index.remove(event.ids)
                self._forget_turns(event.ids)
            else:
                self._metadata_changed(event)
            self._mark_in_step()

    def _upserted(self, event: WriteEvent) -> None:
        ids, texts, metas, vectors = list(event.ids), event.texts or (), event.metadatas or (), event.vectors
        self._forget_turns(ids)  # an id may have changed type or conversation
        for doc_id, text, meta in zip(ids, texts, metas):
            conversation = meta.get("conversation_id") if meta.get("type") == DocType.TURN.value else None
            cached = None if conversation is None else self.conversations.peek(conversation)
            if cached is not None:
                cached[doc_id] = Document(id=doc_id, text=text, metadata=from_chroma(meta))
                self._turn_conversation[doc_id] = meta["conversation_id"]
        for doc_type, index in (self.indexes or {}).items():
            mine = [j for j, m in enumerate(metas) if m.get("type") == doc_type]
            others = [ids[j] for j, m in enumerate(metas) if m.get("type") != doc_type]
            if others:
                index.remove(others)  # an id may have changed type
            if mine:
                assert vectors is not None  # an upsert event carries its vectors
                index.upsert([ids[j] for j in mine], vectors[mine], [texts[j] for j in mine], [metas[j] for j in mine])

    def _metadata_changed(self, event: WriteEvent) -> None:
        used = {i: m["last_used"] for i, m in zip(event.ids, event.metadatas or ()) if "last_used" in m}
        index = (self.indexes or {}).get(DocType.MEMORY.value)
        if index is not None and used:
            index.set_last_used(used)
        changed = [i for i, m in zip(event.ids, event.metadatas or ()) if set(m) - {"last_used"}]
        if changed:  # other keys: the rows as Chroma holds them now replace the resident ones
            self.conversations.clear()
            self._turn_conversation.clear()
            if self.indexes is not None:
                stored = self.chroma.collection.get(ids=changed, include=["documents", "metadatas", "embeddings"])
                self._upserted(
                    WriteEvent(
                        event.sequence,
                        "upsert",
                        tuple(stored["ids"]),
                        tuple(d or "" for d in stored["documents"]),
                        tuple(stored["metadatas"]),
                        np.asarray(stored["embeddings"], dtype=np.float32).reshape(len(stored["ids"]), self.dimension),
                    )
                )

    def _forget_turns(self, ids: Iterable[str]) -> None:
        for doc_id in ids:
            conversation = self._turn_conversation.pop(doc_id, None)
            turns = self.conversations.peek(conversation) if conversation is not None else None
            if turns is not None:
                turns.pop(doc_id, None)

    def _mark_in_step(self) -> None:
        if self.indexes is not None or self.conversations:
            self._expected_count = self.chroma.count()

    # ---- the indexes --------------------------------------------------------------------------------
    def refresh(self) -> PartitionedIndex:
        """Drop every part (and the turn cache) and read the global part from Chroma again; entity parts
        are read when next asked for. Returns the memory index."""
        with self._lock:
            self.conversations.clear()
            self._turn_conversation.clear()
            partitions = self._new_partitions()
            partitions.load_global()
            self.partitions, self.indexes = partitions, partitions.views
            if self.part_files is not None:  # no snapshot vouches for them now
                self.part_files.clear()
            self._snapshot_tried = True
            if self.snapshots is not None:
                self.snapshots.current = False
            self._expected_count = self.chroma.count()
            self._last_check = time.monotonic()
            return partitions.views[DocType.MEMORY.value]

    def _new_partitions(self) -> Partitions:
        budget = int(self.settings.index_memory_mb * 2**20)
        partitions = Partitions(self.settings.indexed_types, self.dimension, budget, self._read_scope, self._lock)
        partitions.files = self.part_files
        return partitions

    def _read_scope(self, scope: str | None) -> Iterator[dict[str, object]]:
        """Every indexed row of ``scope`` (of every scope when None) from Chroma, a page at a time.

        A scope's rows are found by their scope alone, and then read by id: Chroma answers a ``where`` of
        several keys by intersecting what each key matches, and the type matches most of a large collection
        (1,000 memories of one entity in a collection of a million: 0.87 s with the type in the ``where``)."""
        include = ["documents", "metadatas", "embeddings"]
        if scope is None:
            yield from self.chroma.pages(self._indexed_where(), include)
            return
        types = set(self.settings.indexed_types)
        ids = [
            doc_id
            for page in self.chroma.pages({"scope": scope}, ["metadatas"])
            for doc_id, meta in zip(page["ids"], page["metadatas"])
            if (meta or {}).get("type") in types
        ]
        step = self.chroma.max_batch_size
        for start in range(0, len(ids), step):
            yield self.chroma.collection.get(ids=ids[start : start + step], include=include)

    def _indexed_where(self) -> dict[str, object]:
        types = list(self.settings.indexed_types)
        return {"type": types[0]} if len(types) == 1 else {"type": {"$in": types}}

    def build(self) -> None:
        """Build the indexes: the first time from the snapshot when it is current, else from Chroma.
        A no-op when they are built: requests that found them missing together wait on the lock
        while the first one builds, and must not each read the whole collection again."""
        with self._lock:
            if self.indexes is not None:
                return
            if not self._snapshot_tried:
                self._snapshot_tried = True
                if self._load_snapshot():
                    return
            self.refresh()

    def _load_snapshot(self) -> bool:
        """Take the indexes from the snapshot and catch up from there; False when it is not usable
        (logged; the caller rebuilds)."""
        keeper, follower = self.snapshots, self.follower
        if keeper is None or (not keeper.owned and follower is None):
            return False  # several processes may write, and no feed says what changed since it was saved
        snapshot = keeper.load()
        if snapshot is None:
            return False
        count = self.chroma.count()
        if follower is None:
            why = (
                f"it was saved with a change feed (sequence {snapshot.sequence})"
                if snapshot.sequence is not None
                else f"it holds a collection of {snapshot.count} documents, and Chroma holds {count}"
                if snapshot.count != count
                else None
            )
        elif snapshot.sequence is None:
            why = "it was saved without a change feed, so nothing says which writes it misses"
        elif snapshot.feed_id != str(follower.feed.col.id):
            why = f"it was saved with another change feed ({snapshot.feed_id})"
        else:
            why = None
        if why is None:
            partitions = self._new_partitions()
            for scope, part in snapshot.parts.items():
                partitions.install(scope, part)
            self.partitions, self.indexes = partitions, partitions.views
            if follower is not None and snapshot.sequence is not None:  # with a follower, a snapshot has one
                try:
                    why = follower.resume(snapshot.sequence)  # applies the writes after it to these indexes
                except BaseException:  # caught up in part: the next build reads Chroma instead
                    self.partitions, self.indexes = None, None
                    raise
        if why is not None:
            self.partitions, self.indexes = None, None
            keeper.reject(why)
            return False
        if self.part_files is not None:
            self.part_files.adopt(snapshot.part_files)
        # with a feed, a save records the sequence caught up to
        keeper.current = follower is None or follower.applied == snapshot.sequence
        self._expected_count = self.chroma.count() if follower is not None else count
        self._last_check = time.monotonic()
        log.info(
            "in-process indexes loaded from the index snapshot %s (%s)",
            keeper.path,
            f"sequence {snapshot.sequence}, caught up to {follower.applied}"
            if follower is not None
            else f"{count} documents",
        )
        return True

    def save_snapshot(self) -> Path | None:
        """Save the indexes to the snapshot file, when they were built and snapshots are on (and a
        snapshot could be proven current later: the store is owned or has a change feed). Returns
        the file, or None when nothing was saved."""
        keeper, follower = self.snapshots, self.follower
        with self._lock:  # no write between the export and the file (an owned store's write deletes the file)
            if keeper is None or self.partitions is None or (not keeper.owned and follower is None):
                return None
            if follower is not None:  # its position moves past this store's own records only when it polls
                follower.poll(force=True)
            files = self.part_files
            if files is not None:
                files.wait()
            path = keeper.save(
                dict(self.partitions.resident_scopes()),
                part_files=None if files is None else files.current(),
                count=self.chroma.count(),
                sequence=None if follower is None else follower.applied,
                feed_id=None if follower is None else str(follower.feed.col.id),
            )
            if files is not None:
                files.saved_since_load = False
            return path

    def index_for(self, doc_type: str) -> PartitionedIndex | None:
        """The index of ``doc_type`` (built on first use, rebuilt when the collection changed behind
        this store's back), or None when that type is searched through Chroma."""
        if doc_type not in self.settings.indexed_types:
            return None
        if self.indexes is None:
            self.build()
        else:
            self.check_outside_changes()
        indexes = self.indexes
        if indexes is None:  # dropped by a concurrent metadata change
            self.refresh()
            indexes = self.indexes
            assert indexes is not None  # refresh builds them
        return indexes[doc_type]

    def check_outside_changes(self) -> None:
        """Apply other processes' writes from the change feed (every feed interval), and every
        BRAIN_INDEX_REFRESH_SECONDS compare the collection's size with the size it had when this state
        was last in step; if a write that bypassed the stores changed it, rebuild."""
        if self.follower is not None:
            self.follower.poll()
        every = self.settings.index_refresh_seconds
        if self._expected_count is None or every <= 0 or time.monotonic() - self._last_check < every:
            return
        self._last_check = time.monotonic()
        with self._lock:
            count = self.chroma.count()
            # the count moves with other processes' writes too; those are the feed's, so the size says
            # something only while no other writer's record is open or was just applied
            if self.follower is not None and self.follower.poll(force=True):
                return
            if count == self._expected_count:
                return
        log.info("collection changed outside this store; rebuilding the in-process state")
        self.rebuild()

    def rebuild(self) -> None:
        """Drop the turn cache and rebuild the indexes from Chroma, if they were built (else they are
        built on first use, as always)."""
        with self._lock:
            self.conversations.clear()
            self._turn_conversation.clear()
            if self.indexes is not None:
                self.refresh()
            else:
                self._expected_count = None

    def partition_stats(self) -> dict[str, object] | None:
        """What the parts hold (:meth:`Partitions.stats`); None until the indexes are built."""
        partitions = self.partitions
        return None if partitions is None else partitions.stats()

    def unusable_rows(self) -> dict[str, int] | None:
        """Rows each built index could not use as stored; None until the indexes are built."""
        return None if self.indexes is None else {t: len(index.problems()) for t, index in self.indexes.items()}

    # ---- the turn cache -----------------------------------------------------------------------------
    def turns(self, conversation_id: str) -> list[Document]:
        """Every turn of a conversation in order, from the cache (filled from Chroma once)."""
        self.check_outside_changes()
        with self._lock:
            cached = self.conversations.get(conversation_id)
            if cached is None:
                docs = get_documents(
                    self.chroma,
                    None,
                    where={"conversation_id": conversation_id},
                    doc_type=DocType.TURN.value,
                    limit=None,
                    offset=None,
                    include_embeddings=False,
                    scopes=None,
                )
                cached = {d.id: d for d in docs}
                self._turn_conversation.update((d.id, conversation_id) for d in docs)
                for _, dropped in self.conversations.put(conversation_id, cached):
                    for doc_id in dropped:
                        self._turn_conversation.pop(doc_id, None)
                if self._expected_count is None:
                    self._mark_in_step()
                    self._last_check = time.monotonic()
            return sorted(cached.values(), key=_turn_order)


def _turn_order(doc: Document) -> tuple[int, object]:
    return (int(doc.metadata.get("turn_index") or 0), doc.metadata.get("ts_epoch", 0.0))


class HasState(Protocol):
    """What owns an in-process state: a store (:class:`brain.store.Store`)."""

    state: InProcessState


def memory_index(store: HasState) -> PartitionedIndex:
    """``store``'s memory ranking index (built on first use)."""
    index = store.state.index_for(DocType.MEMORY.value)
    assert index is not None  # settings guarantee memory is indexed
    return index


def refresh_index(store: HasState) -> PartitionedIndex:
    """Rebuild ``store``'s in-process indexes from Chroma, after writes that bypassed it (straight to
    ``store.col``). Returns the memory index."""
    return store.state.refresh()


def index_sizes(store: HasState) -> dict[str, int]:
    """Documents held by each of ``store``'s in-process indexes (builds them if needed)."""
    return {t: len(_index(store, t)) for t in store.state.settings.indexed_types}


def index_problems(store: HasState) -> dict[str, dict[str, dict[str, str]]]:
    """Stored rows ``store``'s in-process indexes could not use as they are, by type (see
    :meth:`brain.store.Store.index_problems`)."""
    return {t: _index(store, t).problems() for t in store.state.settings.indexed_types}


def _index(store: HasState, doc_type: str) -> PartitionedIndex:
    index = store.state.index_for(doc_type)
    assert index is not None  # an indexed type has an index
    return index


def save_index_snapshot(store: HasState) -> Path | None:
    """Save ``store``'s in-process indexes (built first if need be, with every entity's part that fits
    BRAIN_INDEX_MEMORY_MB) to the index snapshot
    (BRAIN_INDEX_SNAPSHOT_PATH, else in the data directory), which the next open loads instead of
    reading the whole collection; the store also saves it when it closes. Returns the file, or None when
    snapshots are off (BRAIN_INDEX_SNAPSHOT) or could not be proven current later (a Chroma server
    without the change feed)."""
    if store.state.snapshots is None:
        return None
    store.state.index_for("memory")  # builds the indexes
    partitions = store.state.partitions
    if partitions is not None:  # every entity's part that fits the budget, so a start serves them at once
        partitions.parts(None)
    return store.state.save_snapshot()


def save_snapshot_at_close(store: HasState) -> None:
    """Save ``store``'s snapshot when it changed since it was loaded or saved (or parts were saved to their
    files, which it lists); a failure is logged, as closing goes on (the next start rebuilds instead)."""
    keeper, files = store.state.snapshots, store.state.part_files
    try:
        if keeper is None or (keeper.current and not (files is not None and files.saved_since_load)):
            return
        try:
            store.state.save_snapshot()
        except (OSError, BrainError) as exc:
            log.warning("could not save the index snapshot %s: %s", keeper.path, exc)
    finally:
        if files is not None:
            files.close()


__all__ = [
    "CONVERSATIONS_CACHED",
    "Follower",
    "HasState",
    "InProcessState",
    "index_problems",
    "index_sizes",
    "memory_index",
    "refresh_index",
    "save_index_snapshot",
    "save_snapshot_at_close",
]
