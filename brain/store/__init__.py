"""The store: typed documents in one Chroma collection.

- :mod:`~brain.store.facade` -- :class:`Store`, the facade over the parts below (callers open it as
  :class:`brain.app.rag_store.RagStore`, which wires the mirror and the persona rule)
- :mod:`~brain.store.chroma` -- the client, the guarded collection, paged reads and chunked writes
- :mod:`~brain.store.plan` -- the typed write steps: ``WritePlan`` in, ``WriteResult`` out
- :mod:`~brain.store.pipeline` -- ids, positions, the memory merge, embedding, the all-or-nothing commit
- :mod:`~brain.store.events` -- one ``WriteEvent`` per write, and its subscribers (indexes, the mirror)
- :mod:`~brain.store.indexes` -- the in-process indexes and turn cache
- :mod:`~brain.store.feed`, :mod:`~brain.store.follower` -- with a Chroma server: every write numbered in a
  change feed, and other processes' writes applied to the in-process state
- :mod:`~brain.store.positions` -- turn and summary positions claimed across processes
- :mod:`~brain.store.reads`, :mod:`~brain.store.retrieval` -- reading and retrieval per type
- :mod:`~brain.store.mirror_link` -- what the store relies on of the mirror that follows its writes

:class:`Store`'s methods are the data model's API; the machinery's own operations on a store (attaching
the feed, following the live collection, rebuilding or saving the indexes, applying formation's changes,
recording memory use, ...) are functions of the module that owns them, taking the store.
"""

from brain.model.ids import derived_id, memory_id, new_id
from brain.store.chroma import ChromaAccess, GuardedCollection, missing_store, open_client, open_cosine_collection
from brain.store.events import WriteEvent, WriteEvents, WriteSubscriber
from brain.store.facade import Store
from brain.store.history import AppliedChanges, MemoryChange
from brain.store.plan import PreparedDoc, WritePlan, WriteResult
from brain.store.retrieval import SIMILARITY_ONLY

__all__ = [
    "SIMILARITY_ONLY",
    "AppliedChanges",
    "ChromaAccess",
    "GuardedCollection",
    "MemoryChange",
    "PreparedDoc",
    "Store",
    "WriteEvent",
    "WriteEvents",
    "WritePlan",
    "WriteResult",
    "WriteSubscriber",
    "derived_id",
    "memory_id",
    "missing_store",
    "new_id",
    "open_client",
    "open_cosine_collection",
]
