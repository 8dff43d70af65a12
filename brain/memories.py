"""The memory rules, each written once: how versions of a memory merge, and which scopes an entity sees.

Pure functions over metadata and scope strings; nothing here reads or writes a store. The store (a
memory written again), consolidation (near-duplicates), the Xaibo adapter, access control and the
memory index all take their rules from here.

**Merge.** Versions of one memory, the first one first, become one memory that keeps

- the first version's text and, with it, its vector, when the texts are the same memory's
  (:func:`same_text`: case and whitespace do not count); the callers hold texts, so they apply this;
- the highest importance; every tag, in the order first seen;
- the latest timestamp and the latest use (``last_used``);
- the earliest creation (``created_at``, else the timestamp), recorded as ``created_at`` once it
  differs from the timestamp or once any version recorded one;
- every id any version lists in ``merged_from``.

Other fields come from one version: for a duplicate (:func:`merge_duplicate`) the newer write's
replace the older one's; for near-duplicates (:func:`merge_near_duplicates`) the kept memory's stay,
and the ids of the memories it absorbs join its ``merged_from``.

**Visibility.** A memory lives in one scope: ``global`` or ``entity:<name>``. Acting as an entity, a
caller sees the global scope and its own (:func:`visible_scopes`), never another entity's, and changes
only its own (:func:`may_change`). Unrestricted (the admin naming no entity) reads and changes every
scope, but ranks global memories only (:func:`search_scopes`). A retired memory (an inactive
``status``) and a part of something else (``part_of``) are kept but never ranked as memories
(:func:`is_inactive`, :func:`is_part`; the memory index filters on them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from brain.ids import normalize_memory_text
from brain.schemas import (
    GLOBAL_SCOPE,
    DocType,
    MemoryMetadata,
    entity_scope,
    is_inactive,
    is_part,
    valid_entity_scope,
    validate_metadata,
)

# ---- merge -----------------------------------------------------------------------------------------


def same_text(a: str, b: str) -> bool:
    """Whether two texts are the same memory's (the id rule: case and whitespace do not count)."""
    return normalize_memory_text(a) == normalize_memory_text(b)


def created(meta: MemoryMetadata) -> datetime:
    """When a memory was first written: its ``created_at``, else its timestamp."""
    return meta.created_at if meta.created_at is not None else meta.timestamp


def merged_importance(values: Iterable[int]) -> int:
    """The importance of merged versions: the highest."""
    return max(values)


def merged_tags(tag_lists: Iterable[Iterable[str]]) -> list[str]:
    """The tags of merged versions: every tag, in the order first seen."""
    return list(dict.fromkeys(tag for tags in tag_lists for tag in tags))


def merged_fields(versions: Sequence[MemoryMetadata]) -> dict[str, Any]:
    """The fields the merge rule decides for ``versions`` (the first first), unvalidated: importance,
    tags, timestamp, ``created_at`` (the earliest creation, always given) and, when any version has
    them, ``last_used`` and ``merged_from``."""
    if not versions:
        raise ValueError("merging needs at least one version of the memory")
    fields: dict[str, Any] = {
        "importance": merged_importance(m.importance for m in versions),
        "tags": merged_tags(m.tags for m in versions),
        "timestamp": max(m.timestamp for m in versions),
        "created_at": min(created(m) for m in versions),
    }
    used = [m.last_used for m in versions if m.last_used is not None]
    if used:
        fields["last_used"] = max(used)
    if any(m.merged_from for m in versions):
        fields["merged_from"] = merged_tags(m.merged_from or () for m in versions)
    return fields


def merge_duplicate(old: MemoryMetadata, new: MemoryMetadata) -> MemoryMetadata:
    """A memory written again (same id): the merge rule, the newer write's other fields replacing the
    older one's (fields only the old version has stay). Raises :class:`ValidationError` when the merged
    memory breaks the schema (e.g. too many tags)."""
    return _validated({**_dump(old), **_dump(new)}, (old, new), merged_fields((old, new)))


def merge_near_duplicates(kept: MemoryMetadata, absorbed: Mapping[str, MemoryMetadata]) -> MemoryMetadata:
    """``kept`` absorbing the memories ``absorbed`` (``{id: metadata}``, best first): the merge rule, the
    kept memory's other fields staying, and the absorbed ids joining its ``merged_from``. Raises
    :class:`ValidationError` when the merged memory breaks the schema."""
    versions = (kept, *absorbed.values())
    fields = merged_fields(versions)
    fields["merged_from"] = merged_tags([fields.get("merged_from", ()), list(absorbed)])
    return _validated(_dump(kept), versions, fields)


def _dump(meta: MemoryMetadata) -> dict[str, Any]:
    return meta.model_dump(by_alias=True, exclude_none=True)


def _validated(base: dict[str, Any], versions: Sequence[MemoryMetadata], fields: dict[str, Any]) -> MemoryMetadata:
    """``base`` with the merged ``fields`` over it, validated."""
    if all(m.created_at is None for m in versions) and fields["created_at"] == fields["timestamp"]:
        del fields["created_at"]  # nothing to record yet: the creation is the timestamp
    return validate_metadata(DocType.MEMORY, {**base, **fields})  # type: ignore[return-value]


# ---- visibility ------------------------------------------------------------------------------------

def visible_scopes(entity: Any) -> frozenset[str]:
    """The scopes a caller acting for ``entity`` may see: the entity's own and the global one
    (None: the global one only). Raises :class:`ValidationError` for a bad entity."""
    if entity is None:
        return frozenset({GLOBAL_SCOPE})
    return frozenset({GLOBAL_SCOPE, valid_entity_scope(entity)})


def readable_scopes(acting: str | None) -> frozenset[str] | None:
    """The scopes a request acting as ``acting`` may read, or None for every scope (unrestricted)."""
    return None if acting is None else visible_scopes(acting)


def search_scopes(entity: str | None, *, all_scopes: bool = False) -> frozenset[str] | None:
    """The scopes a memory search for ``entity`` ranks: the visible ones (no entity: global only), or
    None (every scope; retired memories and parts too) for operators' all-scopes searches."""
    return None if all_scopes else visible_scopes(entity)


def may_read(scope: str, acting: str | None) -> bool:
    """Whether a memory of ``scope`` is visible to a request acting as ``acting``."""
    return acting is None or scope == GLOBAL_SCOPE or scope == entity_scope(acting)


def may_use_conversation(scopes: set[str], acting: str | None) -> bool:
    """Whether a conversation whose turns are in ``scopes`` exists for a request acting as ``acting``:
    unrestricted, any recorded one; acting as an entity, one whose turns are all in its scope."""
    return bool(scopes) and (acting is None or scopes == {entity_scope(acting)})


def may_change(scope: str, acting: str | None) -> bool:
    """Whether a request acting as ``acting`` may change or delete a memory of ``scope``: unrestricted,
    any; acting as an entity, only its own (a global memory is shared, so only the admin changes it)."""
    return acting is None or scope == entity_scope(acting)


__all__ = [
    "created",
    "is_inactive",
    "is_part",
    "may_change",
    "may_read",
    "may_use_conversation",
    "merge_duplicate",
    "merge_near_duplicates",
    "merged_fields",
    "merged_importance",
    "merged_tags",
    "readable_scopes",
    "same_text",
    "search_scopes",
    "visible_scopes",
]
