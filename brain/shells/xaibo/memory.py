# typing.List / Optional / Dict on purpose: the protocol methods' signatures equal Xaibo's, annotations included
# ruff: noqa: UP006, UP035, UP045
"""Xaibo's ``MemoryProtocol``: memories as ``memory`` documents of the store, long ones chunked (the

layout is described in :mod:`brain.shells.xaibo`).
No ``from __future__ import annotations`` here: Xaibo resolves a module's dependencies from the
*evaluated* annotations of ``__init__`` (see :mod:`brain.shells.xaibo`).
"""

import asyncio
import threading
import uuid
from collections.abc import Mapping
from typing import Any, List, Optional

from brain.model.errors import ConfigError, ValidationError
from brain.model.ids import derived_id
from brain.model.ids import memory_id as derived_memory_id
from brain.model.results import Document
from brain.model.schemas import GLOBAL_SCOPE, XAIBO_INDEX_PREFIX, DocType, check_k
from brain.rules.memories import is_part, merged_importance, merged_tags
from brain.shells.xaibo.attributes import Encoded, decode_attributes, encode_attributes
from brain.shells.xaibo.chunker import BrainChunker
from brain.shells.xaibo.keys import (
    CHUNKS_KEY,
    MAPPED_FIELDS,
    MAPPED_KEY,
    MODEL_FIELDS,
    PART_OF_KEY,
    REPLACE,
    REVISION_KEY,
)
from brain.shells.xaibo.protocol_types import MemoryProtocol, MemorySearchResult, XaiboDict
from brain.shells.xaibo.shared import check_text, resolve_store, scopes_for, unit_score
from brain.store import SIMILARITY_ONLY
from brain.store.indexes import memory_index
from brain.store.memory_query import MemoryQuery

_write_lock = threading.RLock()  # BrainMemory's read-modify-write sequences, across instances


