# typing.List / Optional / Dict on purpose: the protocol methods' signatures equal Xaibo's, annotations included
# ruff: noqa: UP006, UP045
"""Xaibo's four memory protocols, implemented over brain's store.

Agents built with Xaibo (``pip install brain[xaibo]``) use brain as their memory module with no glue
code: name a class below in the agent's YAML and Xaibo wires it (each class subclasses the Xaibo
protocol it implements, so Xaibo sees what it provides).

- :class:`BrainChunker` (``ChunkingProtocol``): the token-window chunker of :mod:`brain.chunking`.
- :class:`BrainEmbedder` (``EmbeddingProtocol``): text through the configured embedder; images and
  audio raise :class:`UnsupportedModality`.
- :class:`BrainVectorIndex` (``VectorIndexProtocol``): raw vectors in the ``conversations``
  collection, as ``memory`` documents marked ``xaibo.kind=vector``.
- :class:`BrainMemory` (``MemoryProtocol``): memories as ``memory`` documents, so they are also
  ranked by ``RagStore.retrieve_memories``, written through to the Engram mirror and exported to PAM.

How memories are stored
-----------------------
A memory is one *head* document: id = the memory id, text = the whole text, vector = the store's
embedding of that text (the embedder reads its first ``max_tokens``, which covers the first chunk).
When the chunker splits the text into several windows, chunks 2..n are stored as well, as memory
documents of their own (text = the window) with the memory's importance, tags and scope. Every
document of a memory carries ``xaibo.memory_id`` and a ``xaibo.revision`` that changes with every
write; a chunk counts only while its revision equals its head's. Writes go: new chunks, then the
head (which switches the revision), then the old chunks are deleted — so a write interrupted at any
point never lets a stale chunk be returned, and the next write of that memory clears the leftovers.
Deleting a memory removes the head and every chunk of every revision.

- Ids: a new memory gets the store's id for its text and scope (``doc-<uuid5>``), so storing the same
  text again (case and whitespace aside) returns the same id and merges by the store's rule
  (:mod:`brain.memories`): the first spelling of the text stays, attributes are united (the new value
  wins per key), importance is the higher, tags are united. A memory
  written by the rest of the assistant with that text is the same memory. (After
  ``update_memory`` changed a memory's text, its id stays; storing that new text again creates a
  second memory, as with ``RagStore.update_memory``.)
- Scope: the module's ``entity`` (config) scopes writes to ``entity:<name>``; reads then see that
  entity's and global memories, like ``retrieve_memories(entity=...)``. Without it: global ones.
  ``BrainMemory`` sees every memory document in its scopes (also those the assistant wrote), except
  the rows of a :class:`BrainVectorIndex` and continuation chunks.
- Parts are not memories: continuation chunks and vector-index rows are ranked under part scopes
  (:data:`brain.memories.PART_PREFIX`), so ``RagStore.retrieve_memories`` and the chat context
  rank each memory once, by its head (the whole text), and PAM exports leave them out; the Engram
  mirror keeps every row, so a restore brings them back.
- Attributes: ``importance`` (an integer 1..5), ``tags`` (a list of strings), ``entity`` (the name of
  the module's own entity scope) and ``conversation_id`` (``conv-...``) become the store's own fields when
  valid, otherwise they are kept like any other attribute. Other attributes are stored as metadata
  ``xaibo.attr.<key>`` when Chroma can store the value as is (string, number, boolean, non-empty
  list of one of those) and as JSON text under ``xaibo.json.<key>`` otherwise (objects, empty or
  mixed lists, null); both come back as given. Values JSON cannot express (bytes, NaN, objects of
  other classes) are refused with :class:`~brain.errors.ValidationError`, and nothing is written.
- ``update_memory(id, text, attributes)`` merges ``attributes`` into the old ones the way JSON Merge
  Patch (RFC 7396) does at the top level: a key set to ``None`` is removed, other keys are set.
  ``{"$replace": True, ...}`` replaces the attributes wholesale instead (the store's own fields that
  came from attributes then return to their defaults unless given). The text is re-chunked and
  re-embedded; importance, tags and so on change only when given.
- ``similarity_score`` is the cosine similarity floored at 0 (so in 0..1); a memory's score is its
  best chunk's, and a search returns each memory once.

Construction: Xaibo calls ``Cls(config={...})``; the config holds the module's own keys (see each
class) and any :class:`~brain.config.Settings` field (``data_dir``, ``collection``, ``embedder``,
``chroma_url``, ...). Modules with the same storage settings share one :class:`~brain.core.Brain` (and
so one :class:`RagStore`) per process (:func:`shared_store`; :func:`register_shared_store` hands them
the Brain or store the application already opened). From Python pass ``store=`` (or ``settings=``) instead.

This module must not use ``from __future__ import annotations``: Xaibo resolves a module's
dependencies from the *evaluated* annotations of ``__init__`` (every annotated parameter but
``config`` is a dependency it injects, and a ``-> None`` would be taken for one). That is also why
``store``, ``settings``, ``embedder`` and ``chunker`` are left unannotated.
"""

