"""Memories as an operator handles them: unrestricted, by exact scope and by id (``brain memory ...``).

A request under a caller's identity (the HTTP API) goes through :mod:`brain.access` instead, which
decides what that caller may see and change. Here every memory is visible: a scope filter is exact
(``entity:ada`` lists Ada's memories, not the global ones too), and ids that are not memories are
reported, never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brain.errors import NotFound
from brain.results import Document
from brain.schemas import DocType

if TYPE_CHECKING:
    from brain.store import Store


def add_memory(store: Store, text: str, *, scope: str | None = None, importance: int | None = None,
               tags: Iterable[str] = ()) -> Document:
    """Store ``text`` as a memory (the same text in the same scope updates it) and return it as stored.
    ``scope`` and ``importance`` left None take the store's defaults (global, 3)."""
    given = {key: value for key, value in {"scope": scope, "importance": importance}.items() if value is not None}
    return store.get_one(store.upsert_memory(text, tags=list(tags), **given))


def list_memories(store: Store, *, scope: str | None = None, tags: Sequence[str] = (),
                  limit: int | None = None) -> list[Document]:
    """Memories in storage order: all, or those in exactly ``scope``, having every tag of ``tags``."""
    where: dict[str, Any] = {}
    if scope is not None:
        where["scope"] = scope
    if tags:
        where["tags"] = list(tags)
    return store.get(type=DocType.MEMORY, where=where or None, limit=limit)


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

    def summary(self) -> str:
        return "\n".join(f"removed {doc_id}" for doc_id in self.removed)

    def error(self) -> NotFound:
        """The failure a caller raises when not every id was a memory."""
        return NotFound(f"no memory with id {', '.join(repr(i) for i in self.not_found)}")


def remove_memories(store: Store, doc_ids: Iterable[str]) -> MemoryRemoval:
    """Delete the memories among ``doc_ids``; ids of other document types, or of nothing, are reported
    in ``not_found`` and left alone (repeated ids count once)."""
    wanted = list(dict.fromkeys(doc_ids))
    found = [doc.id for doc in store.get(wanted, type=DocType.MEMORY)]
    if found:
        store.delete(found, type=DocType.MEMORY)
    present = set(found)
    return MemoryRemoval(removed=found, not_found=[i for i in wanted if i not in present])
