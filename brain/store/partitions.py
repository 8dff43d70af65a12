"""The in-process indexes split by scope, so that a worker's memory and a query's cost are set by the entity
it serves, not by every entity of the service.

A **part** holds one scope's rows of every indexed type (one :class:`~brain.store.memory_index.MemoryIndex`
per type). The global part is always resident. An entity's part is read from Chroma on its first request
(its rows by a ``where`` on ``scope``, one query for every indexed type) and kept while the parts fit
BRAIN_INDEX_MEMORY_MB; past it, the least recently served entities are evicted first, and an evicted part
is simply read again when it is next asked for. The part being served is never evicted, so one entity
larger than the budget is still served (the budget is then exceeded by that one part).

A search reads only the parts of the scopes it may see (:func:`~brain.store.memory_index.search_parts`,
exact over their union), so a row of another entity is never a candidate: the scope boundary is a part
boundary. A write reaches the parts that are resident (the global one, and its entity's when loaded); a
write to an entity that is not resident needs nothing, since its part is read from Chroma when loaded.

Loads and writes are serialised by the store's lock, so a part is exact when installed: a write that
reached Chroma before the load's read is in what the load read, and one after it is applied to the
installed part when its event is committed.

Memory per part: :meth:`MemoryIndex.footprint` (its arrays, plus :data:`ROW_OBJECT_BYTES` per row for the
id, text and metadata Python holds; measured in ``bench/bench_partitions.py``).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from brain.model.results import GatedHits, MemoryHit
from brain.model.schemas import GLOBAL_SCOPE, check_scope
from brain.model.schemas.values import ENTITY_SCOPE_PREFIX
from brain.store.memory_index import MemoryIndex, search_parts
from brain.store.memory_query import MemoryQuery

log = logging.getLogger(__name__)

#: a part: one scope's index of each indexed type
Part = dict[str, MemoryIndex]
#: reads one scope's rows (every indexed type) from the store of record: pages of Chroma result dicts
#: (``ids``, ``documents``, ``metadatas``, ``embeddings``); None reads every scope's rows
Loader = Callable[[str | None], Iterable[dict[str, Any]]]


class PartKeeper(Protocol):
    """Where evicted parts are kept and read back from (:class:`brain.store.part_files.PartFiles`)."""

    def keep(self, scope: str, part: Part) -> None: ...

    def load(self, scope: str) -> Part | None: ...


class Partitions:
    """The parts of one store's indexes: the global part, and entity parts under a byte budget (LRU)."""

    def __init__(self, types: Sequence[str], dimension: int, budget_bytes: int, loader: Loader, lock: threading.RLock):
        self.types = tuple(types)
        self.dimension = dimension
        self.budget_bytes = budget_bytes
        self._load = loader
        self._lock = lock
        self.global_part: Part = self._empty()
        self.entities: OrderedDict[str, Part] = OrderedDict()  # least recently served first
        self._bytes: dict[str, int] = {}  # footprint of each resident entity part
        self._scope_of: dict[str, str] = {}  # doc id -> scope of the resident part holding it
        self._complete = False  # every entity part resident (after a search of every scope), until an eviction
        self.files: PartKeeper | None = None  # evicted parts' files (the embedded store)
        self.loads = 0
        self.file_loads = 0  # loads from a part file rather than Chroma
        self.reloads = 0  # loads of a part evicted before
        self.evictions = 0
        self.load_seconds = 0.0
        self._evicted: set[str] = set()
        self.views = {t: PartitionedIndex(self, t) for t in self.types}

    def _empty(self, sizes: dict[str, int] | None = None) -> Part:
        return {t: MemoryIndex(self.dimension, capacity=max((sizes or {}).get(t, 0), 16)) for t in self.types}

    # ---- loading -----------------------------------------------------------------------------------
    def load_global(self) -> None:
        """Read the global part from the store of record."""
        with self._lock:
            self.global_part = self._read(GLOBAL_SCOPE)

    def install(self, scope: str, part: Part) -> None:
        """Make ``part`` (restored from a snapshot, say) the resident part of ``scope``."""
        with self._lock:
            if scope == GLOBAL_SCOPE:
                self.global_part = part
            else:
                self.entities[scope] = part
                self._bytes[scope] = _footprint(part)
            self._register(scope, part)

    def _read(self, scope: str) -> Part:
        pages = list(self._load(scope))
        sizes: dict[str, int] = {}
        for page in pages:
            for meta in page["metadatas"]:
                sizes[meta.get("type")] = sizes.get(meta.get("type"), 0) + 1
        part = self._empty(sizes)
        for page in pages:
            _fill(part, page, scope)
        self._register(scope, part)
        return part

    def _register(self, scope: str, part: Part) -> None:
        for index in part.values():
            for doc_id in index.ids:
                self._scope_of[doc_id] = scope

    def parts(self, scopes: Collection[str] | None) -> list[Part]:
        """The parts a search of ``scopes`` reads (None: every scope), global first, each loaded if need be
        and made the most recently served."""
        with self._lock:
            if scopes is None:
                return self._every_part()
            wanted = sorted(s for s in set(scopes) if s != GLOBAL_SCOPE and s.startswith(ENTITY_SCOPE_PREFIX))
            out = [self.global_part] if GLOBAL_SCOPE in scopes else []
            for scope in wanted:
                out.append(self._entity(scope, keep=wanted))
            return out

    def _entity(self, scope: str, keep: Collection[str] = ()) -> Part:
        part = self.entities.get(scope)
        if part is not None:
            self.entities.move_to_end(scope)
            return part
        started = time.perf_counter()
        with paused_gc():
            part = None if self.files is None else self.files.load(scope)
            if part is None:
                part = self._read(scope)
                if self.files is not None:
                    self.files.keep(scope, part)
            else:
                self._register(scope, part)
                self.file_loads += 1
        self.load_seconds += time.perf_counter() - started
        self.loads += 1
        if scope in self._evicted:
            self.reloads += 1
            self._evicted.discard(scope)
        self.entities[scope] = part
        self._bytes[scope] = _footprint(part)
        self._shrink(keep={scope, *keep})
        return part

    def _every_part(self) -> list[Part]:
        """Every scope's part: those not resident are read in one pass over the collection (an operator's
        search of every scope); the budget is applied again afterwards."""
        if not self._complete:
            started = time.perf_counter()
            missing: dict[str, list[dict[str, object]]] = {}
            for page in self._load(None):
                for j, meta in enumerate(page["metadatas"]):
                    scope = meta.get("scope", GLOBAL_SCOPE)
                    if not isinstance(scope, str) or scope == GLOBAL_SCOPE or scope in self.entities:
                        continue
                    missing.setdefault(scope, []).append({key: page[key][j] for key in _PAGE_KEYS})
            for scope, rows in missing.items():
                part = self._empty()
                well_formed = _well_formed(scope)
                _fill(part, _as_page(rows), scope if well_formed else None)
                if well_formed:  # a malformed scope's rows are no part's: the global part reports them
                    self.entities[scope] = part
                    self._bytes[scope] = _footprint(part)
                    self._register(scope, part)
                    self.loads += 1
                else:
                    _report(self.global_part, part)
            self.load_seconds += time.perf_counter() - started
            self._complete = True
        out = [self.global_part, *(self.entities[s] for s in sorted(self.entities))]
        self._shrink(keep=())
        return out

    def _shrink(self, keep: Collection[str]) -> None:
        """Evict the least recently served entity parts (not those in ``keep``) until the parts fit."""
        total = self.resident_bytes()
        for scope in list(self.entities):
            if total <= self.budget_bytes:
                break
            if scope in keep:
                continue
            part = self.entities.pop(scope)
            total -= self._bytes.pop(scope, 0)
            for index in part.values():
                for doc_id in index.ids:
                    if self._scope_of.get(doc_id) == scope:
                        del self._scope_of[doc_id]
            self.evictions += 1
            self._evicted.add(scope)
            self._complete = False
            if self.files is not None:
                self.files.keep(scope, part)

    # ---- following writes --------------------------------------------------------------------------
    def upsert(
        self,
        doc_type: str,
        ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str],
        metas: Sequence[dict[str, object]],
    ) -> None:
        """Rows of ``doc_type`` written: each goes to its scope's part when resident (a row whose scope is not
        an entity's goes to the global part, which keeps it when it is global and reports it when it is not);
        an id that moved to another scope leaves its old part."""
        with self._lock:
            groups: dict[str, list[int]] = {}
            for j, doc_id in enumerate(ids):
                scope = metas[j].get("scope", GLOBAL_SCOPE)
                target = scope if isinstance(scope, str) and scope in self.entities else None
                if target is None and not (isinstance(scope, str) and scope.startswith(ENTITY_SCOPE_PREFIX)):
                    target = GLOBAL_SCOPE
                before = self._scope_of.get(doc_id)
                if before is not None and before != target:
                    self._remove_from(before, [doc_id])
                if target is not None:
                    groups.setdefault(target, []).append(j)
                else:  # an entity not resident: read with its part when loaded
                    self._complete = False
            for scope, rows in groups.items():
                index = self._resident(scope)[doc_type]
                index.upsert([ids[j] for j in rows], vectors[rows], [texts[j] for j in rows], [metas[j] for j in rows])
                for j in rows:
                    if ids[j] in index:
                        self._scope_of[ids[j]] = scope
                    elif self._scope_of.get(ids[j]) == scope:
                        del self._scope_of[ids[j]]
                if scope != GLOBAL_SCOPE:
                    self._bytes[scope] = _footprint(self.entities[scope])
            if any(s != GLOBAL_SCOPE for s in groups):
                self._shrink(keep=set(groups))

    def remove(self, ids: Iterable[str], doc_type: str | None = None) -> int:
        """Rows deleted (from ``doc_type``'s index only, or every type's); returns how many were held."""
        with self._lock:
            by_scope: dict[str, list[str]] = {}
            for doc_id in ids:
                # an id no part holds may still be a problem the global part reports (a malformed scope)
                by_scope.setdefault(self._scope_of.get(doc_id, GLOBAL_SCOPE), []).append(doc_id)
            return sum(self._remove_from(scope, held, doc_type) for scope, held in by_scope.items())

    def _remove_from(self, scope: str, ids: list[str], doc_type: str | None = None) -> int:
        part = self._resident(scope)
        removed = sum(index.remove(ids) for t, index in part.items() if doc_type is None or t == doc_type)
        for doc_id in ids:
            if self._scope_of.get(doc_id) == scope and not any(doc_id in index for index in part.values()):
                del self._scope_of[doc_id]
        if scope != GLOBAL_SCOPE and scope in self.entities:
            self._bytes[scope] = _footprint(part)
        return removed

    def _resident(self, scope: str) -> Part:
        return self.global_part if scope == GLOBAL_SCOPE else self.entities[scope]

    def index_of(self, doc_id: str, doc_type: str) -> MemoryIndex | None:
        """The resident index holding ``doc_id`` among ``doc_type``'s, or None."""
        with self._lock:
            scope = self._scope_of.get(doc_id)
            if scope is None:
                return None
            index = self._resident(scope)[doc_type]
            return index if doc_id in index else None

    def scope_of(self, doc_id: str) -> str | None:
        """The scope of the resident part holding ``doc_id``, or None."""
        with self._lock:
            return self._scope_of.get(doc_id)

    def resident(self) -> list[Part]:
        """The resident parts, global first."""
        with self._lock:
            return [self.global_part, *self.entities.values()]

    def resident_scopes(self) -> Iterator[tuple[str, Part]]:
        with self._lock:
            yield from [(GLOBAL_SCOPE, self.global_part), *self.entities.items()]

    # ---- what is resident ----------------------------------------------------------------------------
    def resident_bytes(self) -> int:
        return _footprint(self.global_part) + sum(self._bytes.values())

    def stats(self) -> dict[str, object]:
        """What is resident, what was evicted and how often a part had to be read."""
        with self._lock:
            return {
                "budget_mb": round(self.budget_bytes / 2**20, 1),
                "resident_mb": round(self.resident_bytes() / 2**20, 2),
                "global_rows": sum(len(index) for index in self.global_part.values()),
                "resident_entities": len(self.entities),
                "resident_entity_rows": sum(len(i) for part in self.entities.values() for i in part.values()),
                "loads": self.loads,
                "loads_from_files": self.file_loads,
                "reloads": self.reloads,
                "evictions": self.evictions,
                "load_seconds": round(self.load_seconds, 3),
            }