import asyncio
import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional  # noqa: UP035

import numpy as np

from brain.chunking import TokenChunker
from brain.config import Settings
from brain.core import Brain
from brain.core import open as open_brain
from brain.embeddings import get_embedder
from brain.errors import ConfigError, EmbedderError, ValidationError
from brain.ids import derived_id, new_id
from brain.ids import memory_id as derived_memory_id
from brain.memories import is_part, merged_importance, merged_tags, part_scopes, visible_scopes
from brain.schemas import (
    GLOBAL_SCOPE,
    XAIBO_CHUNK_KEY,
    XAIBO_KIND_KEY,
    DocType,
    MemoryMetadata,
    check_conversation_id,
    entity_scope,
    metadata_value_problem,
)
from brain.store import SIMILARITY_ONLY, RagStore

try:
    from xaibo.core.protocols.memory import (
        ChunkingProtocol,
        EmbeddingProtocol,
        MemoryProtocol,
        MemorySearchResult,
        VectorIndexProtocol,
        VectorSearchResult,
    )

    XAIBO_AVAILABLE = True
except ImportError:  # brain without the xaibo extra: the same shapes, no framework
    XAIBO_AVAILABLE = False

    @dataclass
    class MemorySearchResult:  # type: ignore[no-redef]
        memory_id: str
        content: str
        similarity_score: float
        attributes: Optional[Dict[str, Any]] = None

    @dataclass
    class VectorSearchResult:  # type: ignore[no-redef]
        vector_id: str
        similarity_score: float
        attributes: Optional[Dict[str, Any]] = None

    class ChunkingProtocol:  # type: ignore[no-redef]
        pass

    class EmbeddingProtocol:  # type: ignore[no-redef]
        pass

    class VectorIndexProtocol:  # type: ignore[no-redef]
        pass

    class MemoryProtocol:  # type: ignore[no-redef]
        pass


# ---- metadata keys ----------------------------------------------------------------------------------
KIND_KEY = XAIBO_KIND_KEY  # "memory" (BrainMemory's heads and chunks) or "vector" (BrainVectorIndex rows)
MEMORY_ID_KEY = "xaibo.memory_id"
CHUNK_KEY = XAIBO_CHUNK_KEY  # 0 = the head, 1.. = continuation chunks
CHUNKS_KEY = "xaibo.chunks"  # on the head: how many chunks the text has
REVISION_KEY = "xaibo.revision"
INDEX_KEY = "xaibo.index"  # a vector row's index name
MAPPED_KEY = "xaibo.mapped"  # attribute names that were stored as the store's own fields
ATTR_PREFIX = "xaibo.attr."
JSON_PREFIX = "xaibo.json."
REPLACE = "$replace"

#: attributes that become the store's own memory fields when their value is valid
MAPPED_FIELDS = ("importance", "tags", "entity", "conversation_id")
_MODEL_FIELDS = frozenset(MemoryMetadata.model_fields) | {"ts_epoch"}

# Xaibo's VectorMemory passes each chunk's text as "chunk_text"; the first of these is a row's text
_TEXT_ATTRIBUTES = ("chunk_text", "text", "content")

_write_lock = threading.RLock()  # BrainMemory's read-modify-write sequences, across instances


class UnsupportedModality(EmbedderError):
    """The embedder cannot embed this kind of input (brain's embedders embed text only)."""


