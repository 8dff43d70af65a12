"""Store: the one Chroma collection (``conversations``) of typed, validated documents.

A thin facade over the parts of :mod:`brain.store`: Chroma access (:attr:`Store.chroma`), the
write pipeline, the write events (:attr:`Store.events`), the in-process indexes and retrieval.
Callers open it as :class:`brain.app.rag_store.RagStore`, which adds what this layer does not import (the
mirror, the persona rule) so that every way of opening a store wires it the same.
Writes are validated whole before anything is embedded or stored; memories are deduplicated by
(scope, text); turns and summaries get their per-conversation index.

Its methods are the data model's API (each checks its arguments and hands over to one part, and its
docstring is the API's reference). What only the store's own machinery needs is a function of the module
that owns it, taking the store: the change feed (:mod:`~brain.store.follower`), the live collection
(:mod:`~brain.store.live`), the indexes and their snapshot (:mod:`~brain.store.indexes`,
:mod:`~brain.store.snapshot`), history (:mod:`~brain.store.history`), retrieval helpers
(:mod:`~brain.store.retrieval`), positions (:mod:`~brain.store.positions`), the mirror link
(:mod:`~brain.store.mirror_link`) and the index files (:mod:`~brain.store.scrub`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Self

import numpy as np
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection

from brain.config import Settings
from brain.model.errors import BrainError, NotFound, ValidationError
from brain.model.results import Document, Hit, MemoryHit, Supersession
from brain.model.schemas import DocType, check_extra_metadata, check_k, utc_now
from brain.providers.embeddings import Embedder
from brain.rules.memories import readable_scopes, search_scopes
from brain.store.chroma import (
    ChromaAccess,
    GuardedCollection,
    embedding_function,
    missing_store,
    open_client,
    open_cosine_collection,
    switch_advice,
)
from brain.store.disk import DiskGuard, guarded_paths
from brain.store.events import WriteEvents, WriteSubscriber
from brain.store.feed import FeedWriter
from brain.store.follower import FeedFollower, catch_up
from brain.store.history import memory_history, refuse_chain_edit, supersede
from brain.store.indexes import InProcessState, index_problems, save_snapshot_at_close
from brain.store.live import live_collection
from brain.store.locking import DataDirLock
from brain.store.migrations import migrate_entity_names, migrate_typed_fields
from brain.store.mirror_link import H, M, MirrorLink
from brain.store.pipeline import WritePipeline
from brain.store.plan import WriteResult, memory_edit, plan_write
from brain.store.reads import find_ids, get_documents, type_value
from brain.store.retrieval import Retrieval, VersionRule
from brain.store.scrub import clear_unused_index_space
from brain.store.snapshot import (
    KeyFile,
    ServerKey,
    SnapshotIdentity,
    SnapshotKeeper,
    drop_server_key,
    snapshot_path,
)
from brain.store.write_intents import WriteIntentLog

log = logging.getLogger(__name__)


class Store(Generic[M, H]):
    """Typed documents in one Chroma collection, with exact memory ranking.

    ``col`` is the underlying Chroma collection, for direct queries: ``query_texts`` are embedded with
    the store's embedder, and a ``where`` may and several keys as :meth:`get` does. ``chroma`` is the
    same with paged reads and chunked writes. Writes through them bypass validation, the write events and the
    in-process state; :func:`brain.store.indexes.refresh_index` rebuilds that state after such writes.

    Followers of the writes subscribe to :attr:`events`; ``attach(store)``, when given, is called
    once the collection is open and before unfinished writes of a dead process are rolled back, so
    that what it subscribes (the mirror, see :class:`brain.app.rag_store.RagStore`) follows that roll-back.
    ``persona_version`` picks the persona version :meth:`retrieve_persona` reads
    (:func:`brain.features.persona.current_version`; without it every version is searched). ``M`` and
    ``H`` are the types of the attached mirror and its health (:mod:`brain.store.mirror_link`).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder,
        embedder_for: Callable[[str], Embedder] | None = None,
        client: ClientAPI | None = None,
        create: bool = True,
        attach: Callable[[Store[M, H]], None] | None = None,
        persona_version: VersionRule | None = None,
    ):
        """``embedder`` embeds what the collection holds; ``embedder_for`` builds one for another model by
        name, when a re-index elsewhere swaps the live collection to it (without it, such a swap is refused
        until the store is opened again). ``create=False``: raise :class:`StoreNotFound` rather than create a
        store that does not exist."""
        self.settings = settings
        self.embedder = embedder
        self.embedder_for = embedder_for
        #: held by every write and by what must not interleave with one (a scrub, a follower's catch-up, a swap
        #: of the live collection); re-entrant, so a helper holding it may call back into the store
        self.lock = threading.RLock()
        self._closers: list[Callable[[], None]] = []
        # the Chroma client this store opened (closed with it); chromadb types its clients without close()
        self._owned_client: Any = None
        # the mirror's subscriber (brain.features.mirror.subscriber), when the opener attached one
        self.mirror_link: MirrorLink[M, H] | None = None
        self.feed_writer: FeedWriter | None = None  # this store's side of the change feed, when it has one
        self.follower: FeedFollower | None = None
        #: embedded Chroma is single-process: the claim on the data directory, taken before opening it (None on a
        #: Chroma server or a client the caller gave)
        self.dir_lock: DataDirLock | None = None
        if client is None and not self.settings.chroma_url:
            if not create and not self.settings.has_embedded_store():
                raise missing_store(self.settings)  # before the lock, which would create the directory
            self.dir_lock = DataDirLock(self.settings.data_dir).acquire()
        try:
            self.client = client or open_client(self.settings, create=create)
            if client is None:
                self._owned_client = self.client
            # the logical name serves through the pointer a re-index flips (brain.store.live)
            self.collection_name = live_collection(self.client, self.settings.collection)
            if self.dir_lock is not None:
                drop_server_key(self.client, self.settings.collection)
            if not create and self.collection_name not in {c.name for c in self.client.list_collections()}:
                raise missing_store(self.settings)
            self.events = WriteEvents()
            # writes are refused before the disk is full, where Chroma can hang (brain.store.disk)
            self.disk = self.events.subscribe(DiskGuard(guarded_paths(self.settings), self.settings.min_free_disk_mb))
            self._persona_version = persona_version
            self.bind(self._open_collection(), self.embedder)
            # closers run last-added first: the snapshot is saved after the follower and the mirror stop
            self.on_close(lambda: save_snapshot_at_close(self))
            if attach is not None:
                attach(self)
            # a write a dead process left half done is rolled back before anything reads the store
            self.writes.intents.resolve(self.writes.roll_back)
            link = self.mirror_link
            migrated = migrate_typed_fields(
                self.col,
                self.chroma.max_batch_size,
                link.mirror if link is not None and DocType.MEMORY.value in link.types else None,
            )
            names = migrate_entity_names(
                self.chroma, link.mirror if link is not None else None, link.types if link is not None else ()
            )
            migrated += names["rows"]
            if migrated and self.state.snapshots is not None:  # rows rewritten around the write events
                self.state.snapshots.discard()
        except BaseException:
            self.close()
            raise

    def _open_collection(self) -> Collection:
        return open_cosine_collection(
            self.client,
            self.collection_name,
            self.embedder,
            schema_version=1,
            switch=lambda recorded, count: switch_advice(self.settings, recorded, self.embedder, count),
            rename="use another BRAIN_COLLECTION or BRAIN_DATA_DIR",
        )

    def bind(self, collection: Collection, embedder: Embedder) -> None:
        """Serve ``collection`` (an open Chroma collection bound to ``embedder``): the Chroma access,
        the in-process state, retrieval and the write pipeline are built for it. At open, and again
        when a re-index swaps the live collection (:func:`brain.store.live.follow_live`)."""
        where = self.settings.chroma_url or "the data directory"
        # None at open: the first binding
        old_state: InProcessState | None = getattr(self, "state", None)
        old_writes: WritePipeline | None = getattr(self, "writes", None)
        self.embedder = embedder
        # the collection as callers query it directly: their query_texts embedded by this store's model
        collection = self.client.get_collection(collection.name, embedding_function=embedding_function(embedder))
        self.col = GuardedCollection(collection, where, friendly_where=True)
        self.chroma = ChromaAccess(self.client, self.col, where)
        self.dimension = int(self.col.metadata["dimension"])
        snapshots = self._snapshot_keeper()  # a snapshot belongs to one collection and model
        self.state = InProcessState(self.settings, self.chroma, self.dimension, self.lock, snapshots)
        if old_state is None:
            self.events.subscribe(self.state)
        else:
            self.events.replace(old_state, self.state)
        old_keeper = None if old_state is None else old_state.snapshots
        if old_keeper is not None:
            self.events.unsubscribe(old_keeper)
        if snapshots is not None:
            self.events.subscribe(snapshots)
        self.retrieval = Retrieval(
            self.settings, self.embedder, self.dimension, self.chroma, self.state, self._persona_version
        )
        self.weights = self.retrieval.weights
        #: every write goes through it: planned, recorded as an intent, applied to Chroma and the state
        self.writes = WritePipeline(
            self.chroma,
            self.embedder,
            self.dimension,
            self.events,
            WriteIntentLog(self.settings.data_dir),
            self.state.turns,
        )
        if old_writes is not None:
            self.writes.positions, self.writes.writer = old_writes.positions, old_writes.writer
        if self.follower is not None:
            self.follower.rebind(self.chroma, self.state.rebuild)
            self.state.follower = self.follower
        link = self.mirror_link
        if link is not None and link.mirror is not None and link.mirror.model != embedder.name:
            link.mirror.use_model(embedder.name)

    def _snapshot_keeper(self) -> SnapshotKeeper | None:
        if not self.settings.index_snapshot:
            return None
        identity = SnapshotIdentity(
            self.settings.collection,
            str(self.col.id),
            self.embedder.name,
            self.dimension,
            tuple(self.settings.indexed_types),
        )
        # the embedded store is this process's alone; a server's writes are followed through the change feed
        owned = self.dir_lock is not None
        # the embedded store's key must be out of the data directory, which holds its Chroma
        keys = KeyFile(self.settings) if owned else ServerKey(self.client, self.settings.collection)
        return SnapshotKeeper(snapshot_path(self.settings), identity, owned=owned, keys=keys)

    def subscribe(self, subscriber: WriteSubscriber, *, close: Callable[[], None] | None = None) -> WriteSubscriber:
        """Let ``subscriber`` follow every write from now on; ``close`` runs when the store closes."""
        self.events.subscribe(subscriber)
        if close is not None:
            self.on_close(close)
        return subscriber

    def on_close(self, close: Callable[[], None]) -> None:
        """Call ``close`` when the store closes, after what was registered later (last in, first out)."""
        self._closers.append(close)

    def close(self) -> None:
        """Close what was subscribed with a ``close`` (the mirror, when this store's opener opened it)
        and release the data directory for other processes. The store must not be used afterwards."""
        closers, self._closers = self._closers, []
        try:
            for close in reversed(closers):
                close()
        finally:
            # chromadb keeps one embedded store per path per process; left open, a later open in this
            # process reads that stale copy and fails ("Error finding id") once another process wrote
            owned, self._owned_client = self._owned_client, None
            if owned is not None:
                owned.close()
                if self.dir_lock is not None:  # the directory is this process's: no client writes it now
                    clear_unused_index_space(self.settings.data_dir / "chroma")
            if self.dir_lock is not None:
                self.dir_lock.release()
                self.dir_lock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- the mirror, as attached by the opener (brain.store.mirror_link) -------------------------
    @property
    def mirror(self) -> M | None:
        """The Engram mirror following this store's writes; None when none is attached, or it is off or damaged."""
        return None if self.mirror_link is None else self.mirror_link.mirror

    @mirror.setter
    def mirror(self, mirror: M | None) -> None:
        """Replace the mirror the attached subscriber writes to (a rebuild swaps the file)."""
        self._require_link().mirror = mirror

    @property
    def mirror_health(self) -> H | None:
        """The mirror's :class:`~brain.features.mirror.MirrorHealth`; None when no mirror is attached."""
        return None if self.mirror_link is None else self.mirror_link.health

    @mirror_health.setter
    def mirror_health(self, health: H) -> None:
        self._require_link().health = health

    def _require_link(self) -> MirrorLink[M, H]:
        if self.mirror_link is None:
            raise BrainError(
                "this store has no mirror attached; open it with brain.open() or brain.app.core.open_store()"
            )
        return self.mirror_link

    # ---- writes -----------------------------------------------------------------------------------
    def write_docs(self, docs: Sequence[Mapping[str, object]], *, merge_memories: bool = True) -> WriteResult:
        """Store a batch as :meth:`upsert_docs` does; returns the ids and the positions assigned."""
        plan = plan_write(docs, self.dimension)
        if not plan.docs:
            return WriteResult((), {})
        with self.lock:
            return self.writes.upsert(plan, merge_memories=merge_memories)

    def upsert_docs(self, docs: Sequence[Mapping[str, object]]) -> list[str]:
        """Store a batch ``[{"text", "type", **metadata}, ...]``; all or nothing. Returns ids in input order.

        A memory whose id (from its scope and text, case and whitespace aside) is stored already is
        the same memory: it keeps its first text, vector and creation time (``created_at``, else its
        first timestamp); importance becomes the higher one, tags the union, the timestamp and last
        use the later ones; other fields the new write gives replace the old. A write that would
        change nothing but the time writes nothing."""
        return list(self.write_docs(docs).ids)

    def upsert_doc(
        self,
        text: str,
        type: str | DocType,
        *,
        scope: str | None = None,
        timestamp: datetime | str | None = None,
        source: str | None = None,
        id: str | None = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        **meta: Any,
    ) -> str:
        """Store one document of any type; returns its id."""
        doc = {"text": text, "type": type, "scope": scope, "timestamp": timestamp, "source": source, "id": id, **meta}
        if embedding is not None:
            doc["embedding"] = embedding
        return self.upsert_docs([doc])[0]

    def update_memory(
        self,
        doc_id: str,
        text: str | None = None,
        *,
        importance: int | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, object] | None = None,
        replace_metadata: bool = False,
        timestamp: datetime | str | None = None,
        entity: str | None = None,
    ) -> Document:
        """Change one memory in place, keeping its id; returns it as stored.

        Unlike writing the same text again (which merges: higher importance, united tags), the
        given values replace the old ones. ``metadata`` adds or overwrites extra keys (with
        ``replace_metadata=True`` it replaces all extra keys); it cannot hold the reserved keys
        (:data:`brain.model.schemas.RESERVED_KEYS`): a memory's scope never changes here, and its vector is
        always the store's embedding of its text. A new ``text`` is embedded again; the timestamp
        becomes ``timestamp`` or now (``created_at`` keeps the first one). Raises :class:`NotFound`
        for an unknown id, and, with ``entity``, for a memory that entity cannot see (see
        :func:`brain.rules.memories.visible_scopes`).
        """
        extra = check_extra_metadata(metadata, call="update_memory")
        visible = readable_scopes(entity)
        with self.lock:
            docs = self.get([doc_id], type=DocType.MEMORY, include_embeddings=True, entity=entity)
            if not docs:
                raise NotFound(f"no memory with id {doc_id!r}" + (f" visible to entity {entity!r}" if visible else ""))
            refuse_chain_edit(docs[0], extra)
            doc = memory_edit(
                docs[0],
                text,
                importance=importance,
                tags=tags,
                extra=extra,
                replace_metadata=replace_metadata,
                timestamp=timestamp,
            )
            self.write_docs([doc], merge_memories=False)
            return self.get_one(doc_id)

    def supersede(
        self,
        old_id: str,
        new_text: str,
        *,
        kind: str = "update",
        at: datetime | str | float | None = None,
        importance: int | None = None,
        tags: Iterable[str] | None = None,
        expires_at: datetime | str | None = None,
        source: str | None = None,
        conversation_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        entity: str | None = None,
    ) -> Supersession:
        """Replace memory ``old_id`` with ``new_text``, keeping the old one as history (see
        :mod:`brain.store.history`): the old memory becomes ``superseded`` with ``valid_until`` = ``at``
        (default now) and ``superseded_by`` the new id; the new one, in the same scope, gets ``supersedes``,
        ``valid_from`` = ``at`` and ``change`` = ``kind`` (``update``: the fact changed; ``contradict``: the
        old one was wrong). Importance and tags are the old one's unless given. Both documents are one
        write: all or nothing, also across a crash.

        ``entity``: the memory must be that entity's own (a supersession never crosses an entity; a global
        memory is superseded without one). Raises :class:`NotFound` for an unknown id (or one ``entity``
        cannot see) and :class:`ValidationError` for a memory that is not current (superseded already,
        retracted, archived, a part), a text equal to the old one's or to another current memory's of the
        scope, or a time before the old memory started holding."""
        return supersede(
            self,
            old_id,
            new_text,
            kind=kind,
            at=at,
            importance=importance,
            tags=tags,
            expires_at=expires_at,
            source=source,
            conversation_id=conversation_id,
            metadata=metadata,
            entity=entity,
        )

    def history(self, memory_id: str, *, entity: str | None = None) -> list[Document]:
        """The supersession chain memory ``memory_id`` belongs to, oldest first (one document when it was
        never superseded nor superseded another); the current memory is the one without ``superseded_by``.
        With ``entity``, :class:`NotFound` unless that entity may see the memory (a chain never leaves its
        scope)."""
        return memory_history(self, memory_id, entity=entity)

    def upsert_memory(
        self,
        text: str,
        scope: str | None = None,
        importance: int = 3,
        tags: Iterable[str] | None = None,
        timestamp: datetime | str | None = None,
        source: str | None = None,
        *,
        entity: str | None = None,
        conversation_id: str | None = None,
        **meta: Any,
    ) -> str:
        """Store a long-term fact. ``entity`` is its scope: ``entity="bob"`` stores it in
        ``entity:bob`` (a ``scope`` given too must agree); with neither it is global. The same text in
        the same scope is the same memory: see :meth:`upsert_docs` for how it merges."""
        return self.upsert_doc(
            text,
            DocType.MEMORY,
            scope=scope,
            timestamp=timestamp,
            source=source,
            importance=importance,
            tags=list(tags) if tags is not None and not isinstance(tags, str) else tags,
            entity=entity,
            conversation_id=conversation_id,
            **meta,
        )

    def write_turns(
        self,
        conversation_id: str,
        user_text: str,
        assistant_text: str,
        user_ts: datetime | str | None = None,
        assistant_ts: datetime | str | None = None,
        source: str = "chat",
        **meta: object,
    ) -> WriteResult:
        """Store one exchange as two turn documents with consecutive ``turn_index`` (one write: both
        or neither); the result holds both ids and their ``turn_index``."""
        now = utc_now()
        return self.write_docs(
            [
                {
                    "text": user_text,
                    "type": DocType.TURN,
                    "conversation_id": conversation_id,
                    "role": "user",
                    "timestamp": user_ts or now,
                    "source": source,
                    **meta,
                },
                {
                    "text": assistant_text,
                    "type": DocType.TURN,
                    "conversation_id": conversation_id,
                    "role": "assistant",
                    "timestamp": assistant_ts or user_ts or now,
                    "source": source,
                    **meta,
                },
            ]
        )

    def upsert_turn(
        self,
        conversation_id: str,
        user_text: str,
        assistant_text: str,
        user_ts: datetime | str | None = None,
        assistant_ts: datetime | str | None = None,
        source: str = "chat",
        **meta: object,
    ) -> tuple[str, str]:
        """Store one exchange as two turn documents with consecutive ``turn_index``; returns both ids."""
        user_id, assistant_id = self.write_turns(
            conversation_id, user_text, assistant_text, user_ts, assistant_ts, source, **meta
        ).ids
        return user_id, assistant_id

    def upsert_summary(
        self,
        conversation_id: str,
        text: str,
        turn_range: str | None = None,
        summary_index: int | None = None,
        timestamp: datetime | str | None = None,
        source: str | None = None,
        **meta: Any,
    ) -> str:
        """Store a conversation summary; ``summary_index`` is assigned when absent."""
        return self.upsert_doc(
            text,
            DocType.SUMMARY,
            timestamp=timestamp,
            source=source,
            conversation_id=conversation_id,
            turn_range=turn_range,
            summary_index=summary_index,
            **meta,
        )

    def delete(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, object] | None = None,
        type: str | DocType | None = None,
        entity: str | None = None,
    ) -> int:
        """Delete by ids and/or filter; returns how many documents were removed. With ``entity``,
        only documents that entity may see (its own scope and the global one) are deleted."""
        if ids is None and where is None and type is None:
            raise ValidationError.of("ids", "delete needs ids, where or type; refusing to delete everything")
        if isinstance(ids, str):
            ids = [ids]
        with self.lock:
            found = find_ids(
                self.chroma, ids, where=_plain(where), doc_type=type_value(type), scopes=readable_scopes(entity)
            )
            if found:
                self.writes.delete(found)
        return len(found)

    # ---- reads ------------------------------------------------------------------------------------
    def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, object] | None = None,
        type: str | DocType | None = None,
        limit: int | None = None,
        offset: int | None = None,
        include_embeddings: bool = False,
        entity: str | None = None,
    ) -> list[Document]:
        """Documents by id and/or filter (ids keep their order; missing ids are skipped). With
        ``entity``, only documents that entity may see (its own scope and the global one)."""
        if isinstance(ids, str):
            ids = [ids]
        elif ids is not None:
            ids = list(dict.fromkeys(ids))  # an id asked twice is one document (Chroma refuses duplicates)
        return get_documents(
            self.chroma,
            ids,
            where=_plain(where),
            doc_type=type_value(type),
            limit=limit,
            offset=offset,
            include_embeddings=include_embeddings,
            scopes=readable_scopes(entity),
        )

    def get_by_ids(self, ids: Sequence[str], *, entity: str | None = None) -> list[Document]:
        """The documents of ``ids`` as :meth:`get` gives them (with ``entity``, those it may see), read from the
        in-process indexes where they are held and from Chroma for the rest; in no particular order."""
        scopes = readable_scopes(entity)
        found, missing = self.retrieval.resident(ids, scopes)
        return found + (self.get(missing, entity=entity) if missing else [])

    def get_one(self, doc_id: str) -> Document:
        docs = self.get([doc_id])
        if not docs:
            raise NotFound(f"no document with id {doc_id!r}")
        return docs[0]

    def count(self, type: str | DocType | None = None, *, where: Mapping[str, object] | None = None) -> int:
        doc_type = type_value(type)
        if doc_type is None and where is None:
            return self.chroma.count()
        return len(find_ids(self.chroma, None, where=_plain(where), doc_type=doc_type, scopes=None))

    def index_problems(self) -> dict[str, dict[str, dict[str, str]]]:
        """Stored rows the in-process indexes could not use as they are, by type:
        ``{type: {id: {field: what was done instead}}}`` (builds the indexes if needed). Such rows
        were written around the schema (an older version, a direct Chroma write); rewriting them
        through the store (``update_memory``) or deleting them clears the entry."""
        return index_problems(self)

    def retrieve_memories(
        self,
        query: str,
        k: int | None = None,
        entity: str | None = None,
        *,
        tags: Sequence[str] | None = None,
        min_importance: int | None = None,
        all_scopes: bool = False,
        now: datetime | float | None = None,
        query_vector: np.ndarray | None = None,
        min_sequence: int | None = None,
        relevance: bool = True,
        topic_texts: Sequence[str] = (),
        as_of: datetime | str | float | None = None,
    ) -> list[MemoryHit]:
        """The exact top-k memories in the order the context shows them (``RAG_MEMORY_RANKING``; by default
        only relevant memories, relevance first, then importance and recency, see :mod:`brain.rules.ranking`),
        so a search answers "why is this memory in my prompt, and why not that one". The list tells what the
        gate did (:class:`~brain.model.results.GatedHits`). ``relevance=False``: the reference formula
        w_sim*similarity + w_imp*importance/5 + recency bonus of the ``RAG_WEIGHT_*`` settings, every memory
        eligible.

        Scope: with ``entity``, that entity's memories and global ones; without, global ones only
        (``all_scopes=True`` searches every scope, for operators' tools). ``query_vector`` (the
        query already embedded, e.g. once for several document types) replaces ``query``.
        ``min_sequence``: every write up to that change-feed sequence is reflected (see
        :func:`brain.store.follower.catch_up`).
        ``topic_texts``: besides the query, texts whose words in common with an important memory earn it
        the lower floor of the relevance ranking (the context passes the conversation's latest turns).

        Memories past their ``expires_at`` (at ``now``) are not ranked. ``as_of`` (an ISO time, datetime or
        epoch seconds) ranks what was held true then instead: memories whose validity window
        (``valid_from``, else their creation, up to ``valid_until``) holds that time and that had not expired
        by then, the ones superseded since included; recency is reckoned from then unless ``now`` is given.
        """
        if min_sequence is not None:
            catch_up(self, min_sequence)
        return self.retrieval.memories(
            query,
            k,
            entity,
            tags=tags,
            min_importance=min_importance,
            all_scopes=all_scopes,
            now=now,
            query_vector=query_vector,
            relevance=relevance,
            topic_texts=topic_texts,
            as_of=as_of,
        )

    def search(
        self,
        query: str | None,
        k: int = 5,
        *,
        type: str | DocType | None = None,
        where: Mapping[str, object] | None = None,
        query_vector: np.ndarray | None = None,
        entity: str | None = None,
    ) -> list[Hit]:
        """Plain similarity search over any documents (Chroma's vector index, filtered). With
        ``entity``, only documents that entity may see (its own scope and the global one); without,
        every scope, as :meth:`get` reads."""
        return self.retrieval.search(query, k, type, _plain(where), query_vector, readable_scopes(entity))

    def retrieve_faq(
        self,
        query: str | None,
        k: int | None = None,
        topic: str | None = None,
        *,
        query_vector: np.ndarray | None = None,
        entity: str | None = None,
        all_scopes: bool = False,
    ) -> list[Hit]:
        """The FAQ entries closest in meaning to ``query`` (optionally of one topic). Scope as for
        :meth:`retrieve_memories`: ``entity``'s entries and global ones; without ``entity``, global
        ones only (``all_scopes=True``: every scope)."""
        k = self.settings.faq_top_k if k is None else k
        return self.retrieval.similar(
            query, k, DocType.FAQ, {"topic": topic}, query_vector, search_scopes(entity, all_scopes=all_scopes)
        )

    def retrieve_persona(
        self,
        query: str | None,
        k: int = 3,
        *,
        query_vector: np.ndarray | None = None,
        entity: str | None = None,
        all_scopes: bool = False,
    ) -> list[Hit]:
        """Sections of the current persona closest in meaning to ``query`` (identity, tone, ...
        questions). Scope as for :meth:`retrieve_faq`; the current version is chosen among the
        sections in scope."""
        return self.retrieval.persona(query, k, query_vector, search_scopes(entity, all_scopes=all_scopes))

    def retrieve_summaries(
        self,
        query: str | None,
        k: int | None = None,
        conversation_id: str | None = None,
        *,
        query_vector: np.ndarray | None = None,
        entity: str | None = None,
        all_scopes: bool = False,
    ) -> list[Hit]:
        """Conversation summaries closest in meaning to ``query`` (optionally of one conversation).
        Scope as for :meth:`retrieve_faq`: a summary in another entity's scope is never returned, even
        under a conversation id this entity uses."""
        k = self.settings.summary_top_k if k is None else k
        return self.retrieval.similar(
            query,
            k,
            DocType.SUMMARY,
            {"conversation_id": conversation_id},
            query_vector,
            search_scopes(entity, all_scopes=all_scopes),
        )

    def conversation_turns(self, conversation_id: str, *, entity: str | None = None) -> list[Document]:
        """Every turn of a conversation, oldest first (served from the in-process turn cache). With
        ``entity``, only the turns that entity may see (its own scope and the global one)."""
        return self.retrieval.conversation_turns(conversation_id, readable_scopes(entity))

    def recent_turns(self, conversation_id: str, k: int | None = None, *, entity: str | None = None) -> list[Document]:
        """The last ``k`` turns of a conversation, oldest first (with ``entity``, of those it may see)."""
        k = self.settings.turn_top_k if k is None else check_k(k)
        return self.retrieval.conversation_turns(conversation_id, readable_scopes(entity))[-k:]

    def conversation_summaries(self, conversation_id: str, *, entity: str | None = None) -> list[Document]:
        """Every summary of a conversation, in ``summary_index`` order (with ``entity``, of those it may see)."""
        return self.retrieval.conversation_summaries(conversation_id, readable_scopes(entity))

    def stats(self) -> dict[str, Any]:
        counts = {t.value: self.count(t) for t in DocType}
        return {
            "collection": self.settings.collection,
            "live_collection": self.collection_name,
            "documents": sum(counts.values()),
            "by_type": counts,
            "embedder": self.embedder.name,
            "dimension": self.dimension,
            "backend": self.settings.chroma_url or str(self.settings.data_dir / "chroma"),
            "disk_bytes": None if self.settings.chroma_url else _tree_bytes(self.settings.data_dir / "chroma"),
            # rows the indexes could not use as stored (see index_problems); None until the indexes are built
            "unusable_rows": self.state.unusable_rows(),
            # the indexes' parts: resident, evicted, loads (see brain.store.partitions); None until built
            "index": self.state.partition_stats(),
        }


def _plain(where: Mapping[str, object] | None) -> dict[str, object] | None:
    """A caller's filter as the Chroma layer takes it (a dict of its own, never the caller's object)."""
    return None if where is None else dict(where)


def _tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (the embedded store's size on disk)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


__all__ = ["Store"]
