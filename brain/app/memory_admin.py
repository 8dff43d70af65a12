"""Memories as an operator handles them: by scope, for an entity, and by id (``brain memory ...``).

A request under a caller's identity (the HTTP API, MCP) goes through :mod:`brain.access.policy` instead, which
decides what that caller may see and change. Both read the scopes :func:`brain.rules.memories.scopes_for`
gives: a listing for an entity holds its memories and the global ones (each carrying its scope); a
``scope`` filter is exact (``entity:ada`` lists Ada's own only). A removal for an entity removes only its
own memories and refuses global ones, before anything is deleted; ids that are not memories are
reported, never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brain.model.errors import Forbidden, NotFound, ValidationError
from brain.model.results import Document
from brain.model.schemas import GLOBAL_SCOPE, DocType
from brain.rules.memories import global_refusal, may_change, scopes_for
from brain.store.memory_listing import list_memories as listing

if TYPE_CHECKING:
    from brain.store import Store


def add_memory(
    store: Store,
    text: str,
    *,
    scope: str | None = None,
    importance: int | None = None,
    tags: Iterable[str] = (),
    expires_at: Any = None,
) -> Document:
    """Store ``text`` as a memory (the same text in the same scope updates it) and return it as stored.
    ``scope`` and ``importance`` left None take the store's defaults (global, 3); ``expires_at``: when it
    stops being ranked."""
    given = {
        key: value
        for key, value in {"scope": scope, "importance": importance, "expires_at": expires_at}.items()
        if value is not None
    }
    return store.get_one(store.upsert_memory(text, tags=list(tags), **given))


def list_memories(
    store: Store,
    *,
    scope: str | None = None,
    entity: str | None = None,
    tags: Sequence[str] = (),
    limit: int | None = None,
    history: bool = False,
) -> list[Document]:
    """Memories in storage order: all, those in exactly ``scope``, or those a listing for ``entity``
    shows (its own and the global ones, :func:`brain.rules.memories.scopes_for`); having every tag of ``tags``;
    the current ones unless ``history`` (see :func:`brain.store.memory_listing.list_memories`)."""
    if scope is not None and entity is not None:
        raise ValidationError.of(
            "scope", "give scope (exactly one scope) or entity (its memories and the global ones), not both"
        )
    scopes = [scope] if scope is not None else scopes_for(entity, listing=True)
    return listing(store, scopes=None if scopes is None else sorted(scopes), tags=tags, limit=limit, history=history)


def get_memory(store: Store, doc_id: str) -> Document:
    """The memory ``doc_id``; :class:`NotFound` when there is none (another type's id included)."""
    docs = store.get([doc_id], type=DocType.MEMORY)
    if not docs:
        raise NotFound(f"no memory with id {doc_id!r}; `brain memory list` shows the ids")
    return docs[0]


@dataclass
class MemoryRemoval:
    """What :func:`remove_memories` did: the ids removed, and those that named no memory (left alone)."""

    removed: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.not_found

    def to_dict(self) -> dict[str, Any]:
        return {"removed": list(self.removed), "not_found": list(self.not_found)}

    def error(self) -> NotFound:
        """The failure a caller raises when not every id was a memory."""
        return NotFound(f"no memory with id {', '.join(repr(i) for i in self.not_found)}")


def remove_memories(store: Store, doc_ids: Iterable[str], *, entity: str | None = None) -> MemoryRemoval:
    """Delete the memories among ``doc_ids``; ids of other document types, or of nothing, are reported
    in ``not_found`` and left alone (repeated ids count once). With ``entity``, only its own memories are
    deleted: another entity's ids are ``not_found`` (they do not exist for it) and a global id is
    :class:`Forbidden` before anything is deleted (:func:`brain.rules.memories.may_change`)."""
    wanted = list(dict.fromkeys(doc_ids))
    docs = store.get(wanted, type=DocType.MEMORY, entity=entity)
    if entity is not None:
        shared = [d.id for d in docs if not may_change(str(d.metadata.get("scope") or GLOBAL_SCOPE), entity)]
        if shared:
            raise Forbidden(global_refusal(shared, entity, "a removal for entity"))
    found = [doc.id for doc in docs]
    if found:
        store.delete(found, type=DocType.MEMORY)
    present = set(found)
    return MemoryRemoval(removed=found, not_found=[i for i in wanted if i not in present])
