"""RagStore: the one Chroma collection (``conversations``) of typed, validated documents.

Writes are validated whole before anything is embedded or stored; memories are deduplicated by
(scope, text); turns and summaries get their per-conversation index. Memory retrieval is exact and
served from :class:`~brain.memory_index.MemoryIndex`, which this store keeps in step with its writes.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlparse

import numpy as np

from brain.cache import LRUCache
from brain.config import Settings
from brain.embeddings import Embedder, get_embedder
from brain.errors import (
    BrainError,
    EmbeddingModelMismatch,
    NotFound,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    ValidationError,
)
from brain.filters import to_chroma_where
from brain.ids import derived_id, memory_id, new_id
from brain.locking import DataDirLock
from brain.memories import created, merge_duplicate, readable_scopes, same_text, search_scopes
from brain.memory_index import MemoryIndex
from brain.migrations import migrate_typed_fields
from brain.mirror import EngramMirror, MirrorCorrupt, MirrorHealth
from brain.persona import current_version
from brain.ranking import ScoreWeights, to_unit_length
from brain.write_intents import PriorVersion, WriteIntent, WriteIntentLog

# persona, faq and summaries rank by similarity alone
SIMILARITY_ONLY = ScoreWeights(similarity=1.0, importance=0.0, recency=0.0)
from brain.results import Document, Hit, MemoryHit
from brain.schemas import (
    check_last_used,
    GLOBAL_SCOPE,
    DocType,
    check_extra_metadata,
    from_chroma,
    model_for,
    parse_timestamp,
    read_stored,
    utc_now,
    valid_conversation_id,
    validate_metadata,
)

log = logging.getLogger(__name__)

_PAGE = 2000
# conversations whose turns are kept in process (least recently used beyond that are dropped)
_CONVERSATIONS_CACHED = 1024


def open_client(settings: Settings, *, create: bool = True):
    """An embedded ``PersistentClient`` under the data dir, or an ``HttpClient`` when ``BRAIN_CHROMA_URL`` is set.

    With ``create=False`` a data directory without a store raises :class:`StoreNotFound` instead of
    being created."""
    import chromadb

    chroma_settings = chromadb.Settings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urlparse(settings.chroma_url)
        port = url.port or (443 if url.scheme == "https" else 8000)
        try:
            return chromadb.HttpClient(
                host=url.hostname, port=port, ssl=url.scheme == "https", settings=chroma_settings
            )
        except Exception as exc:  # chromadb raises plain ValueError/ConnectionError/httpx errors here
            raise StoreUnavailable(
                f"cannot reach the Chroma server at {settings.chroma_url} ({exc}); start it with "
                f"`chroma run --path ./data/chroma --port {port}` or unset BRAIN_CHROMA_URL to use the embedded store"
            ) from exc
    # absolute: chromadb shares one client per path *string*, so "data/chroma" opened from two working
    # directories (or once relative, once absolute) would otherwise get the wrong store
    path = (settings.data_dir / "chroma").resolve()
    if not create and not settings.has_embedded_store():
        raise missing_store(settings)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailable(f"cannot create the data directory {path}: {exc}; set BRAIN_DATA_DIR") from exc
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


def missing_store(settings: Settings) -> StoreNotFound:
    """The error for a store that does not exist: where brain looked and how to make one."""
    make = "create it with `brain init` (or `brain ingest PATH`)"
    if settings.chroma_url:
        return StoreNotFound(f"the Chroma server at {settings.chroma_url} has no collection {settings.collection!r}; "
                             f"{make}, or set BRAIN_COLLECTION to an existing one")
    return StoreNotFound(
        f"there is no brain store in {settings.data_dir} (the data directory, from {settings.origin('data_dir')}); "
        f"{make}, or point --data-dir or BRAIN_DATA_DIR at an existing store"
    )


try:  # the HTTP client's transport errors (chromadb's HttpClient uses httpx)
    import httpx

    _UNREACHABLE: tuple[type[BaseException], ...] = (ConnectionError, httpx.TransportError)
except ImportError:  # pragma: no cover - httpx comes with chromadb
    _UNREACHABLE = (ConnectionError,)


class GuardedCollection:
    """The Chroma collection, except that its failures are brain's errors: losing the server raises
    :class:`StoreUnavailable`, anything else Chroma raises :class:`StoreError` naming the call."""

    def __init__(self, collection: Any, where: str):
        from chromadb.errors import InternalError, NotFoundError

        self._collection = collection
        self._where = where
        self._internal, self._gone = InternalError, NotFoundError

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except _UNREACHABLE as exc:
                raise StoreUnavailable(
                    f"the Chroma store at {self._where} is unreachable ({exc}); check that `chroma run` is up"
                ) from exc
            except BrainError:
                raise
            except Exception as exc:  # chromadb's own classes, and the ValueErrors of its client-side checks
                raise self._translate(name, exc) from exc

        return call

    def _translate(self, name: str, exc: Exception) -> StoreError:
        what = f"collection.{name}() on the Chroma store at {self._where}"
        if isinstance(exc, self._internal):
            return StoreError(
                f"Chroma failed internally in {what}: {exc}. Check the disk space and the Chroma server's log; "
                f"if every call fails, the collection is damaged: move its directory aside and rebuild it with "
                f"`brain restore --from-mirror`"
            )
        if isinstance(exc, self._gone):
            return StoreError(f"{what}: the collection no longer exists ({exc}); was it deleted by another "
                              f"process? Restart to create it again")
        return StoreError(f"Chroma refused {what}: {type(exc).__name__}: {exc}")


def open_cosine_collection(client: Any, name: str, embedder: Embedder, *, switch: str, rename: str,
                           **meta_on_create: Any) -> Any:
    """Open (or create) collection ``name`` for ``embedder``'s vectors, in the cosine space.

    A new collection records the embedder's name and dimension; an existing one must record the same
    embedder, since vectors of two models never mix. ``switch`` and ``rename`` finish the error
    messages (what to change when the embedder differs; how to pick another collection)."""
    try:
        col = client.get_or_create_collection(name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    except Exception as exc:  # connection or server errors from chromadb
        raise StoreUnavailable(f"cannot open Chroma collection {name!r}: {exc}") from exc
    meta = dict(col.metadata or {})
    space = ((getattr(col, "configuration", None) or {}).get("hnsw") or {}).get("space", "cosine")
    if space != "cosine":
        raise EmbeddingModelMismatch(f"collection {name!r} uses the {space!r} distance; brain needs 'cosine': {rename}")
    recorded = meta.get("embedder")
    if recorded is None:
        if col.count() > 0:
            raise EmbeddingModelMismatch(
                f"collection {name!r} already holds records but names no embedder, so their vector space is "
                f"unknown; {rename}"
            )
        meta.update(embedder=embedder.name, dimension=int(embedder.dimension), **meta_on_create)
        col.modify(metadata=meta)
    elif recorded != embedder.name:
        if col.count() == 0 and _fixed_dimension(col) in (None, int(embedder.dimension)):
            # nothing was ever stored with the recorded embedder (e.g. its first write failed because
            # Ollama was down): the empty collection takes the current one
            log.info("collection %r is empty: re-bound from embedder %s to %s", name, recorded, embedder.name)
            meta.update(embedder=embedder.name, dimension=int(embedder.dimension))
            col.modify(metadata=meta)
            return col
        raise EmbeddingModelMismatch(
            f"collection {name!r} was built with embedder {recorded} ({meta.get('dimension')}-d) but BRAIN_EMBEDDER "
            f"is {embedder.name}; vectors from different models cannot be mixed. {switch}"
        )
    return col


def _fixed_dimension(col: Any) -> int | None:
    """The vector dimension Chroma fixed for a collection with its first record (it stays after every
    record is deleted), or None while it has never held one."""
    dimension = getattr(getattr(col, "_model", None), "dimension", None)
    return int(dimension) if isinstance(dimension, int) else None


class RagStore:
    """Typed documents in one Chroma collection, with exact memory ranking.

    ``col`` is the underlying Chroma collection, for direct queries. Writes through ``col``
    bypass validation and the in-process state (indexes, cached turns); call
    :meth:`refresh_index` after such writes.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        client: Any | None = None,
        mirror: EngramMirror | bool | None = None,
        create: bool = True,
    ):
        """``create=False``: raise :class:`StoreNotFound` rather than create a store that does not exist."""
        self.settings = settings or Settings()
        self.embedder = embedder or get_embedder(self.settings)
        self.weights = ScoreWeights.from_settings(self.settings)
        self._lock = threading.RLock()
        self._indexes: dict[str, MemoryIndex] | None = None
        # turns of recently used conversations: conversation id -> {doc id: Document}, and doc id -> conversation
        self._conversations: LRUCache[str, dict[str, Document]] = LRUCache(_CONVERSATIONS_CACHED)
        self._turn_conversation: dict[str, str] = {}
        self._expected_count: int | None = None  # collection size when the in-process state was last in step
        self._last_check = 0.0
        # embedded Chroma is single-process: claim the data directory before opening it
        self._dir_lock: DataDirLock | None = None
        if client is None and not self.settings.chroma_url:
            if not create and not self.settings.has_embedded_store():
                raise missing_store(self.settings)  # before the lock, which would create the directory
            self._dir_lock = DataDirLock(self.settings.data_dir).acquire()
        try:
            self.client = client or open_client(self.settings, create=create)
            if not create and self.settings.collection not in {c.name for c in self.client.list_collections()}:
                raise missing_store(self.settings)
            self.col = GuardedCollection(self._open_collection(), self.settings.chroma_url or "the data directory")
            self.dimension = int(self.col.metadata["dimension"])
            self.max_batch_size = int(self.client.get_max_batch_size())
            self.mirror = self._open_mirror(mirror)
            self._mirror_types = frozenset(self.settings.mirrored_types)
            self._mirror_paused = False
            self._own_mirror = mirror is None or mirror is True
            # a write a dead process left half done is rolled back before anything reads the store
            self._intents = WriteIntentLog(self.settings.data_dir)
            self._intents.resolve(self._roll_back)
            migrate_typed_fields(self.col, self.max_batch_size, self.mirror if "memory" in self._mirror_types else None)
        except BaseException:
            self.close()
            raise

    def _open_mirror(self, mirror: EngramMirror | bool | None) -> EngramMirror | None:
        """The mirror, or None when it is off or damaged: Chroma is the store, so a damaged mirror is
        recorded in ``mirror_health`` (and logged with its fix) rather than refusing to open."""
        if isinstance(mirror, EngramMirror):
            if mirror.model != self.embedder.name:
                raise EmbeddingModelMismatch(
                    f"the mirror keeps {mirror.model} vectors but the store embeds with {self.embedder.name}"
                )
            self.mirror_health = MirrorHealth(mirror.path)
            return mirror
        if mirror is False or (mirror is None and not self.settings.mirror_enabled):
            self.mirror_health = MirrorHealth(None, enabled=False)
            return None
        self.mirror_health = MirrorHealth(self.settings.mirror_file)
        try:
            return EngramMirror(self.settings.mirror_file, self.embedder.name, batch_size=self.settings.mirror_batch_size)
        except MirrorCorrupt as exc:
            self.mirror_health.broke(exc)
            return None

    def close(self) -> None:
        """Close the mirror (when this store opened it) and release the data directory for other
        processes. The store must not be used afterwards."""
        mirror = getattr(self, "mirror", None)
        if mirror is not None and getattr(self, "_own_mirror", True):
            mirror.close()
        self.mirror = None
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    def __enter__(self) -> "RagStore":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ---- collection ----------------------------------------------------------------------------
    def _open_collection(self):
        return open_cosine_collection(
            self.client, self.settings.collection, self.embedder, schema_version=1,
            switch=("Set BRAIN_EMBEDDER to the recorded embedder, or point BRAIN_DATA_DIR / BRAIN_COLLECTION at a "
                    "new store (re-indexing an existing store is not supported yet)"),
            rename="use another BRAIN_COLLECTION or BRAIN_DATA_DIR",
        )

    # ---- validation ---------------------------------------------------------------------------
    def _check_embedding(self, value: Any) -> tuple[np.ndarray | None, str | None]:
        try:
            vec = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError):
            return None, "embedding must be a list of numbers"
        if vec.ndim != 1 or vec.shape[0] != self.dimension:
            got = vec.shape[0] if vec.ndim == 1 else f"shape {vec.shape}"
            return None, f"embedding has {got} dimensions; this collection stores {self.dimension}-d vectors"
        if not np.isfinite(vec).all():
            return None, "embedding contains NaN or Inf values"
        if not np.any(vec):
            return None, "embedding is all zeros"
        return to_unit_length(vec)[0], None

    def _prepare(self, docs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Validate a whole batch; raise one ValidationError listing every problem, or return it prepared."""
        if isinstance(docs, Mapping) or not isinstance(docs, Sequence):
            raise ValidationError("documents must be a list of dicts", [{"item": None, "field": "docs", "message": "not a list"}])
        now = utc_now()
        prepared: list[dict[str, Any]] = []
        problems: list[dict[str, Any]] = []
        for i, raw in enumerate(docs):
            if not isinstance(raw, Mapping):
                problems.append({"item": i, "field": "document", "message": f"document must be a dict, got {type(raw).__name__}"})
                continue
            data = dict(raw)
            text = data.pop("text", None)
            doc_type = data.pop("type", None)
            doc_id = data.pop("id", None)
            embedding = data.pop("embedding", None)
            item_problems = []
            if not isinstance(text, str) or not text.strip():
                item_problems.append({"field": "text", "message": "text must be a non-empty string"})
            if doc_id is not None and (not isinstance(doc_id, str) or not doc_id.strip()):
                item_problems.append({"field": "id", "message": f"id must be a non-empty string, got {doc_id!r}"})
            if data.get("timestamp") is None:
                data["timestamp"] = now
            if data.get("scope") is None:
                data.pop("scope", None)
            if data.get("source") is None:
                data.pop("source", None)
            meta = None
            try:
                meta = validate_metadata(doc_type, data)
            except ValidationError as exc:
                item_problems.extend({"field": p["field"], "message": p["message"]} for p in exc.problems or [{"field": "metadata", "message": str(exc)}])
            vec = None
            if embedding is not None:
                vec, problem = self._check_embedding(embedding)
                if problem:
                    item_problems.append({"field": "embedding", "message": problem})
            if item_problems:
                problems.extend({"item": i, **p} for p in item_problems)
                continue
            prepared.append({"id": doc_id, "text": text, "meta": meta, "embedding": vec})
        if problems:
            if len(docs) == 1:
                message = "; ".join(p["message"] for p in problems)
            else:
                message = "; ".join(f"item {p['item']}: {p['message']}" for p in problems)
            raise ValidationError(f"{message} (nothing was written)", problems)
        return prepared

    # ---- writes -------------------------------------------------------------------------------
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

    def upsert_docs(self, docs: Sequence[Mapping[str, Any]]) -> list[str]:
        """Store a batch ``[{"text", "type", **metadata}, ...]``; all or nothing. Returns ids in input order.

        A memory whose id (from its scope and text, case and whitespace aside) is stored already is
        the same memory: it keeps its first text, vector and creation time (``created_at``, else its
        first timestamp); importance becomes the higher one, tags the union, the timestamp and last
        use the later ones; other fields the new write gives replace the old. A write that would
        change nothing but the time writes nothing."""
        return self._upsert(docs, merge_memories=True)

    def _upsert(self, docs: Sequence[Mapping[str, Any]], *, merge_memories: bool) -> list[str]:
        prepared = self._prepare(docs)
        if not prepared:
            return []
        with self._lock:
            stored: dict[str, tuple[str, dict[str, Any]] | None] = {}  # what Chroma holds, read once per id
            self._assign_ids(prepared, stored)
            self._assign_positions(prepared)
            unique = self._merge_duplicates(prepared)
            if merge_memories:
                unique = self._merge_existing_memories(unique, stored)
            if unique:
                self._embed_missing(unique)
                self._write(unique)
        return [p["id"] for p in prepared]

    def _stored(self, ids: Iterable[str], known: dict[str, tuple[str, dict[str, Any]] | None]) -> dict:
        """``known`` completed with (document, metadata) as Chroma holds them for ``ids`` (None when
        absent): the steps of one write share these reads, so each id is fetched once."""
        missing = [i for i in dict.fromkeys(ids) if i not in known]
        for start in range(0, len(missing), self.max_batch_size):  # Chroma caps the ids of one get
            part = missing[start : start + self.max_batch_size]
            got = self.col.get(ids=part, include=["documents", "metadatas"])
            found = dict(zip(got["ids"], zip(got["documents"] or [], got["metadatas"] or [])))
            known.update((i, found.get(i)) for i in part)
        return known

    def update_memory(
        self,
        doc_id: str,
        text: str | None = None,
        *,
        importance: int | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace_metadata: bool = False,
        timestamp: datetime | str | None = None,
        entity: str | None = None,
    ) -> Document:
        """Change one memory in place, keeping its id; returns it as stored.

        Unlike writing the same text again (which merges: higher importance, united tags), the
        given values replace the old ones. ``metadata`` adds or overwrites extra keys (with
        ``replace_metadata=True`` it replaces all extra keys); it cannot hold the reserved keys
        (:data:`brain.schemas.RESERVED_KEYS`): a memory's scope never changes here, and its vector is
        always the store's embedding of its text. A new ``text`` is embedded again; the timestamp
        becomes ``timestamp`` or now (``created_at`` keeps the first one). Raises :class:`NotFound`
        for an unknown id, and, with ``entity``, for a memory that entity cannot see (see
        :func:`brain.memories.visible_scopes`).
        """
        extra = check_extra_metadata(metadata, call="update_memory")
        visible = readable_scopes(entity)
        with self._lock:
            docs = self.get([doc_id], type=DocType.MEMORY, include_embeddings=True, entity=entity)
            if not docs:
                raise NotFound(f"no memory with id {doc_id!r}" + (f" visible to entity {entity!r}" if visible else ""))
            old = docs[0]
            old_meta, problems = read_stored(DocType.MEMORY, old.metadata)
            if old_meta is None:
                raise ValidationError(
                    f"memory {doc_id!r} as stored cannot be read ({'; '.join(problems.values())}); delete it and "
                    f"store it again (nothing was written)")
            meta = old_meta.model_dump(by_alias=True, exclude_none=True)
            meta["created_at"] = created(old_meta)
            if replace_metadata:
                keep = {field.alias or name for name, field in type(old_meta).model_fields.items()}
                meta = {k: v for k, v in meta.items() if k in keep}
            meta.update(extra)
            if importance is not None:
                meta["importance"] = importance
            if tags is not None:
                meta["tags"] = list(tags) if not isinstance(tags, str) else tags
            meta["timestamp"] = timestamp if timestamp is not None else utc_now()
            new_text = old.text if text is None else text
            doc = {**meta, "text": new_text, "id": doc_id, "type": DocType.MEMORY.value}
            if text is None or text == old.text:
                doc["embedding"] = old.embedding
            self._upsert([doc], merge_memories=False)
            return self.get_one(doc_id)

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

    def upsert_turn(
        self,
        conversation_id: str,
        user_text: str,
        assistant_text: str,
        user_ts: datetime | str | None = None,
        assistant_ts: datetime | str | None = None,
        source: str = "chat",
        **meta: Any,
    ) -> tuple[str, str]:
        """Store one exchange as two turn documents with consecutive ``turn_index``; returns both ids."""
        now = utc_now()
        docs = [
            {"text": user_text, "type": DocType.TURN, "conversation_id": conversation_id, "role": "user",
             "timestamp": user_ts or now, "source": source, **meta},
            {"text": assistant_text, "type": DocType.TURN, "conversation_id": conversation_id, "role": "assistant",
             "timestamp": assistant_ts or user_ts or now, "source": source, **meta},
        ]
        user_id, assistant_id = self.upsert_docs(docs)
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
            text, DocType.SUMMARY, timestamp=timestamp, source=source, conversation_id=conversation_id,
            turn_range=turn_range, summary_index=summary_index, **meta,
        )

    def _assign_ids(self, prepared: list[dict[str, Any]], stored: dict) -> None:
        for p in prepared:
            if p["id"] is None:
                meta = p["meta"]
                if meta.type == DocType.MEMORY.value:
                    p["id"] = memory_id(p["text"], meta.scope)
                    p["derived"] = True
                else:
                    p["id"] = new_id()
        self._avoid_rewritten_ids([p for p in prepared if p.get("derived")], stored)

    def _avoid_rewritten_ids(self, derived: list[dict[str, Any]], stored: dict) -> None:
        """A derived memory id whose stored memory now has another text (changed in place by
        update_memory) belongs to that memory: the new text takes the next derived id whose memory
        is absent or has this very text, so writing it never overwrites the changed memory."""
        for attempt in range(1, 50):
            if not derived:
                return
            self._stored((p["id"] for p in derived), stored)
            taken = [p for p in derived if stored[p["id"]] is not None
                     and not same_text(stored[p["id"]][0] or "", p["text"])]
            for p in taken:
                p["id"] = memory_id(p["text"], p["meta"].scope, attempt)
            derived = taken
        raise BrainError("could not find a free id for a memory after 50 attempts")  # pragma: no cover

    def _assign_positions(self, prepared: list[dict[str, Any]]) -> None:
        """Give turns and summaries without an index the next one in their conversation."""
        fields = {DocType.TURN.value: "turn_index", DocType.SUMMARY.value: "summary_index"}
        next_free: dict[tuple[str, str], int] = {}
        for p in prepared:
            meta = p["meta"]
            field = fields.get(meta.type)
            if field is None or getattr(meta, field) is not None:
                continue
            key = (meta.type, meta.conversation_id)
            if key not in next_free:
                if meta.type == DocType.TURN.value:
                    existing = [d.metadata for d in self._turns(meta.conversation_id)]
                else:
                    existing = [m for page in self._get_pages(
                        to_chroma_where(None, type=meta.type, conversation_id=meta.conversation_id), ["metadatas"]
                    ) for m in page["metadatas"]]
                taken = [int(m.get(field) or 0) for m in existing]
                taken += [getattr(q["meta"], field) or 0 for q in prepared
                          if q["meta"].type == meta.type and getattr(q["meta"], "conversation_id", None) == meta.conversation_id]
                next_free[key] = max(taken, default=0) + 1
            setattr(meta, field, next_free[key])
            next_free[key] += 1

    def _merge_duplicates(self, prepared: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One entry per id (Chroma refuses repeated ids in one call); memories merge (the first
        spelling of the text is kept), others: last wins."""
        by_id: dict[str, dict[str, Any]] = {}
        for p in prepared:
            prev = by_id.get(p["id"])
            if prev is not None and prev["meta"].type == p["meta"].type == DocType.MEMORY.value:
                merged = merge_duplicate(prev["meta"], p["meta"])
                p = {**prev, "meta": merged} if same_text(prev["text"], p["text"]) else {**p, "meta": merged}
            by_id[p["id"]] = p
        return list(by_id.values())

    def _merge_existing_memories(self, unique: list[dict[str, Any]], stored: dict) -> list[dict[str, Any]]:
        """Memories already stored under their id merge with the stored version; returns ``unique``
        without the writes that would change nothing but the time (writing a memory again that adds
        nothing writes nothing)."""
        ids = [p["id"] for p in unique if p["meta"].type == DocType.MEMORY.value]
        if not ids:
            return unique
        self._stored(ids, stored)
        _refuse_scope_moves(unique, stored)
        keep_vector: list[dict[str, Any]] = []
        out = []
        for p in unique:
            text, old = stored.get(p["id"]) or (None, None)
            if not (old and old.get("type") == DocType.MEMORY.value and p["meta"].type == DocType.MEMORY.value):
                out.append(p)
                continue
            old_model, problems = read_stored(DocType.MEMORY, old)
            if old_model is None:  # unreadable as stored: the new write replaces it
                log.warning("memory %s as stored cannot be read (%s); replaced by the new write",
                            p["id"], "; ".join(problems.values()))
                out.append(p)
                continue
            p["meta"] = merge_duplicate(old_model, p["meta"])
            if same_text(text or "", p["text"]):
                if not problems and _same_content(old_model, p["meta"]):
                    continue
                p["text"] = text  # the first spelling stays, and with it the stored vector
                keep_vector.append(p)
            out.append(p)
        self._stored_vectors(keep_vector)
        return out

    def _stored_vectors(self, items: list[dict[str, Any]]) -> None:
        """Give ``items`` the vectors Chroma holds for their ids."""
        for start in range(0, len(items), self.max_batch_size):
            part = items[start : start + self.max_batch_size]
            got = self.col.get(ids=[p["id"] for p in part], include=["embeddings"])
            vectors = dict(zip(got["ids"], got["embeddings"]))
            for p in part:
                if p["id"] in vectors:
                    p["embedding"] = np.asarray(vectors[p["id"]], dtype=np.float32)

    def _embed_missing(self, unique: list[dict[str, Any]]) -> None:
        todo = [p for p in unique if p["embedding"] is None]
        if not todo:
            return
        vectors = self.embedder.embed_documents([p["text"] for p in todo])
        if vectors.shape != (len(todo), self.dimension):
            raise BrainError(
                f"embedder {self.embedder.name} returned vectors of shape {vectors.shape}, "
                f"expected ({len(todo)}, {self.dimension})"
            )
        for p, vec in zip(todo, vectors):
            p["embedding"] = vec

    def _write(self, unique: list[dict[str, Any]]) -> None:
        ids = [p["id"] for p in unique]
        metas = [p["meta"].to_chroma() for p in unique]
        texts = [p["text"] for p in unique]
        vectors = np.stack([p["embedding"] for p in unique]).astype(np.float32, copy=False)
        self._resolve_kept_intents()
        prior = self._snapshot(ids)
        payload = self._replacing(ids, metas, prior)
        # on disk before Chroma sees the write, so that a crash in it is rolled back (brain.write_intents)
        intent = self._intents.begin(upserted=ids, prior=prior, mirrored=not self._mirror_paused)
        chroma_written = False
        try:
            with self._mirroring(ids, texts, metas, vectors):
                self._write_chroma(intent, ids, texts, payload, vectors)
                chroma_written = True
        except BaseException as exc:
            # a no-op when _write_chroma settled it; else Chroma was never called, or took the whole
            # write (which stands: only the mirror's commit failed, and a sync catches it up)
            intent.done()
            if not chroma_written:
                raise
            self._after_write(ids, vectors, texts, metas)
            if not isinstance(exc, Exception):
                raise
            raise StoreUnavailable(
                f"the {len(ids)} documents were written to Chroma but the mirror could not be updated ({exc}); "
                f"run `brain mirror sync` once the mirror file is writable again"
            ) from exc
        intent.done()
        self._after_write(ids, vectors, texts, metas)

    @contextmanager
    def mirror_paused(self) -> Iterator[None]:
        """Writes inside the block skip the mirror (e.g. while restoring the store from it)."""
        with self._lock:
            paused, self._mirror_paused = self._mirror_paused, True
            try:
                yield
            finally:
                self._mirror_paused = paused

    @contextmanager
    def _mirroring(self, ids, texts, metas, vectors) -> Iterator[None]:
        """Write-through to the mirror: its rows are written first in an open SQLite transaction, which
        commits only after the Chroma write succeeded (and rolls back when it failed)."""
        if self._mirror_paused:
            yield
            return
        mirrored = [j for j, m in enumerate(metas) if m.get("type") in self._mirror_types]
        others = [ids[j] for j, m in enumerate(metas) if m.get("type") not in self._mirror_types]

        def write(mirror: EngramMirror) -> None:
            if others:
                mirror.delete(others)  # an id may have changed to a type that is not mirrored
            if mirrored:
                mirror.upsert(
                    {"id": ids[j], "text": texts[j], "metadata": from_chroma(metas[j]), "embedding": vectors[j]}
                    for j in mirrored
                )

        with self._mirror_write(write, len(mirrored), "written"):
            yield

    @contextmanager
    def _mirror_write(self, write, count: int, action: str) -> Iterator[None]:
        """``write(mirror)`` in a mirror transaction around the block (the Chroma write), committed after it.

        A damaged mirror never fails the write: it is switched off, the block runs against Chroma alone,
        and ``mirror_health`` counts the ``count`` documents the mirror missed (as it does for every write
        while the mirror is off after damage). Any other error of the block rolls the mirror back.
        """
        mirror = self.mirror
        if mirror is None:
            self.mirror_health.missed(count, action)
            yield
            return
        stage = "mirror"
        try:
            with mirror.transaction():
                write(mirror)
                stage = "block"
                yield
                stage = "commit"
        except MirrorCorrupt as exc:
            if stage == "block":  # not the mirror's failure
                raise
            self._mirror_broke(exc)
            self.mirror_health.missed(count, action)
        if stage == "mirror":  # the mirror failed before the block ran: it runs without it
            yield
        # after a failed commit Chroma has the write; the mirror rolled it back and is now off

    def _mirror_broke(self, error: MirrorCorrupt) -> None:
        """Switch a damaged mirror off (see :mod:`brain.mirror.integrity`)."""
        self.mirror_health.broke(error)
        if self.mirror is not None and self._own_mirror:
            self.mirror.close()
        self.mirror = None

    def _write_chroma(self, intent: WriteIntent, ids, texts, payload, vectors) -> None:
        """Chroma's upserts, one per max batch. When one fails, the chunks tried so far are rolled
        back from ``intent`` before the error is raised; if even that fails, the intent is kept and
        rolled back before this store's next write or at the next open."""
        self._chroma_calls(intent, len(ids), "writing", lambda start, end: self.col.upsert(
            ids=ids[start:end], embeddings=vectors[start:end], documents=texts[start:end], metadatas=payload[start:end]))

    def _chroma_calls(self, intent: WriteIntent, n: int, doing: str, call) -> None:
        """``call(start, end)`` for each max batch of ``n`` items, settling ``intent`` when one fails."""
        try:
            for start in range(0, n, self.max_batch_size):
                call(start, start + self.max_batch_size)
        except BaseException as exc:
            try:
                self._roll_back(intent, chroma_only=True)
            except BaseException as undo_exc:
                intent.keep()
                if not isinstance(exc, Exception):
                    raise
                raise StoreUnavailable(
                    f"{doing} {n} documents in Chroma failed: {exc}; undoing the part written failed too "
                    f"({undo_exc}): it is undone before the next write, or when the store is next opened"
                ) from exc
            intent.done()
            if not isinstance(exc, Exception):
                raise
            raise StoreUnavailable(f"{doing} {n} documents in Chroma failed: {exc}; nothing was written") from exc

    def _replacing(self, ids: list[str], metas: list[dict[str, Any]],
                   prior: Mapping[str, PriorVersion]) -> list[dict[str, Any]]:
        """Metadata that replaces what is stored. Chroma's upsert merges metadata into the old one, so a
        key the new version lacks (an extra key dropped, tags emptied) is sent as None, which removes it."""
        payload = []
        for doc_id, meta in zip(ids, metas):
            old = prior[doc_id].metadata if doc_id in prior else {}
            stale = [k for k in old if k not in meta]
            payload.append({**meta, **dict.fromkeys(stale)} if stale else meta)
        return payload

    def _snapshot(self, ids: Sequence[str]) -> dict[str, PriorVersion]:
        """What Chroma holds for ``ids`` now (absent ids are left out): what undoes a write to them."""
        snap = {}
        ids = list(dict.fromkeys(ids))
        for start in range(0, len(ids), self.max_batch_size):
            got = self.col.get(ids=ids[start : start + self.max_batch_size], include=["documents", "metadatas", "embeddings"])
            for i, d, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"]):
                snap[i] = PriorVersion(d, dict(m or {}), np.asarray(e, dtype=np.float32))
        return snap

    def _resolve_kept_intents(self) -> None:
        """Roll back what an earlier write of this process left half done (its undo had failed), before a
        new write: rolled back later, its record would undo the new write's ids too."""
        if self._intents.has_kept:
            self._intents.resolve(self._roll_back)

    def _roll_back(self, intent: WriteIntent, *, chroma_only: bool = False) -> None:
        """Undo ``intent`` in Chroma (ids it inserted deleted, previous versions written back), then make
        the mirror agree with Chroma for its ids. Idempotent, so a crash during it is harmless."""
        inserted = intent.inserted
        for start in range(0, len(inserted), self.max_batch_size):
            self.col.delete(ids=inserted[start : start + self.max_batch_size])
        old = list(intent.prior)
        for start in range(0, len(old), self.max_batch_size):
            part = old[start : start + self.max_batch_size]
            got = self.col.get(ids=part, include=["metadatas"])
            current = dict(zip(got["ids"], got["metadatas"] or []))
            metadatas = []
            for i in part:
                version = intent.prior[i].metadata
                # Chroma merges metadata on upsert: keys the undone write added are removed (None)
                added = [k for k in (current.get(i) or {}) if k not in version]
                metadatas.append({**dict.fromkeys(added), **version} if added else version)
            self.col.upsert(ids=part, documents=[intent.prior[i].document for i in part], metadatas=metadatas,
                            embeddings=np.stack([intent.prior[i].embedding for i in part]))
        # the in-process state needs nothing: it takes a write only once the write is done
        if intent.mirrored and not chroma_only:
            self._mirror_agree(intent.ids)

    def _mirror_agree(self, ids: list[str]) -> None:
        """The mirror's rows for ``ids`` as Chroma holds them: copied when of a mirrored type, else gone."""
        if self.mirror is None:
            return
        rows: dict[str, tuple[str, dict[str, Any], np.ndarray]] = {}
        for start in range(0, len(ids), self.max_batch_size):
            got = self.col.get(ids=ids[start : start + self.max_batch_size], include=["documents", "metadatas", "embeddings"])
            for i, d, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"]):
                if (m or {}).get("type") in self._mirror_types:
                    rows[i] = (d or "", m, np.asarray(e, dtype=np.float32))
        gone = [i for i in ids if i not in rows]
        try:
            with self.mirror.transaction():
                if gone:
                    self.mirror.delete(gone)
                if rows:
                    self.mirror.upsert({"id": i, "text": d, "metadata": from_chroma(m), "embedding": e}
                                       for i, (d, m, e) in rows.items())
        except MirrorCorrupt as exc:
            self._mirror_broke(exc)

    def _after_write(self, ids, vectors, texts, metas) -> None:
        """Bring the in-process state (indexes, cached conversations) in step with a write."""
        self._forget_turns(ids)  # an id may have changed type or conversation
        for doc_id, text, meta in zip(ids, texts, metas):
            cached = self._conversations.peek(meta.get("conversation_id")) if meta.get("type") == DocType.TURN.value else None
            if cached is not None:
                cached[doc_id] = Document(id=doc_id, text=text, metadata=from_chroma(meta))
                self._turn_conversation[doc_id] = meta["conversation_id"]
        for doc_type, index in (self._indexes or {}).items():
            mine = [j for j, m in enumerate(metas) if m.get("type") == doc_type]
            others = [ids[j] for j, m in enumerate(metas) if m.get("type") != doc_type]
            if others:
                index.remove(others)  # an id may have changed type
            if mine:
                index.upsert([ids[j] for j in mine], vectors[mine], [texts[j] for j in mine], [metas[j] for j in mine])
        self._mark_in_step()

    def _forget_turns(self, ids: Iterable[str]) -> None:
        for doc_id in ids:
            conversation = self._turn_conversation.pop(doc_id, None)
            turns = self._conversations.peek(conversation) if conversation is not None else None
            if turns is not None:
                turns.pop(doc_id, None)

    def _mark_in_step(self) -> None:
        """Remember the collection's size while the in-process state matches it (see _check_outside_changes)."""
        if self._indexes is not None or self._conversations:
            self._expected_count = self.col.count()

    # ---- reads --------------------------------------------------------------------------------
    def _get_pages(self, where: dict[str, Any] | None, include: list[str], limit: int | None = None,
                   offset: int | None = None):
        """``col.get`` in pages: one unbounded get over tens of thousands of documents fails in
        Chroma's SQLite layer ("too many SQL variables"). Yields Chroma result dicts."""
        page_size = max(1, min(self.max_batch_size, _PAGE))
        start = offset or 0
        remaining = limit
        while remaining is None or remaining > 0:
            size = page_size if remaining is None else min(page_size, remaining)
            page = self.col.get(where=where, include=include, limit=size, offset=start)
            got = len(page["ids"])
            if got:
                yield page
            if got < size:
                return
            start += got
            if remaining is not None:
                remaining -= got

    def _ids_where(self, where: dict[str, Any] | None) -> list[str]:
        return [i for page in self._get_pages(where, []) for i in page["ids"]]

    def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: dict[str, Any] | None = None,
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
        doc_type = _type_value(type)
        include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        scopes = readable_scopes(entity)
        if ids is not None:
            ids = list(ids)
            pages = self._get_by_ids(ids, where, doc_type, to_chroma_where(where, type=doc_type), include)
            if scopes is not None:
                pages = [_keep_scopes(page, scopes) for page in pages]
            if limit is not None or offset is not None:
                pages = [_slice_page(_merge_pages(pages), offset or 0, limit)]
        else:
            pages = self._get_pages(to_chroma_where(where, type=doc_type, scope=scopes), include, limit, offset)
        docs = [
            Document(
                id=i, text=d or "", metadata=from_chroma(m),
                embedding=np.asarray(e, dtype=np.float32) if include_embeddings else None,
            )
            for page in pages
            for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"],
                                  page.get("embeddings") if include_embeddings else [None] * len(page["ids"]))
        ]
        if ids is not None:
            order = {i: n for n, i in enumerate(ids)}
            docs.sort(key=lambda doc: order.get(doc.id, len(order)))
        return docs

    def _get_by_ids(self, ids: list[str], where: dict[str, Any] | None, doc_type: str | None,
                    chroma_where: dict[str, Any] | None, include: list[str]) -> list[dict[str, Any]]:
        """Pages of the given ids. A type alone is checked here, not by Chroma: Chroma applies a
        ``where`` by scanning metadata, which costs about 100 ms at 100k documents even for one id."""
        by_type = where is None and doc_type is not None
        pages = [
            self.col.get(ids=ids[s : s + self.max_batch_size], where=None if by_type else chroma_where, include=include)
            for s in range(0, len(ids), self.max_batch_size)
        ]
        if by_type:
            pages = [_keep_type(page, doc_type) for page in pages]
        return pages

    def get_one(self, doc_id: str) -> Document:
        docs = self.get([doc_id])
        if not docs:
            raise NotFound(f"no document with id {doc_id!r}")
        return docs[0]

    def delete(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: dict[str, Any] | None = None,
        type: str | DocType | None = None,
        entity: str | None = None,
    ) -> int:
        """Delete by ids and/or filter; returns how many documents were removed. With ``entity``,
        only documents that entity may see (its own scope and the global one) are deleted."""
        if ids is None and where is None and type is None:
            raise ValidationError("delete needs ids, where or type; refusing to delete everything")
        if isinstance(ids, str):
            ids = [ids]
        scopes = readable_scopes(entity)
        with self._lock:
            if ids is not None:
                ids = list(ids)
                by_type = where is None and type is not None
                include = ["metadatas"] if by_type or scopes is not None else []
                pages = self._get_by_ids(ids, where, _type_value(type), to_chroma_where(where, type=_type_value(type)),
                                         include)
                if scopes is not None:
                    pages = [_keep_scopes(page, scopes) for page in pages]
                found = [i for page in pages for i in page["ids"]]
            else:
                found = self._ids_where(to_chroma_where(where, type=_type_value(type), scope=scopes))
            if found:
                self._delete_found(found)
            for index in (self._indexes or {}).values():
                index.remove(found)
            self._forget_turns(found)
            self._mark_in_step()
        return len(found)

    def _delete_found(self, found: list[str]) -> None:
        """Delete ``found`` from Chroma and the mirror, all or nothing (see :mod:`brain.write_intents`)."""
        self._resolve_kept_intents()
        intent = self._intents.begin(deleted=found, prior=self._snapshot(found))
        try:
            with self._mirror_write(lambda mirror: mirror.delete(found), len(found), "deleted"):
                self._chroma_calls(intent, len(found), "deleting",
                                   lambda start, end: self.col.delete(ids=found[start:end]))
        finally:
            intent.done()  # no-op when the Chroma calls settled it

    def count(self, type: str | DocType | None = None, *, where: dict[str, Any] | None = None) -> int:
        doc_type = _type_value(type)
        if doc_type is None and where is None:
            return self.col.count()
        return sum(len(page["ids"]) for page in self._get_pages(to_chroma_where(where, type=doc_type), []))

    # ---- the in-process indexes ---------------------------------------------------------------
    def refresh_index(self) -> MemoryIndex:
        """Rebuild the in-process indexes from Chroma (after writes that bypassed this store).

        Returns the memory index.
        """
        with self._lock:
            self._conversations.clear()
            self._turn_conversation.clear()
            types = list(self.settings.indexed_types)
            indexes = {t: MemoryIndex(self.dimension) for t in types}
            where = {"type": types[0]} if len(types) == 1 else {"type": {"$in": types}}
            sizes: dict[str, int] = {}
            for page in self._get_pages(where, ["metadatas"]):  # one pass to size every index once
                for meta in page["metadatas"]:
                    sizes[meta.get("type")] = sizes.get(meta.get("type"), 0) + 1
            for doc_type, index in indexes.items():
                index.reserve(sizes.get(doc_type, 0))
            for page in self._get_pages(where, ["documents", "metadatas", "embeddings"]):
                vectors = np.asarray(page["embeddings"], dtype=np.float32)
                for doc_type, index in indexes.items():
                    rows = [j for j, m in enumerate(page["metadatas"]) if m and m.get("type") == doc_type]
                    if rows:
                        index.upsert(
                            [page["ids"][j] for j in rows], vectors[rows],
                            [page["documents"][j] or "" for j in rows], [page["metadatas"][j] for j in rows],
                        )
            self._indexes = indexes
            self._expected_count = self.col.count()
            self._last_check = time.monotonic()
            return indexes[DocType.MEMORY.value]

    def _index_for(self, doc_type: str) -> MemoryIndex | None:
        """The in-process index of ``doc_type`` (built on first use, rebuilt when the collection
        changed behind our back), or None when that type is searched through Chroma."""
        if doc_type not in self.settings.indexed_types:
            return None
        if self._indexes is None:
            self.refresh_index()
        else:
            self._check_outside_changes()
        return self._indexes[doc_type]

    def _check_outside_changes(self) -> None:
        """Every BRAIN_INDEX_REFRESH_SECONDS, compare the collection's size with the size it had when
        the in-process state was last in step; if another writer changed it, rebuild that state."""
        every = self.settings.index_refresh_seconds
        if self._expected_count is None or every <= 0 or time.monotonic() - self._last_check < every:
            return
        self._last_check = time.monotonic()
        if self.col.count() == self._expected_count:
            return
        log.info("collection changed outside this store; rebuilding the in-process state")
        with self._lock:
            self._conversations.clear()
            self._turn_conversation.clear()
            if self._indexes is not None:
                self.refresh_index()
            else:
                self._expected_count = None

    def _turns(self, conversation_id: str) -> list[Document]:
        """Every turn of a conversation in order, from the in-process cache (filled from Chroma once)."""
        self._check_outside_changes()
        with self._lock:
            cached = self._conversations.get(conversation_id)
            if cached is None:
                docs = self.get(where={"conversation_id": conversation_id}, type=DocType.TURN)
                cached = {d.id: d for d in docs}
                self._turn_conversation.update((d.id, conversation_id) for d in docs)
                for _, dropped in self._conversations.put(conversation_id, cached):
                    for doc_id in dropped:
                        self._turn_conversation.pop(doc_id, None)
                if self._expected_count is None:
                    self._mark_in_step()
                    self._last_check = time.monotonic()
            return sorted(cached.values(), key=lambda d: (int(d.metadata.get("turn_index") or 0), d.metadata.get("ts_epoch", 0.0)))

    def index_sizes(self) -> dict[str, int]:
        """Documents held by each in-process index (builds them if needed)."""
        return {t: len(self._index_for(t)) for t in self.settings.indexed_types}

    def index_problems(self) -> dict[str, dict[str, dict[str, str]]]:
        """Stored rows the in-process indexes could not use as they are, by type:
        ``{type: {id: {field: what was done instead}}}`` (builds the indexes if needed). Such rows
        were written around the schema (an older version, a direct Chroma write); rewriting them
        through the store (``update_memory``) or deleting them clears the entry."""
        return {t: self._index_for(t).problems() for t in self.settings.indexed_types}

    def memory_index(self) -> MemoryIndex:
        """The memory ranking index."""
        index = self._index_for(DocType.MEMORY.value)
        assert index is not None  # settings guarantee memory is indexed
        return index

    # ---- retrieval ----------------------------------------------------------------------------
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
    ) -> list[MemoryHit]:
        """The exact top-k memories by w_sim*similarity + w_imp*importance/5 + recency bonus.

        Scope: with ``entity``, that entity's memories and global ones; without, global ones only
        (``all_scopes=True`` searches every scope, for operators' tools). ``query_vector`` (the
        query already embedded, e.g. once for several document types) replaces ``query``.
        """
        k = self.settings.memory_top_k if k is None else _check_k(k)
        scopes = search_scopes(entity, all_scopes=all_scopes)
        if tags is not None and (isinstance(tags, str) or not all(isinstance(t, str) for t in tags)):
            raise ValidationError(f"tags must be a list of strings, got {tags!r}")
        now_epoch = _epoch(now)
        vector = self._query_vector(query, query_vector)
        hits = self.memory_index().search(vector, k, self.weights, now_epoch, scopes, tags, min_importance)
        for hit in hits:
            hit.metadata = from_chroma(hit.metadata)
        return hits

    def search(
        self, query: str | None, k: int = 5, *, type: str | DocType | None = None, where: dict[str, Any] | None = None,
        query_vector: np.ndarray | None = None,
    ) -> list[Hit]:
        """Plain similarity search over any documents (Chroma's vector index, filtered)."""
        k = _check_k(k)
        vector = self._query_vector(query, query_vector)
        got = self.col.query(
            query_embeddings=[vector],
            n_results=k,
            where=to_chroma_where(where, type=_type_value(type)),
            include=["documents", "metadatas", "distances"],
        )
        return [
            Hit(id=i, text=d or "", metadata=from_chroma(m), similarity=1.0 - float(dist))
            for i, d, m, dist in zip(got["ids"][0], got["documents"][0], got["metadatas"][0], got["distances"][0])
        ]

    def _query_vector(self, query: str | None, query_vector: np.ndarray | None) -> np.ndarray:
        """``query_vector`` checked, or ``query`` embedded."""
        if query_vector is None:
            _check_query(query)
            return self.embedder.embed_query(query)
        vec, problem = self._check_embedding(query_vector)
        if problem:
            raise ValidationError(f"query_vector: {problem}")
        return vec

    def _similar(self, query: str | None, k: int, doc_type: DocType, equals: dict[str, Any],
                 query_vector: np.ndarray | None = None) -> list[Hit]:
        """Exact similarity search of one type: in process when indexed, else Chroma's filtered query."""
        k = _check_k(k)
        equals = {key: value for key, value in equals.items() if value is not None}
        vector = self._query_vector(query, query_vector)
        index = self._index_for(doc_type.value)
        if index is None:
            return self.search(None, k, type=doc_type, where=equals or None, query_vector=vector)
        rows = index.search(vector, k, SIMILARITY_ONLY, 0.0, equals=equals or None)
        return [Hit(id=r.id, text=r.text, metadata=from_chroma(r.metadata), similarity=r.similarity) for r in rows]

    def retrieve_faq(self, query: str | None, k: int | None = None, topic: str | None = None, *,
                     query_vector: np.ndarray | None = None) -> list[Hit]:
        """The FAQ entries closest in meaning to ``query`` (optionally of one topic)."""
        k = self.settings.faq_top_k if k is None else k
        return self._similar(query, k, DocType.FAQ, {"topic": topic}, query_vector)

    def retrieve_persona(self, query: str | None, k: int = 3, *, query_vector: np.ndarray | None = None) -> list[Hit]:
        """Sections of the current persona closest in meaning to ``query`` (identity, tone, ... questions)."""
        index = self._index_for(DocType.PERSONA.value)
        metas = index.metadatas() if index is not None else [d.metadata for d in self.get(type=DocType.PERSONA)]
        version = current_version(metas)
        if version is None:
            return []
        return self._similar(query, k, DocType.PERSONA, {"version": version}, query_vector)

    def retrieve_summaries(self, query: str | None, k: int | None = None, conversation_id: str | None = None, *,
                           query_vector: np.ndarray | None = None) -> list[Hit]:
        """Conversation summaries closest in meaning to ``query`` (optionally of one conversation)."""
        k = self.settings.summary_top_k if k is None else k
        return self._similar(query, k, DocType.SUMMARY, {"conversation_id": conversation_id}, query_vector)

    def record_memory_use(self, used: Mapping[str, float]) -> int:
        """Persist when memories were last retrieved: ``{memory id: epoch}`` -> ``last_used`` in their
        metadata (Chroma and the index; never moved back in time). Memories deleted meanwhile are
        skipped. Returns how many were written."""
        times, bad = {}, []
        for key, value in used.items():
            try:
                times[key] = check_last_used(value)
            except ValueError:
                bad.append(key)
        if bad:
            raise ValidationError(f"last-use times must be epoch seconds (finite, >= 0); bad entries for {bad[:5]}")
        with self._lock:
            metas = self.memory_index().set_last_used(times)
            ids = list(metas)
            for start in range(0, len(ids), self.max_batch_size):
                part = ids[start : start + self.max_batch_size]
                # only the key that changed: Chroma merges it into the stored metadata, so values another
                # process changed meanwhile (importance, tags) are not overwritten with this index's copy
                self.col.update(ids=part, metadatas=[{"last_used": metas[i]["last_used"]} for i in part])
        return len(ids)

    def conversation_turns(self, conversation_id: str) -> list[Document]:
        """Every turn of a conversation, oldest first (served from the in-process turn cache)."""
        return self._turns(valid_conversation_id(conversation_id))

    def recent_turns(self, conversation_id: str, k: int | None = None) -> list[Document]:
        """The last ``k`` turns of a conversation, oldest first."""
        k = self.settings.turn_top_k if k is None else _check_k(k)
        return self._turns(valid_conversation_id(conversation_id))[-k:]

    def stats(self) -> dict[str, Any]:
        counts = {t.value: self.count(t) for t in DocType}
        return {
            "collection": self.settings.collection,
            "documents": sum(counts.values()),
            "by_type": counts,
            "embedder": self.embedder.name,
            "dimension": self.dimension,
            "backend": self.settings.chroma_url or str(self.settings.data_dir / "chroma"),
            "disk_bytes": None if self.settings.chroma_url else _tree_bytes(self.settings.data_dir / "chroma"),
            # rows the indexes could not use as stored (see index_problems); None until the indexes are built
            "unusable_rows": None if self._indexes is None else {
                t: len(index.problems()) for t, index in self._indexes.items()},
        }