# ---- configuration and shared stores ----------------------------------------------------------------
def settings_from_config(config: Any, own_keys: Sequence[str], module: str) -> tuple[Settings, dict[str, Any]]:
    """Split a Xaibo module ``config`` into brain :class:`Settings` and the module's own keys."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{module}: config must be a mapping of keys to values, got {type(config).__name__}")
    fields = set(Settings.model_fields)
    unknown = sorted(str(k) for k in config if k not in fields and k not in own_keys)
    if unknown:
        own = ", ".join(own_keys) if own_keys else "none"
        raise ConfigError(
            f"{module}: unknown config key(s) {', '.join(unknown)}; this module's keys: {own}; "
            f"brain settings by field name: data_dir, collection, embedder, chroma_url, ... (see brain.config.Settings)"
        )
    settings = Settings(**{k: v for k, v in config.items() if k in fields})
    return settings, {k: v for k, v in config.items() if k in own_keys}


def _store_key(settings: Settings) -> tuple:
    data_dir = str(Path(settings.data_dir).resolve())
    return (settings.chroma_url or data_dir, settings.collection, settings.embedder)


_brains: dict[tuple, Brain] = {}
_embedders: dict[tuple, Any] = {}
_opened: set[int] = set()  # ids of the Brains shared_brain opened (and so closes)
_stores_lock = threading.Lock()


def shared_brain(settings: Settings) -> Brain:
    """The process's :class:`~brain.core.Brain` for these storage settings, opened on first use
    (without a summary worker: the modules write memories, not conversations).

    Xaibo builds a module instance per agent request; opening a store each time would reload the
    embedder and rebuild the indexes, and several stores of one collection would not see each
    other's writes until their periodic refresh.
    """
    key = _store_key(settings)
    with _stores_lock:
        brain = _brains.get(key)
        if brain is None:
            brain = _brains[key] = open_brain(settings, start_worker=False)
            _opened.add(id(brain))
        return brain


def shared_store(settings: Settings) -> RagStore:
    """The store of :func:`shared_brain` for these storage settings."""
    return shared_brain(settings).store


def register_shared_store(store: Brain | RagStore) -> None:
    """Make Xaibo modules configured with the settings of ``store`` (a Brain or a RagStore, e.g. the
    chat backend's) use it."""
    if isinstance(store, RagStore):
        store = Brain(store)  # wiring only: the store stays its owner's to close
    if not isinstance(store, Brain):
        raise ConfigError(f"register_shared_store needs a brain Brain or RagStore, got {type(store).__name__}")
    with _stores_lock:
        _brains[_store_key(store.settings)] = store


def close_shared_stores() -> None:
    """Forget the shared Brains and close those :func:`shared_brain` opened (one handed in with
    :func:`register_shared_store` stays open: its owner closes it)."""
    with _stores_lock:
        brains = list(_brains.values())
        _brains.clear()
        _embedders.clear()
        opened = set(_opened)
        _opened.clear()
    for brain in brains:
        if id(brain) in opened:
            brain.close()


def _own_config(config: Any, own_keys: Sequence[str], module: str) -> dict[str, Any]:
    """The module's own keys, when a store was handed in (storage settings would be ignored: refused)."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{module}: config must be a mapping of keys to values, got {type(config).__name__}")
    other = sorted(str(k) for k in config if k not in own_keys)
    if other:
        raise ConfigError(
            f"{module}: config key(s) {', '.join(other)} cannot be used with store=: the store's own settings "
            f"apply; this module's keys: {', '.join(own_keys)}"
        )
    return dict(config)


def _resolve_store(store: Any, settings: Any, config: Any, own_keys: Sequence[str], module: str) -> tuple[RagStore, dict]:
    if isinstance(store, Brain):
        store = store.store
    if store is not None:
        if not isinstance(store, RagStore):
            raise ConfigError(f"{module}: store must be a brain Brain or RagStore, got {type(store).__name__}")
        return store, _own_config(config, own_keys, module)
    if settings is not None:
        if not isinstance(settings, Settings):
            raise ConfigError(f"{module}: settings must be brain Settings, got {type(settings).__name__}")
        return shared_store(settings), _own_config(config, own_keys, module)
    parsed, own = settings_from_config(config, own_keys, module)
    return shared_store(parsed), own


def _scopes_for(entity: Any, module: str) -> tuple[str, frozenset[str]]:
    """(write scope, readable scopes) for a module's ``entity`` config."""
    if entity is None:
        return GLOBAL_SCOPE, visible_scopes(None)
    name = entity if isinstance(entity, str) else str(entity)
    try:
        scope = entity_scope(name)
    except ValueError as exc:
        raise ConfigError(f"{module}: entity: {exc}") from None
    return scope, visible_scopes(name)


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise ValidationError(f"k must be an integer between 1 and 1000, got {k!r}")
    return k


def _check_text(text: Any, field: str = "text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"{field} must be a non-empty string, got {text!r}")
    return text


def _unit_score(similarity: float) -> float:
    """Cosine similarity floored at 0 and capped at 1 (float rounding), Xaibo's 0..1 score."""
    return min(1.0, max(0.0, float(similarity)))


# ---- attributes <-> metadata ------------------------------------------------------------------------
@dataclass
class _Encoded:
    fields: dict[str, Any]  # importance / tags / entity / conversation_id that came from attributes
    extras: dict[str, Any]  # xaibo.attr.* / xaibo.json.* / xaibo.mapped


def _mapped_value(key: str, value: Any, scope: str) -> tuple[bool, Any]:
    """(True, stored value) when ``value`` is valid for the store's field ``key``, else (False, None)."""
    if key == "importance":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, None
        if isinstance(value, float) and not value.is_integer():
            return False, None
        return (True, int(value)) if 1 <= value <= 5 else (False, None)
    if key == "tags":
        if isinstance(value, (list, tuple)) and all(isinstance(t, str) and t.strip() for t in value):
            return True, list(dict.fromkeys(t.strip() for t in value))
        return False, None
    if key == "entity":
        if not isinstance(value, str):
            return False, None
        try:
            entity_scope(value)
        except ValueError:
            return False, None
        if scope != f"entity:{value}":  # an entity is a scope: a global memory has none
            return False, None
        return True, value
    if key == "conversation_id":
        try:
            return True, check_conversation_id(value)
        except ValueError:
            return False, None
    return False, None


def encode_attributes(attributes: Any, scope: str = GLOBAL_SCOPE) -> _Encoded:
    """Validate Xaibo attributes into what the store keeps; raise ValidationError naming every bad key."""
    if attributes is None:
        return _Encoded({}, {})
    if not isinstance(attributes, Mapping):
        raise ValidationError(
            f"attributes must be a dict of names to values, got {type(attributes).__name__} (nothing was written)",
            [{"item": None, "field": "attributes", "message": "not a dict"}],
        )
    fields: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    mapped: list[str] = []
    problems: list[dict[str, Any]] = []
    for key, value in attributes.items():
        if not isinstance(key, str) or not key or key.startswith("$"):
            problems.append({"item": None, "field": f"attributes.{key}",
                             "message": f"attribute names must be non-empty strings not starting with '$', got {key!r}"})
            continue
        if key in MAPPED_FIELDS:
            ok, stored = _mapped_value(key, value, scope)
            if ok:
                fields[key] = stored
                mapped.append(key)
                continue
        if metadata_value_problem(value) is None:
            extras[ATTR_PREFIX + key] = list(value) if isinstance(value, tuple) else value
            continue
        try:
            extras[JSON_PREFIX + key] = json.dumps(value, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            problems.append({"item": None, "field": f"attributes.{key}",
                             "message": f"attribute {key!r} must be JSON data (strings, numbers, booleans, null, "
                                        f"lists, objects), got {type(value).__name__} ({exc})"})
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems) + " (nothing was written)", problems)
    if mapped:
        extras[MAPPED_KEY] = mapped
    return _Encoded(fields, extras)


def decode_attributes(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a document was given, from its stored metadata.

    A memory written by the rest of the assistant (no Xaibo markers) shows its importance, tags,
    entity and conversation id."""
    out: dict[str, Any] = {}
    if KIND_KEY in metadata:
        mapped = metadata.get(MAPPED_KEY) or []
    else:
        mapped = [k for k in MAPPED_FIELDS if metadata.get(k) not in (None, [])]
    for key in mapped:
        if key == "tags":
            out[key] = list(metadata.get("tags") or [])
        elif key in metadata:
            out[key] = metadata[key]
    for key, value in metadata.items():
        if key.startswith(ATTR_PREFIX):
            out[key[len(ATTR_PREFIX):]] = value
        elif key.startswith(JSON_PREFIX):
            try:
                out[key[len(JSON_PREFIX):]] = json.loads(value)
            except (TypeError, ValueError):  # edited by hand into something that is not JSON: as stored
                out[key[len(JSON_PREFIX):]] = value
    return out


def _xaibo_keys(metadata: Mapping[str, Any]) -> list[str]:
    return [k for k in metadata if k.startswith("xaibo.")]


# ---- ChunkingProtocol ---------------------------------------------------------------------------------
class BrainChunker(ChunkingProtocol):
    """``chunk(text)``: the token-window chunker of :mod:`brain.chunking` (MiniLM WordPiece tokens).

    Config: ``window_size`` and ``window_overlap`` (tokens; defaults ``BRAIN_CHUNK_WINDOW`` /
    ``BRAIN_CHUNK_OVERLAP``), checked against the embedder's input limit.
    """

    _KEYS = ("window_size", "window_overlap")

    def __init__(self, config: Optional[dict] = None, *, settings=None, chunker=None):
        if chunker is not None:
            if not isinstance(chunker, TokenChunker):
                raise ConfigError(f"BrainChunker: chunker must be a brain TokenChunker, got {type(chunker).__name__}")
            self.chunker = chunker
            return
        if settings is not None:
            base, own = settings, _own_config(config, self._KEYS, "BrainChunker")
        else:
            base, own = settings_from_config(config, self._KEYS, "BrainChunker")
        window = own.get("window_size", base.chunk_window)
        overlap = own.get("window_overlap", base.chunk_overlap)
        default = TokenChunker.from_settings(base)
        try:
            self.chunker = TokenChunker(window, overlap, max_tokens=default.max_tokens)
        except ValueError as exc:
            raise ConfigError(f"BrainChunker: window_size={window!r} / window_overlap={overlap!r}: {exc}") from None

    @property
    def window_size(self) -> int:
        return self.chunker.window_size

    @property
    def window_overlap(self) -> int:
        return self.chunker.window_overlap

    async def chunk(self, text: str) -> List[str]:
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        return await asyncio.to_thread(self.chunker.chunk, text)


# ---- EmbeddingProtocol --------------------------------------------------------------------------------
class BrainEmbedder(EmbeddingProtocol):
    """``text_to_embedding(text)`` through brain's configured embedder (unit-length float32).

    Config: ``kind`` — ``document`` (default) or ``query``, which matters for embedders that embed
    the two differently (nomic's ``search_document:`` / ``search_query:`` prefixes); Xaibo uses
    one embedder for both, so pick the side you store with. Images and audio raise
    :class:`UnsupportedModality`.
    """

    _KEYS = ("kind",)

    def __init__(self, config: Optional[dict] = None, *, store=None, embedder=None, settings=None):
        if settings is not None or store is not None or embedder is not None:
            parsed, own = settings, _own_config(config, self._KEYS, "BrainEmbedder")
        else:
            parsed, own = settings_from_config(config, self._KEYS, "BrainEmbedder")
        self.kind = own.get("kind", "document")
        if self.kind not in ("document", "query"):
            raise ConfigError(f"BrainEmbedder: kind must be 'document' or 'query', got {self.kind!r}")
        if embedder is not None:
            self.embedder = embedder
        elif store is not None:
            self.embedder = store.embedder
        else:
            self.embedder = _shared_embedder(parsed)

    async def text_to_embedding(self, text: str) -> np.ndarray:
        _check_text(text)
        if self.kind == "query":
            return np.array(await asyncio.to_thread(self.embedder.embed_query, text))
        return (await asyncio.to_thread(self.embedder.embed_documents, [text]))[0]

    async def image_to_embedding(self, image_data: bytes) -> np.ndarray:
        raise self._unsupported("image", "image_data")

    async def audio_to_embedding(self, audio_data: bytes) -> np.ndarray:
        raise self._unsupported("audio", "audio_data")

    def _unsupported(self, modality: str, argument: str) -> UnsupportedModality:
        return UnsupportedModality(
            f"the embedder {self.embedder.name} embeds text only; {modality} embeddings are not supported. "
            f"Give {argument} to an EmbeddingProtocol module that embeds {modality}, or describe the {modality} "
            f"in text and use text_to_embedding"
        )


def _shared_embedder(settings: Settings):
    key = (settings.embedder, settings.ollama_host)
    with _stores_lock:
        for store_key, brain in _brains.items():  # an open store's embedder has its model loaded already
            if store_key[2] == settings.embedder and brain.settings.ollama_host == settings.ollama_host:
                return brain.store.embedder
        if key not in _embedders:
            _embedders[key] = get_embedder(settings)
        return _embedders[key]


# ---- VectorIndexProtocol ------------------------------------------------------------------------------
class BrainVectorIndex(VectorIndexProtocol):
    """Vectors and their attributes in the ``conversations`` collection.

    Each vector is a ``memory`` document marked ``xaibo.kind=vector`` and ``xaibo.index=<index>``;
    its text is the first of the attributes ``chunk_text``, ``text``, ``content`` (what Xaibo's
    ``VectorMemory`` passes), else a placeholder naming the row. Vectors must have the collection's
    dimension, finite values and not be all zero; a batch with one bad vector or attribute writes
    nothing. ``search`` returns only this index's rows, exactly (cosine, floored at 0).

    Config: ``index`` (a name, default ``default``; separate indexes share the collection),
    ``entity`` (rows in that entity's scope instead of global, which keeps them out of the
    assistant's global memories).
    """

    _KEYS = ("index", "entity")

    def __init__(self, config: Optional[dict] = None, *, store=None, settings=None):
        self.store, own = _resolve_store(store, settings, config, self._KEYS, "BrainVectorIndex")
        self.index = own.get("index", "default")
        if not isinstance(self.index, str) or not self.index.strip():
            raise ConfigError(f"BrainVectorIndex: index must be a non-empty name, got {self.index!r}")
        self.scope, _ = _scopes_for(own.get("entity"), "BrainVectorIndex")

    @property
    def dimension(self) -> int:
        return self.store.dimension

    def _vector(self, value: Any, what: str) -> tuple[Optional[np.ndarray], Optional[str]]:
        try:
            vec = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError):
            return None, f"{what} must be an array of numbers, got {type(value).__name__}"
        if vec.ndim != 1:
            return None, f"{what} must be one-dimensional, got shape {vec.shape}"
        if vec.shape[0] != self.dimension:
            return None, (f"{what} has {vec.shape[0]} dimensions but this collection stores {self.dimension}-d "
                          f"vectors ({self.store.embedder.name}); embed with the same model")
        if not np.isfinite(vec).all():
            return None, f"{what} contains NaN or infinite values"
        if not np.any(vec):
            return None, f"{what} is all zeros (it has no direction to compare)"
        return vec, None

    async def add_vectors(self, vectors: List[np.ndarray], attributes: Optional[List[dict]] = None) -> None:
        docs = self._prepare(vectors, attributes)
        if docs:
            await asyncio.to_thread(self.store.upsert_docs, docs)

    def _prepare(self, vectors: Any, attributes: Any) -> list[dict[str, Any]]:
        if isinstance(vectors, np.ndarray):
            vectors = list(vectors) if vectors.ndim == 2 else [vectors]
        if not isinstance(vectors, Sequence) or isinstance(vectors, (str, bytes)):
            raise ValidationError(f"vectors must be a list of arrays, got {type(vectors).__name__} (nothing was written)")
        if attributes is None:
            attributes = [None] * len(vectors)
        if not isinstance(attributes, Sequence) or isinstance(attributes, (str, bytes, Mapping)):
            raise ValidationError(
                f"attributes must be a list with one dict per vector, got {type(attributes).__name__} (nothing was written)"
            )
        if len(attributes) != len(vectors):
            raise ValidationError(
                f"got {len(vectors)} vectors but {len(attributes)} attribute dicts; give one per vector (nothing was written)"
            )
        problems: list[dict[str, Any]] = []
        docs: list[dict[str, Any]] = []
        for i, (value, attrs) in enumerate(zip(vectors, attributes)):
            vec, problem = self._vector(value, f"vector {i}")
            if problem:
                problems.append({"item": i, "field": "vectors", "message": problem})
            try:
                encoded = encode_attributes(attrs, self.scope)
            except ValidationError as exc:
                problems.extend({"item": i, "field": p["field"], "message": f"vector {i}: {p['message']}"}
                                for p in exc.problems)
                continue
            if problem:
                continue
            doc_id = new_id()
            text = next((attrs[k] for k in _TEXT_ATTRIBUTES if isinstance((attrs or {}).get(k), str)
                         and attrs[k].strip()), None)
            docs.append({
                "id": doc_id,
                "text": text or f"(vector {doc_id} of Xaibo index {self.index!r}; no text attribute)",
                "type": DocType.MEMORY.value,
                "scope": self.scope,
                "embedding": vec,
                **encoded.fields,
                **encoded.extras,
                KIND_KEY: "vector",
                INDEX_KEY: self.index,
            })
        if problems:
            raise ValidationError("; ".join(p["message"] for p in problems) + " (nothing was written)", problems)
        return docs

    async def search(self, query_vector: np.ndarray, k: int = 10) -> List[VectorSearchResult]:
        vec, problem = self._vector(query_vector, "query_vector")
        if problem:
            raise ValidationError(problem)
        k = _check_k(k)
        return await asyncio.to_thread(self._search, vec, k)

    def _search(self, vec: np.ndarray, k: int) -> List[VectorSearchResult]:
        hits = self.store.memory_index().search(
            vec, k, SIMILARITY_ONLY, 0.0, scopes=part_scopes([self.scope]), equals={KIND_KEY: "vector", INDEX_KEY: self.index}
        )
        return [
            VectorSearchResult(vector_id=h.id, similarity_score=_unit_score(h.similarity),
                               attributes=decode_attributes(h.metadata))
            for h in hits
        ]


# ---- MemoryProtocol -----------------------------------------------------------------------------------
class BrainMemory(MemoryProtocol):
    """Memories as ``memory`` documents of the store (see the module docstring for the layout).

    Config: ``entity`` (write to ``entity:<name>``, read that entity's and global memories),
    ``source`` (the documents' ``source``: ``chat`` by default), ``window_size`` /
    ``window_overlap`` (the chunker's, default ``BRAIN_CHUNK_WINDOW`` / ``BRAIN_CHUNK_OVERLAP``).
    """

    _KEYS = ("entity", "source", "window_size", "window_overlap")

    def __init__(self, config: Optional[dict] = None, *, store=None, settings=None, chunker=None):
        self.store, own = _resolve_store(store, settings, config, self._KEYS, "BrainMemory")
        self.scope, self.scopes = _scopes_for(own.get("entity"), "BrainMemory")
        self.source = own.get("source", "chat")
        if self.source not in ("chat", "kb", "system", "import"):
            raise ConfigError(f"BrainMemory: source must be one of chat, kb, system, import, got {self.source!r}")
        chunk_config = {k: own[k] for k in ("window_size", "window_overlap") if k in own}
        self.chunker = BrainChunker(chunk_config, settings=self.store.settings, chunker=chunker).chunker

    # -- reads ---------------------------------------------------------------------------------------
    def _visible(self, metadata: Mapping[str, Any]) -> bool:
        return metadata.get("scope", GLOBAL_SCOPE) in self.scopes and not is_part(metadata)

    def _head(self, memory_id: Any):
        if not isinstance(memory_id, str) or not memory_id:
            return None
        docs = self.store.get([memory_id], type=DocType.MEMORY)
        return docs[0] if docs and self._visible(docs[0].metadata) else None

    @staticmethod
    def _as_dict(doc) -> dict:
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

    async def get_memory(self, memory_id: str) -> Optional[dict]:
        doc = await asyncio.to_thread(self._head, memory_id)
        return None if doc is None else self._as_dict(doc)

    async def list_memories(self) -> List[dict]:
        return await asyncio.to_thread(self._list)

    def _list(self) -> List[dict]:
        docs = self.store.get(type=DocType.MEMORY, where={"scope": sorted(self.scopes)})
        heads = [d for d in docs if self._visible(d.metadata)]
        heads.sort(key=lambda d: (d.metadata.get("ts_epoch", 0.0), d.id))
        return [self._as_dict(d) for d in heads]

    async def search_memory(self, query: str, k: int = 10) -> List[MemorySearchResult]:
        _check_text(query, "query")
        k = _check_k(k)
        return await asyncio.to_thread(self._search, query, k)

    def _search(self, query: str, k: int) -> List[MemorySearchResult]:
        vector = self.store.embedder.embed_query(query)
        index = self.store.memory_index()
        fetch = max(4 * k, 16)  # a memory may own several of the top rows: widen until k memories
        while True:
            hits = index.search(vector, fetch, SIMILARITY_ONLY, 0.0, scopes={*self.scopes, *part_scopes(self.scopes)})
            best: dict[str, float] = {}  # memory id -> its best chunk's similarity
            texts: dict[str, str] = {}  # memory id -> its text, when the head itself was a hit
            for hit in hits:
                meta = hit.metadata
                if meta.get(KIND_KEY) == "vector":
                    continue
                if meta.get(CHUNK_KEY):  # a continuation chunk counts for its head, when of its revision
                    head_id = meta.get(MEMORY_ID_KEY)
                    head = index.metadata(head_id) if isinstance(head_id, str) else None
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
            meta = index.metadata(mid)
            if meta is None or mid not in texts:  # deleted meanwhile
                continue
            results.append(MemorySearchResult(memory_id=mid, content=texts[mid], similarity_score=_unit_score(similarity),
                                              attributes=decode_attributes(meta)))
        return results

    # -- writes --------------------------------------------------------------------------------------
    async def store_memory(self, text: str, attributes: Optional[dict] = None) -> str:
        _check_text(text)
        encoded = encode_attributes(attributes, self.scope)  # before anything is chunked or written
        return await asyncio.to_thread(self._store, text, attributes, encoded)

    def _store(self, text: str, attributes: Optional[dict], encoded: _Encoded) -> str:
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

    async def update_memory(self, memory_id: str, text: str, attributes: Optional[dict] = None) -> bool:
        _check_text(text)
        if attributes is not None and not isinstance(attributes, Mapping):
            encode_attributes(attributes)  # raises the standard message
        patch = dict(attributes or {})
        replace = patch.pop(REPLACE, False)
        if not isinstance(replace, bool):
            raise ValidationError(f"attributes[{REPLACE!r}] must be true or false, got {replace!r} (nothing was written)")
        # validate what is given now, so a bad attribute fails before the old memory is read
        encode_attributes({k: v for k, v in patch.items() if v is not None}, self.scope)
        return await asyncio.to_thread(self._update, memory_id, text, patch, replace)

    def _update(self, memory_id: str, text: str, patch: dict, replace: bool) -> bool:
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
            # every chunk of every revision (and a Xaibo head) in one call, then a plain memory's head
            self.store.delete(where={MEMORY_ID_KEY: memory_id}, type=DocType.MEMORY)
            self.store.delete([memory_id], type=DocType.MEMORY)
            return True

    # -- documents -----------------------------------------------------------------------------------
    def _markers(self, memory_id: str, revision: str, chunk: int) -> dict[str, Any]:
        return {KIND_KEY: "memory", MEMORY_ID_KEY: memory_id, CHUNK_KEY: chunk, REVISION_KEY: revision}

    def _head_doc(self, memory_id: str, text: str, encoded: _Encoded, revision: str, chunks: int) -> dict[str, Any]:
        return {
            "id": memory_id, "text": text, "type": DocType.MEMORY.value, "scope": self.scope, "source": self.source,
            **encoded.fields, **encoded.extras, **self._markers(memory_id, revision, 0), CHUNKS_KEY: max(1, chunks),
        }

    def _chunk_docs(self, memory_id: str, chunks: list[str], fields: dict[str, Any], revision: str) -> list[dict]:
        """Continuation chunks 2..n: their own memory documents, with the head's fields."""
        return [
            {
                "id": derived_id("xaibo-chunk", memory_id, revision, str(i)), "text": chunk,
                "type": DocType.MEMORY.value, "scope": self.scope, "source": self.source,
                **fields, **self._markers(memory_id, revision, i),
            }
            for i, chunk in enumerate(chunks[1:], start=1)
        ]

    def _rewrite(self, old, text: str, encoded: _Encoded, *, reset: bool) -> None:
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
        foreign = {k: v for k, v in old.metadata.items() if k not in _MODEL_FIELDS and not k.startswith("xaibo.")}
        metadata = {**foreign, **encoded.extras, **self._markers(memory_id, revision, 0), CHUNKS_KEY: max(1, len(chunks))}
        for key in ("entity", "conversation_id"):
            if key in fields:
                metadata[key] = fields[key]
        self.store.update_memory(
            memory_id, text, importance=fields.get("importance"), tags=fields.get("tags"),
            metadata=metadata, replace_metadata=True,
        )
        stale = [d.id for d in self.store.get(where={MEMORY_ID_KEY: memory_id}, type=DocType.MEMORY)
                 if d.id != memory_id and d.metadata.get(REVISION_KEY) != revision]
        if stale:
            self.store.delete(stale)


__all__ = [
    "XAIBO_AVAILABLE",
    "BrainChunker",
    "BrainEmbedder",
    "BrainMemory",
    "BrainVectorIndex",
    "MemorySearchResult",
    "UnsupportedModality",
    "VectorSearchResult",
    "close_shared_stores",
    "decode_attributes",
    "encode_attributes",
    "register_shared_store",
    "settings_from_config",
    "shared_brain",
    "shared_store",
]
