"""Change with history: a memory superseded by another, and the chain such changes make.

A supersession never deletes. It is one write of two documents (all or nothing, like every write:
:mod:`brain.store.write_intents`):

- the old memory keeps its text, vector and fields, and gets ``status: superseded`` (kept, never
  ranked as current), ``valid_until`` (when it stopped holding) and ``superseded_by`` (the new id);
- the new memory, in the same scope, gets ``supersedes`` (the old id), ``valid_from`` (when it started
  holding: the same time) and ``change``: ``update`` (the fact changed: "moved to Berlin") or
  ``contradict`` (the old one was wrong).

A chain is linear: only its current memory (the one nobody superseded) can be superseded, so each
chain has exactly one current memory, and its history is the walk along ``supersedes`` and
``superseded_by``. A memory past its validity window is still what the store answers for a time
inside it (``retrieve_memories(as_of=...)``).

Pure functions over documents; the store reads and writes (:meth:`brain.store.Store.supersede`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from brain.model.errors import Conflict, Problem, ValidationError
from brain.rules.memories import same_text
from brain.model.results import Document
from brain.model.schemas import CHAIN_KEYS, CHANGES, DocType, format_timestamp, is_part, parse_timestamp, read_stored, utc_now

#: how many links a history walk follows before it stops (a chain written by hand could loop)
MAX_CHAIN = 10_000


def check_change(kind: Any) -> str:
    """``kind`` if it is a supersession kind (``update`` or ``contradict``)."""
    if kind not in CHANGES:
        raise ValidationError.of("kind", f"kind must be one of {', '.join(CHANGES)}, got {kind!r}")
    return kind


def change_time(value: datetime | str | float | None, field: str = "at") -> datetime:
    """When a change happened: ``value`` (ISO time, datetime or epoch seconds), else now."""
    if value is None:
        return utc_now()
    try:
        return parse_timestamp(value, field)
    except ValueError as exc:
        raise ValidationError.of(field, str(exc)) from None


def supersede_arguments(kind: Any, at: Any, expires_at: Any) -> tuple[str, datetime, datetime | None]:
    """The checked arguments of a supersession: its kind, its time (now when None) and the new memory's
    expiry (None: none). Checked before the memory is looked up, so bad input is named as such."""
    return (check_change(kind), change_time(at),
            None if expires_at is None else change_time(expires_at, "expires_at"))


def refuse_supersession(old: Document, text: str, scope: str | None) -> None:
    """Raise :class:`ValidationError` when ``old`` cannot be superseded by ``text`` (a memory of ``scope``,
    when given): another scope, a memory already superseded or retired, a part of another one, its own text."""
    meta = old.metadata
    if scope is not None and meta.get("scope") != scope:
        raise ValidationError.of("entity", (
            f"memory {old.id!r} is in scope {meta.get('scope')!r}, not {scope!r}: a supersession never crosses "
            f"an entity; supersede it for its own entity, or remember the new fact separately (nothing was written)"))
    if meta.get("status") == "superseded":
        current = meta.get("superseded_by")
        hint = (f"its successor is {current!r}: supersede the current memory of its history" if current
                else "it has no successor recorded")
        raise Conflict.of("id", f"memory {old.id!r} was superseded already; {hint} (nothing was written)")
    if meta.get("status") in ("retracted", "archived"):
        raise ValidationError.of("id", (
            f"memory {old.id!r} is {meta['status']}: only a current memory is superseded; set its status "
            f"to active first (nothing was written)"))
    if is_part(meta):
        raise ValidationError.of("id", (
            f"{old.id!r} is a part of memory {meta.get('part_of')!r}; supersede that memory (nothing was written)"))
    if same_text(old.text, text):
        raise ValidationError.of("text", (
            f"the new text is the text of memory {old.id!r} already; change its fields with update_memory instead "
            f"(nothing was written)"))


def supersession_docs(old: Document, new_id: str, text: str, kind: str, at: datetime, *,
                      importance: int | None, tags: Any, source: str | None, conversation_id: str | None,
                      expires_at: Any, extra: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The write of a supersession: ``[old memory retired, new memory]`` as ``upsert_docs`` items.
    The old one keeps its vector (``old.embedding``) and its own timestamp; the new one keeps the old
    one's importance and tags unless given."""
    old_meta, problems = read_stored(DocType.MEMORY, old.metadata)
    if old_meta is None:
        raise ValidationError(f"memory {old.id!r} as stored cannot be read ({'; '.join(problems.values())}); "
                              f"delete it and store it again (nothing was written)")
    since = old_meta.valid_from or old_meta.created_at or old_meta.timestamp
    if at < since:
        raise ValidationError.of("at", (
            f"the change at {format_timestamp(at)} is before memory {old.id!r} started holding "
            f"({format_timestamp(since)}); give a later time (nothing was written)"))
    retired = old_meta.model_dump(by_alias=True, exclude_none=True)
    retired.update(status="superseded", valid_until=at, superseded_by=new_id)
    new: dict[str, Any] = {
        **extra,
        "id": new_id, "text": text, "type": DocType.MEMORY.value, "scope": old_meta.scope,
        "importance": old_meta.importance if importance is None else importance,
        "tags": list(old_meta.tags) if tags is None else (list(tags) if not isinstance(tags, str) else tags),
        "timestamp": utc_now(), "created_at": at, "valid_from": at,
        "supersedes": old.id, "change": kind,
    }
    if source is not None:
        new["source"] = source
    if conversation_id is not None:
        new["conversation_id"] = conversation_id
    if expires_at is not None:
        new["expires_at"] = expires_at
    return [{**retired, "id": old.id, "text": old.text, "embedding": old.embedding}, new]


