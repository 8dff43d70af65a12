"""Xaibo's four memory protocols, implemented over brain's store (the Xaibo integration).
Agents built with Xaibo (``pip install brain[xaibo]``) use brain as their memory module with no glue
code: name a class below in the agent's YAML and Xaibo wires it (each class subclasses the Xaibo
protocol it implements, so Xaibo sees what it provides).

- :class:`BrainChunker` (``ChunkingProtocol``): the token-window chunker of :mod:`brain.rules.chunking`.
- :class:`BrainEmbedder` (``EmbeddingProtocol``): text through the configured embedder; images and
  audio raise :class:`UnsupportedModality`.
- :class:`BrainVectorIndex` (``VectorIndexProtocol``): raw vectors in the ``conversations``
  collection, as ``memory`` documents that are parts of their index (``part_of``).
- :class:`BrainMemory` (``MemoryProtocol``): memories as ``memory`` documents, so they are also
  ranked by ``RagStore.retrieve_memories``, written through to the Engram mirror and exported to PAM.

How memories are stored
-----------------------
A memory is one *head* document: id = the memory id, text = the whole text, vector = the store's
embedding of that text (the embedder reads its first ``max_tokens``, which covers the first chunk).
When the chunker splits the text into several windows, chunks 2..n are stored as well, as memory
documents of their own (text = the window) with the memory's importance, tags and scope, each a part
of its memory (the store's ``part_of`` = the memory's id). Every document of a memory carries a ``xaibo.revision``
that changes with every write; a chunk counts only while its revision equals its head's. Writes go: new chunks, then
the head (which switches the revision), then the old chunks are deleted — so a write interrupted at any point never
lets a stale chunk be returned, and the next write of that memory clears the leftovers.
Deleting a memory removes the head and every chunk of every revision.

- Ids: a new memory gets the store's id for its text and scope (``doc-<uuid5>``), so storing the same
  text again (case and whitespace aside) returns the same id and merges by the store's rule
  (:mod:`brain.rules.memories`): the first spelling of the text stays, attributes are united (the new value
  wins per key), importance is the higher, tags are united. A memory
  written by the rest of the assistant with that text is the same memory. (After
  ``update_memory`` changed a memory's text, its id stays; storing that new text again creates a
  second memory, as with ``RagStore.update_memory``.)
- Scope: the module's ``entity`` (config) scopes writes to ``entity:<name>``; reads then see that
  entity's and global memories, like ``retrieve_memories(entity=...)``. Without it: global ones.
  ``BrainMemory`` sees every memory document in its scopes (also those the assistant wrote), except
  the rows of a :class:`BrainVectorIndex` and continuation chunks.
- Parts are not memories: continuation chunks and vector-index rows carry ``part_of``, which the
  memory index never ranks as a memory, so ``RagStore.retrieve_memories`` and the chat context
  rank each memory once, by its head (the whole text), and PAM exports leave them out; the Engram
  mirror keeps every row, so a restore brings them back.
- Attributes: ``importance`` (an integer 1..5), ``tags`` (a list of strings), ``entity`` (the name of
  the module's own entity scope) and ``conversation_id`` (``conv-...``) become the store's own fields when
  valid, otherwise they are kept like any other attribute. Other attributes are stored as metadata
  ``xaibo.attr.<key>`` when Chroma can store the value as is (string, number, boolean, non-empty
  list of one of those) and as JSON text under ``xaibo.json.<key>`` otherwise (objects, empty or
  mixed lists, null); both come back as given. Values JSON cannot express (bytes, NaN, objects of
  other classes) are refused with :class:`~brain.model.errors.ValidationError`, and nothing is written.
- ``update_memory(id, text, attributes)`` merges ``attributes`` into the old ones the way JSON Merge
  Patch (RFC 7396) does at the top level: a key set to ``None`` is removed, other keys are set.
  ``{"$replace": True, ...}`` replaces the attributes wholesale instead (the store's own fields that
  came from attributes then return to their defaults unless given). The text is re-chunked and
  re-embedded; importance, tags and so on change only when given.
- ``similarity_score`` is the cosine similarity floored at 0 (so in 0..1); a memory's score is its
  best chunk's, and a search returns each memory once.

Construction: Xaibo calls ``Cls(config={...})``; the config holds the module's own keys (see each
class) and any :class:`~brain.config.Settings` field (``data_dir``, ``collection``, ``embedder``,
``chroma_url``, ...). Modules with the same storage settings share one :class:`~brain.app.core.Brain` (and
so one :class:`RagStore`) per process (:func:`shared_store`; :func:`register_shared_store` hands them
the Brain or store the application already opened). From Python pass ``store=`` (or ``settings=``) instead.

The modules of this package that define Xaibo modules must not use ``from __future__ import annotations``:
Xaibo resolves a module's dependencies from the *evaluated* annotations of ``__init__`` (every annotated parameter but
``config`` is a dependency it injects, and a ``-> None`` would be taken for one). That is also why
``store``, ``settings``, ``embedder`` and ``chunker`` are left unannotated.

Layout: :mod:`.protocol_types` (Xaibo's protocol classes, or stand-ins without the extra),
:mod:`.keys` (the metadata keys the adapter writes), :mod:`.attributes` (attributes <-> metadata),
:mod:`.shared` (configuration and the process's shared stores), :mod:`.chunker`, :mod:`.embedder`,
:mod:`.vector_index` and :mod:`.memory` (one protocol each).
"""

from brain.model.errors import UnsupportedModality
from brain.model.ids import memory_id as derived_memory_id
from brain.shells.xaibo.attributes import decode_attributes, encode_attributes
from brain.shells.xaibo.chunker import BrainChunker
from brain.shells.xaibo.embedder import BrainEmbedder
from brain.shells.xaibo.keys import (
    ATTR_PREFIX,
    CHUNKS_KEY,
    INDEX_KEY,
    JSON_PREFIX,
    MAPPED_FIELDS,
    MAPPED_KEY,
    PART_OF_KEY,
    REPLACE,
    REVISION_KEY,
)
from brain.shells.xaibo.memory import BrainMemory
from brain.shells.xaibo.protocol_types import XAIBO_AVAILABLE, MemorySearchResult, VectorSearchResult
from brain.shells.xaibo.shared import (
    close_shared_stores,
    register_shared_store,
    settings_from_config,
    shared_brain,
    shared_store,
)
from brain.shells.xaibo.vector_index import BrainVectorIndex

__all__ = [
    "ATTR_PREFIX",
    "CHUNKS_KEY",
    "INDEX_KEY",
    "JSON_PREFIX",
    "MAPPED_FIELDS",
    "MAPPED_KEY",
    "PART_OF_KEY",
    "REPLACE",
    "REVISION_KEY",
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
    "derived_memory_id",
    "encode_attributes",
    "register_shared_store",
    "settings_from_config",
    "shared_brain",
    "shared_store",
]