class BrainMemory(MemoryProtocol):
    """Memories as ``memory`` documents of the store (see the module docstring for the layout).

    Config: ``entity`` (write to ``entity:<name>``, read that entity's and global memories),
    ``source`` (the documents' ``source``: ``chat`` by default), ``window_size`` /
    ``window_overlap`` (the chunker's, default ``BRAIN_CHUNK_WINDOW`` / ``BRAIN_CHUNK_OVERLAP``).
    """

    _KEYS = ("entity", "source", "window_size", "window_overlap")

    def __init__(self, config: Optional[dict[str, Any]] = None, *, store=None, settings=None, chunker=None):  # type: ignore[no-untyped-def]  # xaibo injects what any annotation but config names
        self.store, own = resolve_store(store, settings, config, self._KEYS, "BrainMemory")
        self.scope, self.scopes = scopes_for(own.get("entity"), "BrainMemory")
        self.source = own.get("source", "chat")
        if self.source not in ("chat", "kb", "system", "import"):
            raise ConfigError(f"BrainMemory: source must be one of chat, kb, system, import, got {self.source!r}")
        chunk_config: dict[str, Any] = {k: own[k] for k in ("window_size", "window_overlap") if k in own}
        self.chunker = BrainChunker(chunk_config, settings=self.store.settings, chunker=chunker).chunker

    # -- reads ---------------------------------------------------------------------------------------
    def _visible(self, metadata: Mapping[str, object]) -> bool:
        return metadata.get("scope", GLOBAL_SCOPE) in self.scopes and not is_part(metadata)

    def _head(self, memory_id: Any) -> Document | None:
        if not isinstance(memory_id, str) or not memory_id:
            return None
        docs = self.store.get([memory_id], type=DocType.MEMORY)
        return docs[0] if docs and self._visible(docs[0].metadata) else None

    @staticmethod
    def _as_dict(doc: Document) -> dict[str, Any]:
        meta = doc.metadata
        return {
            "id": doc.id,
            "content": doc.text,
            "attributes": decode_attributes(meta),
            "scope": meta.get("scope", GLOBAL_SCOPE),
            "importance": meta.get("importance", 3),
            "tags": list(meta.get("tags") or []),
            "timestamp": meta.get("timestamp"),
        }

    async def get_memory(self, memory_id: str) -> Optional[XaiboDict]:
        doc = await asyncio.to_thread(self._head, memory_id)
        return None if doc is None else self._as_dict(doc)

    async def list_memories(self) -> List[XaiboDict]:
        return await asyncio.to_thread(self._list)

    def _list(self) -> List[dict[str, Any]]:
        docs = self.store.get(type=DocType.MEMORY, where={"scope": sorted(self.scopes)})
        heads = [d for d in docs if self._visible(d.metadata)]
        heads.sort(key=lambda d: (d.metadata.get("ts_epoch", 0.0), d.id))
        return [self._as_dict(d) for d in heads]

    async def search_memory(self, query: str, k: int = 10) -> List[MemorySearchResult]:
        check_text(query, "query")
        k = check_k(k)
        return await asyncio.to_thread(self._search, query, k)

    def _search(self, query: str, k: int) -> List[MemorySearchResult]:
        vector = self.store.embedder.embed_query(query)
        index = memory_index(self.store)
        fetch = max(4 * k, 16)  # a memory may own several of the top rows: widen until k memories
        while True:
            wanted = MemoryQuery(vector, fetch, SIMILARITY_ONLY, 0.0, scopes=self.scopes, rows="memories_and_parts")
            hits = index.search(wanted)
            best: dict[str, float] = {}  # memory id -> its best chunk's similarity
            texts: dict[str, str] = {}  # memory id -> its text, when the head itself was a hit
            for hit in hits:
                meta = hit.metadata
                if is_part(meta):  # a continuation chunk counts for its head, when of its revision
                    head_id = meta[PART_OF_KEY]
                    if head_id.startswith(XAIBO_INDEX_PREFIX):  # a vector index's row
                        continue
                    head = index.metadata(head_id)
                    if head is None or head.get(REVISION_KEY) != meta.get(REVISION_KEY) or not self._visible(head):
                        continue
                else:
                    head_id = hit.id
                    texts[head_id] = hit.text
                best[head_id] = max(best.get(head_id, -1.0), hit.similarity)
            if len(best) >= k or len(hits) < fetch:
                break
            fetch *= 4
        ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))[:k]
        missing = [mid for mid, _ in ranked if mid not in texts]
        if missing:
            texts.update((d.id, d.text) for d in self.store.get(missing, type=DocType.MEMORY))
        results = []
        for mid, similarity in ranked:
            stored = index.metadata(mid)
            if stored is None or mid not in texts:  # deleted meanwhile
                continue
            results.append(
                MemorySearchResult(
                    memory_id=mid,
                    content=texts[mid],
                    similarity_score=unit_score(similarity),
                    attributes=decode_attributes(stored),
                )
            )
        return results

    # -- writes --------------------------------------------------------------------------------------
    async def store_memory(self, text: str, attributes: Optional[XaiboDict] = None) -> str:
        check_text(text)
        encoded = encode_attributes(attributes, self.scope)  # before anything is chunked or written
        return await asyncio.to_thread(self._store, text, attributes, encoded)

    def _store(self, text: str, attributes: Optional[dict[str, Any]], encoded: Encoded) -> str:
        memory_id = derived_memory_id(text, self.scope)
        with _write_lock:
            old = self._head(memory_id)
            if old is None:
                chunks = self.chunker.chunk(text)
                revision = uuid.uuid4().hex
                docs = [self._head_doc(memory_id, text, encoded, revision, len(chunks))]
                docs += self._chunk_docs(memory_id, chunks, encoded.fields, revision)
                self.store.upsert_docs(docs)  # head and chunks: all or nothing
                return memory_id
            # the same memory again: merged by the memory rule (first text kept; the new attributes win)
            merged = {**decode_attributes(old.metadata), **(attributes or {})}
            merged_encoded = encode_attributes(merged, self.scope)
            fields = merged_encoded.fields
            given = encoded.fields.get("importance", 1)  # none given: the lowest, so the old one stands
            fields["importance"] = merged_importance([old.metadata.get("importance", 3), given])
            fields["tags"] = merged_tags([old.metadata.get("tags") or [], encoded.fields.get("tags", [])])
            self._rewrite(old, old.text, merged_encoded, reset=False)
            return memory_id

    async def update_memory(self, memory_id: str, text: str, attributes: Optional[XaiboDict] = None) -> bool:
        check_text(text)
        if attributes is not None and not isinstance(attributes, Mapping):
            encode_attributes(attributes)  # raises the standard message
        patch = dict(attributes or {})
        replace = patch.pop(REPLACE, False)
        if not isinstance(replace, bool):
            raise ValidationError(
                f"attributes[{REPLACE!r}] must be true or false, got {replace!r} (nothing was written)"
            )
        # validate what is given now, so a bad attribute fails before the old memory is read
        encode_attributes({k: v for k, v in patch.items() if v is not None}, self.scope)
        return await asyncio.to_thread(self._update, memory_id, text, patch, replace)

    def _update(self, memory_id: str, text: str, patch: Mapping[str, object], replace: bool) -> bool:
        with _write_lock:
            old = self._head(memory_id)
            if old is None:
                return False
            if replace:
                merged = {k: v for k, v in patch.items() if v is not None}
            else:
                merged = decode_attributes(old.metadata)
                for key, value in patch.items():
                    if value is None:
                        merged.pop(key, None)
                    else:
                        merged[key] = value
            self._rewrite(old, text, encode_attributes(merged, self.scope), reset=True)
            return True

    async def delete_memory(self, memory_id: str) -> bool:
        return await asyncio.to_thread(self._delete, memory_id)

    def _delete(self, memory_id: str) -> bool:
        with _write_lock:
            if self._head(memory_id) is None:
                return False
            # every chunk of every revision in one call, then the head
            self.store.delete(where={PART_OF_KEY: memory_id}, type=DocType.MEMORY)
            self.store.delete([memory_id], type=DocType.MEMORY)
            return True

    # -- documents -----------------------------------------------------------------------------------
    @staticmethod
    def _markers(memory_id: str, revision: str, chunk: int) -> dict[str, Any]:
        """The head (chunk 0) carries the revision; a continuation chunk is a part of its memory."""
        return {REVISION_KEY: revision} if chunk == 0 else {PART_OF_KEY: memory_id, REVISION_KEY: revision}

    def _head_doc(self, memory_id: str, text: str, encoded: Encoded, revision: str, chunks: int) -> dict[str, Any]:
        return {
            "id": memory_id,
            "text": text,
            "type": DocType.MEMORY.value,
            "scope": self.scope,
            "source": self.source,
            **encoded.fields,
            **encoded.extras,
            **self._markers(memory_id, revision, 0),
            CHUNKS_KEY: max(1, chunks),
        }

    def _chunk_docs(
        self, memory_id: str, chunks: list[str], fields: Mapping[str, object], revision: str
    ) -> list[dict[str, Any]]:
        """Continuation chunks 2..n: their own memory documents, with the head's fields."""
        return [
            {
                "id": derived_id("xaibo-chunk", memory_id, revision, str(i)),
                "text": chunk,
                "type": DocType.MEMORY.value,
                "scope": self.scope,
                "source": self.source,
                **fields,
                **self._markers(memory_id, revision, i),
            }
            for i, chunk in enumerate(chunks[1:], start=1)
        ]

    def _rewrite(self, old: Document, text: str, encoded: Encoded, *, reset: bool) -> None:
        """Give an existing memory a new text and attributes: new chunks, then the head (which switches
        the revision), then the old chunks go. ``reset``: store fields that an earlier write took from
        attributes, and which the new attributes no longer give, return to their defaults."""
        memory_id = old.id
        revision = uuid.uuid4().hex
        chunks = self.chunker.chunk(text)
        fields = dict(encoded.fields)
        if reset:
            previously = old.metadata.get(MAPPED_KEY) or []
            defaults = {"importance": 3, "tags": [], "entity": None, "conversation_id": None}
            for key in previously:
                fields.setdefault(key, defaults[key])
        current = {k: old.metadata.get(k) for k in MAPPED_FIELDS}
        current["tags"] = list(old.metadata.get("tags") or [])
        chunk_fields = {**{k: v for k, v in current.items() if v is not None}, **fields}
        if chunk_fields.get("entity") is None:
            chunk_fields.pop("entity", None)
        if chunk_fields.get("conversation_id") is None:
            chunk_fields.pop("conversation_id", None)
        new_chunks = self._chunk_docs(memory_id, chunks, chunk_fields, revision)
        if new_chunks:
            self.store.upsert_docs(new_chunks)
        # the head: extra metadata that is not ours (e.g. created_at, last_used, pam_*) is kept
        foreign = {k: v for k, v in old.metadata.items() if k not in MODEL_FIELDS and not k.startswith("xaibo.")}
        metadata = {
            **foreign,
            **encoded.extras,
            **self._markers(memory_id, revision, 0),
            CHUNKS_KEY: max(1, len(chunks)),
        }
        for key in ("entity", "conversation_id"):
            if key in fields:
                metadata[key] = fields[key]
        self.store.update_memory(
            memory_id,
            text,
            importance=fields.get("importance"),
            tags=fields.get("tags"),
            metadata=metadata,
            replace_metadata=True,
        )
        stale = [
            d.id
            for d in self.store.get(where={PART_OF_KEY: memory_id}, type=DocType.MEMORY)
            if d.metadata.get(REVISION_KEY) != revision
        ]
        if stale:
            self.store.delete(stale)