def chain(doc: Document, fetch: Callable[[str], Document | None],
          predecessor: Callable[[str], Document | None] | None = None) -> list[Document]:
    """The history ``doc`` belongs to, oldest first: back along ``supersedes`` (or, for a chain imported
    with forward links only, as PAM writes them, the memory ``predecessor`` finds superseded by it), forward
    along ``superseded_by``. A link to a memory that is gone (deleted), or to one that links elsewhere,
    ends the walk."""
    older: list[Document] = []
    seen = {doc.id}
    current = doc
    while len(seen) < MAX_CHAIN:
        previous_id = current.metadata.get("supersedes")
        previous = fetch(previous_id) if isinstance(previous_id, str) and previous_id not in seen else None
        if (previous is None or previous.metadata.get("superseded_by") != current.id) and predecessor is not None \
                and previous_id is None:
            previous = predecessor(current.id)
        if previous is None or previous.id in seen or previous.metadata.get("superseded_by") != current.id:
            break
        older.append(previous)
        seen.add(previous.id)
        current = previous
    newer: list[Document] = []
    current = doc
    while len(seen) < MAX_CHAIN:
        next_id = current.metadata.get("superseded_by")
        following = fetch(next_id) if isinstance(next_id, str) and next_id not in seen else None
        if following is None or following.metadata.get("supersedes") not in (None, current.id):
            break
        newer.append(following)
        seen.add(following.id)
        current = following
    return [*reversed(older), doc, *newer]


def refuse_chain_edit(old: Document, changes: Mapping[str, Any]) -> None:
    """An in-place edit may not relink a chain or bring a superseded memory back as current (its
    successor is current): :class:`ValidationError` naming the field."""
    problems = [Problem(f"metadata.{key}", f"metadata.{key}: {key!r} links a supersession chain and is set by "
                                           f"supersede only")
                for key in sorted(set(changes) & CHAIN_KEYS)]
    status = changes.get("status", old.metadata.get("status"))
    if old.metadata.get("status") == "superseded" and old.metadata.get("superseded_by") and status != "superseded":
        problems.append(Problem("status", (
            f"status: memory {old.id!r} was superseded by {old.metadata['superseded_by']!r}, which is current; "
            f"supersede that one to change the fact again")))
    if problems:
        raise ValidationError("; ".join(p.message for p in problems) + " (nothing was written)", problems)


__all__ = ["MAX_CHAIN", "chain", "change_time", "check_change", "refuse_chain_edit", "refuse_supersession",
           "supersede_arguments", "supersession_docs"]