def _refuse_scope_moves(unique: list[dict[str, Any]], stored: dict) -> None:
    """A write under the id of a stored memory of another scope (only an explicit id can do that)
    would move the memory to where other entities see it: refused, the whole batch."""
    problems = []
    for p in unique:
        old = (stored.get(p["id"]) or (None, None))[1]
        if old and old.get("type") == p["meta"].type == DocType.MEMORY.value \
                and old.get("scope", GLOBAL_SCOPE) != p["meta"].scope:
            problems.append({"item": None, "field": "scope", "message": (
                f"memory {p['id']!r} is stored in scope {old.get('scope')!r}, not {p['meta'].scope!r}: a memory's "
                f"scope never changes; store it without an id, or delete the old one first")})
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems) + " (nothing was written)", problems)


# what a repeated write may move without it counting as a change
_TIME_KEYS = ("timestamp", "ts_epoch", "created_at")


def _same_content(old, merged) -> bool:
    """Whether ``merged`` says nothing ``old`` did not: equal apart from the later time."""
    if created(old) != created(merged):
        return False
    strip = lambda meta: {k: v for k, v in meta.to_chroma().items() if k not in _TIME_KEYS}  # noqa: E731
    return strip(old) == strip(merged)


def _tree_bytes(path) -> int:
    """Bytes of the files under ``path`` (the embedded store's size on disk)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _keep_rows(page: dict[str, Any], keep_meta) -> dict[str, Any]:
    """``page`` with only the rows whose metadata passes ``keep_meta``."""
    keep = [n for n, m in enumerate(page.get("metadatas") or []) if keep_meta(m or {})]
    out = dict(page)
    for key in ("ids", "documents", "metadatas", "embeddings"):
        value = page.get(key)
        if value is not None:
            out[key] = [value[n] for n in keep]
    return out


def _keep_type(page: dict[str, Any], doc_type: str) -> dict[str, Any]:
    return _keep_rows(page, lambda m: m.get("type") == doc_type)


def _keep_scopes(page: dict[str, Any], scopes: Sequence[str]) -> dict[str, Any]:
    """``page`` without the documents outside ``scopes`` (a document without a scope is global)."""
    return _keep_rows(page, lambda m: m.get("scope", GLOBAL_SCOPE) in scopes)


def _merge_pages(pages: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("ids", "documents", "metadatas", "embeddings")
    return {key: [x for page in pages for x in (page.get(key) if page.get(key) is not None else [])] for key in keys}


def _slice_page(page: dict[str, Any], offset: int, limit: int | None) -> dict[str, Any]:
    end = None if limit is None else offset + limit
    return {key: value[offset:end] for key, value in page.items()}


def _type_value(doc_type: str | DocType | None) -> str | None:
    if doc_type is None:
        return None
    model_for(doc_type)  # raises for unknown types
    return doc_type.value if isinstance(doc_type, DocType) else doc_type


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise ValidationError(f"k must be an integer between 1 and 1000, got {k!r}")
    return k


def _check_query(query: Any) -> bool:
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query must be a non-empty string")
    return True


def _epoch(now: datetime | float | None) -> float:
    if now is None:
        return time.time()
    if isinstance(now, datetime):
        try:
            return parse_timestamp(now, "now").timestamp()
        except ValueError as exc:
            raise ValidationError(str(exc)) from None
    return float(now)


__all__ = ["RagStore", "open_client", "memory_id", "derived_id", "new_id"]
