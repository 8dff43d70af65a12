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

**Visibility: the scope rule.** A memory lives in one scope: ``global`` or ``entity:<name>``. Every
read of memories names an entity or none, and :func:`scopes_for` alone decides what it covers, in the
library and in every shell (CLI, HTTP, MCP, the browser):

- *for entity X* (a list, a search, a prompt's memories, a read by id): X's own memories and the
  global ones, never another entity's;
- *for no entity*: a search or a prompt ranks the global memories only; a listing (an operator's
  inventory) shows every scope.

Every memory a read returns carries its ``scope``, so a list for X shows which items are global (shared
by every entity). Changes are narrower than reads (:func:`may_change`): acting for X, only X's own
memories are changed or deleted, and a global one is refused with a message naming it; only an
unrestricted caller changes a global memory. A retired memory (an inactive ``status``) and a part of
something else (``part_of``) are kept but never ranked as memories (:func:`is_inactive`,
:func:`is_part`; the memory index filters on them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from brain.model.errors import ValidationError
from brain.model.ids import normalize_memory_text
from brain.model.schemas import (
    GLOBAL_SCOPE,
    DocType,
    MemoryMetadata,
    entity_scope,
    is_inactive,
    is_part,
    valid_entity_scope,
    validate_metadata,
)
from brain.text.wording import noun_for

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


def _dump(meta: MemoryMetadata) -> dict[str, object]:
    return meta.model_dump(by_alias=True, exclude_none=True)


def _validated(
    base: dict[str, object], versions: Sequence[MemoryMetadata], fields: dict[str, object]
) -> MemoryMetadata:
    """``base`` with the merged ``fields`` over it, validated."""
    if all(m.created_at is None for m in versions) and fields["created_at"] == fields["timestamp"]:
        del fields["created_at"]  # nothing to record yet: the creation is the timestamp
    return validate_metadata(DocType.MEMORY, {**base, **fields})  # type: ignore[return-value]


# ---- visibility ------------------------------------------------------------------------------------


def scopes_for(entity: object, *, listing: bool = False) -> frozenset[str] | None:
    """The scope rule (see the module): the scopes a read of memories for ``entity`` covers. An entity:
    its own scope and the global one. None: the global one for a search or a prompt; every scope (None)
    for a ``listing``. Raises :class:`ValidationError` for a bad entity."""
    if entity is None:
        return None if listing else frozenset({GLOBAL_SCOPE})
    return frozenset({GLOBAL_SCOPE, valid_entity_scope(entity)})


def visible_scopes(entity: object) -> frozenset[str]:
    """The scopes a search for ``entity`` ranks (None: the global one only)."""
    scopes = scopes_for(entity)
    assert scopes is not None
    return scopes


def readable_scopes(acting: str | None) -> frozenset[str] | None:
    """The scopes a listing for ``acting`` shows, or None for every scope (no entity named)."""
    return scopes_for(acting, listing=True)


def search_scopes(entity: str | None, *, all_scopes: bool = False) -> frozenset[str] | None:
    """The scopes a memory search for ``entity`` ranks (:func:`scopes_for`), or None (every scope;
    retired memories and parts too) for operators' all-scopes searches."""
    return None if all_scopes else scopes_for(entity)


def is_global(scope: object) -> bool:
    """Whether a memory of ``scope`` is global: shared by every entity (a missing scope reads as global)."""
    return (scope or GLOBAL_SCOPE) == GLOBAL_SCOPE


def may_read(scope: str, acting: str | None) -> bool:
    """Whether a memory of ``scope`` is visible to a request acting as ``acting``."""
    scopes = scopes_for(acting, listing=True)
    return scopes is None or scope in scopes


def may_use_conversation(scopes: set[str], acting: str | None) -> bool:
    """Whether a conversation whose turns are in ``scopes`` exists for a request acting as ``acting``:
    unrestricted, any recorded one; acting as an entity, one whose turns are all in its scope."""
    return bool(scopes) and (acting is None or scopes == {entity_scope(acting)})


def may_change(scope: str, acting: str | None) -> bool:
    """Whether a request acting as ``acting`` may change or delete a memory of ``scope``: unrestricted,
    any; acting as an entity, only its own (a global memory is shared, so only the admin changes it)."""
    return acting is None or scope == entity_scope(acting)


def global_refusal(doc_ids: Sequence[str], acting: str, who: str = "a request acting for") -> str:
    """The message refusing to change or delete the global memories ``doc_ids`` for ``acting``: they are
    shared by every entity, so a change for one entity never reaches them (:func:`may_change`)."""
    n, named = len(doc_ids), ", ".join(repr(i) for i in doc_ids)
    return (
        f"{noun_for(n, 'memory')} {named} {noun_for(n, 'is')} global (shared by every entity): {who} "
        f"{acting!r} changes and deletes only {acting!r}'s own memories; leave {noun_for(n, 'it')} out, or "
        "ask without an entity as the admin"
    )


__all__ = [
    "created",
    "global_refusal",
    "is_global",
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
    "scopes_for",
    "search_scopes",
    "visible_scopes",
]


def check_as_of_search(doc_type: str | None, as_of: Any) -> None:
    """A search ``as_of`` a time asks what memories were held true then: it needs ``type`` memory."""
    if as_of is not None and doc_type != DocType.MEMORY.value:
        raise ValidationError.of("as_of", "as_of ranks memories only: search with type memory")
