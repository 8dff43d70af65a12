# typing.List / Optional / Dict on purpose: the protocol methods' signatures equal Xaibo's, annotations included
# ruff: noqa: UP006, UP035, UP045
"""Xaibo's ``VectorIndexProtocol``: raw vectors as ``memory`` documents of the store.

No ``from __future__ import annotations`` here: Xaibo resolves a module's dependencies from the
*evaluated* annotations of ``__init__`` (see :mod:`brain.shells.xaibo`).
"""

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, List, Optional

import numpy as np

from brain.model.errors import ConfigError, Problem, ValidationError, joined
from brain.model.ids import new_id
from brain.model.schemas import DocType, check_k
from brain.shells.xaibo.attributes import decode_attributes, encode_attributes
from brain.shells.xaibo.keys import INDEX_KEY, PART_OF_KEY, TEXT_ATTRIBUTES, vector_index_part_of
from brain.shells.xaibo.protocol_types import VectorIndexProtocol, VectorSearchResult, XaiboDict
from brain.shells.xaibo.shared import resolve_store, scopes_for, unit_score
from brain.store import SIMILARITY_ONLY
from brain.store.indexes import memory_index
from brain.store.memory_query import MemoryQuery


class BrainVectorIndex(VectorIndexProtocol):
    """Vectors and their attributes in the ``conversations`` collection.

    Each vector is a ``memory`` document, a part of its index (``part_of`` = ``xaibo-index:<index>``, and
    ``xaibo.index=<index>``); its text is the first of the attributes ``chunk_text``, ``text``, ``content`` (what
    Xaibo's ``VectorMemory`` passes), else a placeholder naming the row. Vectors must have the collection's
    dimension, finite values and not be all zero; a batch with one bad vector or attribute writes
    nothing. ``search`` returns only this index's rows, exactly (cosine, floored at 0).

    Config: ``index`` (a name, default ``default``; separate indexes share the collection),
    ``entity`` (rows in that entity's scope instead of global, which keeps them out of the
    assistant's global memories).
    """

    _KEYS = ("index", "entity")

    def __init__(self, config: Optional[dict[str, Any]] = None, *, store=None, settings=None):  # type: ignore[no-untyped-def]  # xaibo injects what any annotation but config names
        self.store, own = resolve_store(store, settings, config, self._KEYS, "BrainVectorIndex")
        self.index = own.get("index", "default")
        if not isinstance(self.index, str) or not self.index.strip():
            raise ConfigError(f"BrainVectorIndex: index must be a non-empty name, got {self.index!r}")
        self.scope, _ = scopes_for(own.get("entity"), "BrainVectorIndex")

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
            return None, (
                f"{what} has {vec.shape[0]} dimensions but this collection stores {self.dimension}-d "
                f"vectors ({self.store.embedder.name}); embed with the same model"
            )
        if not np.isfinite(vec).all():
            return None, f"{what} contains NaN or infinite values"
        if not np.any(vec):
            return None, f"{what} is all zeros (it has no direction to compare)"
        return vec, None

    async def add_vectors(self, vectors: List[np.ndarray], attributes: Optional[List[XaiboDict]] = None) -> None:
        docs = self._prepare(vectors, attributes)
        if docs:
            await asyncio.to_thread(self.store.upsert_docs, docs)

    def _prepare(self, vectors: Any, attributes: Any) -> list[dict[str, Any]]:
        if isinstance(vectors, np.ndarray):
            vectors = list(vectors) if vectors.ndim == 2 else [vectors]
        if not isinstance(vectors, Sequence) or isinstance(vectors, (str, bytes)):
            raise ValidationError(
                f"vectors must be a list of arrays, got {type(vectors).__name__} (nothing was written)"
            )
        if attributes is None:
            attributes = [None] * len(vectors)
        if not isinstance(attributes, Sequence) or isinstance(attributes, (str, bytes, Mapping)):
            raise ValidationError(
                f"attributes must be a list with one dict per vector, got {type(attributes).__name__} "
                "(nothing was written)"
            )
        if len(attributes) != len(vectors):
            raise ValidationError(
                f"got {len(vectors)} vectors but {len(attributes)} attribute dicts; give one per vector "
                "(nothing was written)"
            )
        problems: list[Problem] = []
        docs: list[dict[str, Any]] = []
        for i, (value, attrs) in enumerate(zip(vectors, attributes)):
            vec, problem = self._vector(value, f"vector {i}")
            if problem:
                problems.append(Problem("vectors", problem, i))
            try:
                encoded = encode_attributes(attrs, self.scope)
            except ValidationError as exc:
                problems.extend(Problem(p.field, f"vector {i}: {p.message}", i) for p in exc.problems)
                continue
            if problem:
                continue
            doc_id = new_id()
            text = next(
                (attrs[k] for k in TEXT_ATTRIBUTES if isinstance((attrs or {}).get(k), str) and attrs[k].strip()), None
            )
            docs.append(
                {
                    "id": doc_id,
                    "text": text or f"(vector {doc_id} of Xaibo index {self.index!r}; no text attribute)",
                    "type": DocType.MEMORY.value,
                    "scope": self.scope,
                    "embedding": vec,
                    **encoded.fields,
                    **encoded.extras,
                    PART_OF_KEY: vector_index_part_of(self.index),
                    INDEX_KEY: self.index,
                }
            )
        if problems:
            raise ValidationError(joined(problems) + " (nothing was written)", problems)
        return docs

    async def search(self, query_vector: np.ndarray, k: int = 10) -> List[VectorSearchResult]:
        vec, problem = self._vector(query_vector, "query_vector")
        if problem or vec is None:
            raise ValidationError(problem or "query_vector is missing; give one vector")
        k = check_k(k)
        return await asyncio.to_thread(self._search, vec, k)

    def _search(self, vec: np.ndarray, k: int) -> List[VectorSearchResult]:
        hits = memory_index(self.store).search(
            MemoryQuery(
                vec,
                k,
                SIMILARITY_ONLY,
                0.0,
                scopes=[self.scope],
                rows="parts",
                equals={PART_OF_KEY: vector_index_part_of(self.index)},
            )
        )
        return [
            VectorSearchResult(
                vector_id=h.id, similarity_score=unit_score(h.similarity), attributes=decode_attributes(h.metadata)
            )
            for h in hits
        ]