_PAGE_KEYS = ("ids", "documents", "metadatas", "embeddings")


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: reading a part (or a snapshot) creates a few objects per row and
    no cycles, and the collections those allocations trigger would double the load time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _well_formed(scope: str) -> bool:
    """Whether ``scope`` is an entity's scope in canonical form (a part of its own)."""
    try:
        return check_scope(scope) == scope and scope != GLOBAL_SCOPE
    except ValueError:
        return False


def _as_page(rows: list[dict[str, object]]) -> dict[str, object]:
    return {key: [row[key] for row in rows] for key in _PAGE_KEYS}


def _fill(part: Part, page: dict[str, Any], scope: str | None) -> None:
    """Add a page's rows of ``scope`` (every row when None) to the part's index of their type."""
    vectors = np.asarray(page["embeddings"], dtype=np.float32)
    for doc_type, index in part.items():
        rows = [
            j
            for j, m in enumerate(page["metadatas"])
            if m and m.get("type") == doc_type and (scope is None or m.get("scope", GLOBAL_SCOPE) == scope)
        ]
        if rows:
            index.upsert(
                [page["ids"][j] for j in rows],
                vectors[rows],
                [page["documents"][j] or "" for j in rows],
                [page["metadatas"][j] for j in rows],
            )


def _report(into: Part, unusable: Part) -> None:
    """Record, in ``into``'s indexes, the problems of rows that belong to no part (a malformed scope)."""
    for doc_type, index in unusable.items():
        into[doc_type].note_problems(index.problems())


