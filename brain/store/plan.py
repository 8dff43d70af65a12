"""The typed steps of a write: a validated :class:`WritePlan` of :class:`PreparedDoc` in, a
:class:`WriteResult` (ids and positions, in input order) out.

:func:`plan_write` checks a whole batch and raises one :class:`~brain.model.errors.ValidationError`
listing every problem, so nothing of a bad batch is embedded or stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from brain.model.errors import BrainError, Problem, ValidationError
from brain.model.results import Document
from brain.model.schemas import (
    BaseMetadata,
    DocType,
    MemoryMetadata,
    memory_text_problem,
    read_for_rewrite,
    utc_now,
    validate_metadata,
)
from brain.rules.memories import created
from brain.rules.ranking import to_unit_length


@dataclass(frozen=True, slots=True)
class PreparedDoc:
    """One document of a write, validated. ``id`` is None until assigned; ``derived``: the id was
    derived from the memory's scope and text (so another text may have to take the next one).
    ``vector`` is unit length, or None until embedded."""

    id: str | None
    text: str
    metadata: Any  # the type's metadata model (brain.model.schemas)
    vector: np.ndarray | None = None
    derived: bool = False

    @property
    def type(self) -> str:
        return str(self.metadata.type)

    @property
    def key(self) -> str:
        """The id, once assigned (the pipeline assigns every id before it reads one)."""
        if self.id is None:
            raise BrainError("a document's id was read before the write pipeline assigned it")
        return self.id

    @property
    def embedded(self) -> np.ndarray:
        """The vector, once embedded (the pipeline embeds every document before it commits)."""
        if self.vector is None:
            raise BrainError(f"document {self.id!r} was committed before it was embedded")
        return self.vector

    def with_(self, **changes: Any) -> PreparedDoc:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class WritePlan:
    """A validated batch, in input order."""

    docs: tuple[PreparedDoc, ...]


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write stored: ``ids`` in input order (a repeated document repeats its id), and the
    ``positions`` assigned: ``turn_index`` of turns and ``summary_index`` of summaries, by id.
    ``sequence``: the write's number (with a change feed, its place among every process's writes, for
    reads that ask for at least it); None when nothing needed writing."""

    ids: tuple[str, ...]
    positions: Mapping[str, int]
    sequence: int | None = None

    def position(self, doc_id: str) -> int:
        return self.positions[doc_id]


#: the per-conversation position of a type, where it has one
POSITION_FIELDS = {"turn": "turn_index", "summary": "summary_index"}


#: what to do about a memory whose stored fields cannot be read any more, when a write must rewrite it
UNREADABLE_MEMORY = "delete it and store it again (nothing was written)"


def as_memory(meta: BaseMetadata) -> MemoryMetadata:
    """``meta`` read with the memory model (``read_stored`` / ``read_for_rewrite`` of a memory), typed as one."""
    if not isinstance(meta, MemoryMetadata):
        raise BrainError(f"expected memory metadata, got {type(meta).__name__}")
    return meta


def stored_memory(old: Document) -> MemoryMetadata:
    """Memory ``old``'s metadata as stored, read for a rewrite (:data:`UNREADABLE_MEMORY` when it cannot be)."""
    return as_memory(read_for_rewrite(DocType.MEMORY, old.id, old.metadata, UNREADABLE_MEMORY))


def memory_edit(
    old: Any,
    text: str | None,
    *,
    importance: int | None,
    tags: Any,
    extra: Mapping[str, object],
    replace_metadata: bool,
    timestamp: Any,
) -> dict[str, object]:
    """The document that replaces memory ``old`` (a Document with its vector) in an in-place edit:
    the given values replace the old ones; ``created_at`` keeps the first time; an unchanged text
    keeps its vector (a new one is embedded again)."""
    old_meta = stored_memory(old)
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
    doc = {**meta, "text": old.text if text is None else text, "id": old.id, "type": DocType.MEMORY.value}
    if text is None or text == old.text:
        doc["embedding"] = old.embedding
    return doc


def check_vector(value: object, dimension: int) -> tuple[np.ndarray | None, str | None]:
    """``value`` as a unit-length float32 vector of ``dimension``, or (None, what is wrong)."""
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        return None, "embedding must be a list of numbers"
    if vec.ndim != 1 or vec.shape[0] != dimension:
        got = vec.shape[0] if vec.ndim == 1 else f"shape {vec.shape}"
        return None, f"embedding has {got} dimensions; this collection stores {dimension}-d vectors"
    if not np.isfinite(vec).all():
        return None, "embedding contains NaN or Inf values"
    if not np.any(vec):
        return None, "embedding is all zeros"
    return to_unit_length(vec)[0], None


def plan_write(docs: Sequence[Mapping[str, Any]], dimension: int) -> WritePlan:
    """Validate a whole batch ``[{"text", "type", "id"?, "embedding"?, **metadata}, ...]``; raise one
    ValidationError listing every problem, or return it as a plan."""
    if isinstance(docs, Mapping) or not isinstance(docs, Sequence):
        raise ValidationError("documents must be a list of dicts", [Problem("docs", "not a list")])
    now = utc_now()
    prepared: list[PreparedDoc] = []
    problems: list[Problem] = []
    for i, raw in enumerate(docs):
        if not isinstance(raw, Mapping):
            problems.append(Problem("document", f"document must be a dict, got {type(raw).__name__}", item=i))
            continue
        data = dict(raw)
        text = data.pop("text", None)
        doc_type = data.pop("type", None)
        doc_id = data.pop("id", None)
        embedding = data.pop("embedding", None)
        item: list[Problem] = []
        if not isinstance(text, str) or not text.strip():
            item.append(Problem("text", "text must be a non-empty string", item=i))
        elif doc_type in (DocType.MEMORY, DocType.MEMORY.value) and (too_long := memory_text_problem(text)):
            item.append(Problem("text", too_long, item=i))
        if doc_id is not None and (not isinstance(doc_id, str) or not doc_id.strip()):
            item.append(Problem("id", f"id must be a non-empty string, got {doc_id!r}", item=i))
        if data.get("timestamp") is None:
            data["timestamp"] = now
        for optional in ("scope", "source"):
            if data.get(optional) is None:
                data.pop(optional, None)
        meta = None
        try:
            meta = validate_metadata(doc_type, data)
        except ValidationError as exc:
            found = exc.problems or [Problem("metadata", str(exc))]
            item.extend(Problem(p["field"], p["message"], item=i) for p in found)
        vec = None
        if embedding is not None:
            vec, problem = check_vector(embedding, dimension)
            if problem:
                item.append(Problem("embedding", problem, item=i))
        if item:
            problems.extend(item)
            continue
        prepared.append(PreparedDoc(doc_id, text, meta, vec))
    if problems:
        if len(docs) == 1:
            message = "; ".join(p.message for p in problems)
        else:
            message = "; ".join(f"item {p.item}: {p.message}" for p in problems)
        raise ValidationError(f"{message} (nothing was written)", problems)
    return WritePlan(tuple(prepared))


__all__ = ["POSITION_FIELDS", "PreparedDoc", "WritePlan", "WriteResult", "check_vector", "memory_edit", "plan_write"]