def _footprint(part: Part) -> int:
    return sum(index.footprint() for index in part.values())


class PartitionedIndex:
    """One indexed type's rows across the parts: what a caller of the store's index sees. Searches read the
    parts of the scopes they name; lookups by id and listings see the resident parts."""

    def __init__(self, partitions: Partitions, doc_type: str):
        self._partitions = partitions
        self.doc_type = doc_type

    def _indexes(self, parts: Iterable[Part]) -> list[MemoryIndex]:
        return [part[self.doc_type] for part in parts]

    def search(self, query: MemoryQuery) -> GatedHits[MemoryHit]:
        """:func:`search_parts` over the parts of ``query.scopes`` (every part when None)."""
        parts = self._indexes(self._partitions.parts(query.scopes))
        if not parts:
            return GatedHits(floor=query.weights.floor, margin=query.weights.margin)
        return search_parts(parts, query)

    def upsert(
        self, ids: Sequence[str], vectors: np.ndarray, texts: Sequence[str], metadatas: Sequence[dict[str, Any]]
    ) -> None:
        self._partitions.upsert(self.doc_type, ids, vectors, texts, metadatas)

    def remove(self, ids: Iterable[str]) -> int:
        return self._partitions.remove(ids, self.doc_type)

    def set_last_used(self, used: dict[str, float]) -> dict[str, dict[str, object]]:
        """:meth:`MemoryIndex.set_last_used` on the resident rows."""
        out: dict[str, dict[str, object]] = {}
        for doc_id, epoch in used.items():
            index = self._partitions.index_of(doc_id, self.doc_type)
            if index is not None:
                out.update(index.set_last_used({doc_id: epoch}))
        return out

    def metadata(self, doc_id: str) -> dict[str, object] | None:
        index = self._partitions.index_of(doc_id, self.doc_type)
        return None if index is None else index.metadata(doc_id)

    def document(self, doc_id: str) -> tuple[str, dict[str, object]] | None:
        """A resident row's text and metadata (as stored), or None (not resident, or not of this type)."""
        index = self._partitions.index_of(doc_id, self.doc_type)
        return None if index is None else index.document(doc_id)

    def metadatas(self, scopes: Collection[str] | None = None) -> list[dict[str, object]]:
        """Copies of the metadata of every row of ``scopes`` (None: every scope)."""
        return [m for index in self._indexes(self._partitions.parts(scopes)) for m in index.metadatas()]

    def problems(self) -> dict[str, dict[str, str]]:
        return {
            doc_id: p for index in self._indexes(self._partitions.resident()) for doc_id, p in index.problems().items()
        }

    def __len__(self) -> int:
        return sum(len(index) for index in self._indexes(self._partitions.resident()))

    def __contains__(self, doc_id: str) -> bool:
        return self._partitions.index_of(doc_id, self.doc_type) is not None

    @property
    def ids(self) -> list[str]:
        return [i for index in self._indexes(self._partitions.resident()) for i in index.ids]

    def nbytes(self) -> int:
        return sum(index.nbytes() for index in self._indexes(self._partitions.resident()))


__all__ = ["Loader", "Part", "PartKeeper", "PartitionedIndex", "Partitions"]
