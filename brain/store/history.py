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

Pure functions over documents, then the few that read and write a store: :func:`supersede`,
:func:`apply_changes` and :func:`memory_history` (behind :meth:`brain.store.Store.supersede` and
:meth:`brain.store.Store.history`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from brain.model.errors import BrainError, Conflict, NotFound, Problem, ValidationError
from brain.model.ids import memory_id, normalize_memory_text
from brain.model.results import Document, Supersession
from brain.model.schemas import (
    CHAIN_KEYS,
    CHANGES,
    MAX_LIST_ITEMS,
    DocType,
    check_extra_metadata,
    check_scope,
    entity_scope,
    format_timestamp,
    is_inactive,
    is_part,
    parse_timestamp,
    utc_now,
)
from brain.rules.memories import merged_importance, merged_tags, same_text
from brain.store.plan import WriteResult, memory_edit, stored_memory


class Chains(Protocol):
    """A store, as far as reading and writing supersession chains goes (:class:`brain.store.Store`)."""

    lock: threading.RLock

    def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, object] | None = None,
        type: str | DocType | None = None,
        include_embeddings: bool = False,
        entity: str | None = None,
    ) -> list[Document]: ...

    def write_docs(self, docs: Sequence[Mapping[str, object]], *, merge_memories: bool = True) -> WriteResult: ...


#: how many links a history walk follows before it stops (a chain written by hand could loop)
MAX_CHAIN = 10_000


def check_change(kind: object) -> str:
    """``kind`` if it is a supersession kind (``update`` or ``contradict``)."""
    if kind not in CHANGES:
        raise ValidationError.of("kind", f"kind must be one of {', '.join(CHANGES)}, got {kind!r}")
    return str(kind)


def change_time(value: object, field: str = "at") -> datetime:
    """When a change happened: ``value`` (ISO time, datetime or epoch seconds), else now; anything else is a
    :class:`ValidationError` naming ``field``."""
    if value is None:
        return utc_now()
    try:
        return parse_timestamp(value, field)
    except ValueError as exc:
        raise ValidationError.of(field, str(exc)) from None


def supersede_arguments(kind: object, at: object, expires_at: object) -> tuple[str, datetime, datetime | None]:
    """The checked arguments of a supersession: its kind, its time (now when None) and the new memory's
    expiry (None: none). Checked before the memory is looked up, so bad input is named as such."""
    return (check_change(kind), change_time(at), None if expires_at is None else change_time(expires_at, "expires_at"))


def refuse_target(old: Document, scope: str | None, *, doing: str = "supersede") -> None:
    """Raise :class:`ValidationError` when ``old`` cannot take a change for a memory of ``scope`` (when given):
    another scope, a memory already superseded or retired, a part of another one. ``doing`` names the change
    (``supersede``, ``merge into``) in the message."""
    meta = old.metadata
    if scope is not None and meta.get("scope") != scope:
        raise ValidationError.of(
            "entity",
            (
                f"memory {old.id!r} is in scope {meta.get('scope')!r}, not {scope!r}: a change never crosses "
                f"an entity; {doing} it for its own entity, or remember the new fact separately (nothing was written)"
            ),
        )
    if meta.get("status") == "superseded":
        current = meta.get("superseded_by")
        hint = (
            f"its successor is {current!r}: {doing} the current memory of its history"
            if current
            else "it has no successor recorded"
        )
        raise Conflict.of("id", f"memory {old.id!r} was superseded already; {hint} (nothing was written)")
    if meta.get("status") in ("retracted", "archived"):
        raise ValidationError.of(
            "id",
            (
                f"memory {old.id!r} is {meta['status']}: only a current memory can be changed this way; set its "
                f"status to active first (nothing was written)"
            ),
        )
    if is_part(meta):
        raise ValidationError.of(
            "id", (f"{old.id!r} is a part of memory {meta.get('part_of')!r}; {doing} that memory (nothing was written)")
        )


def refuse_supersession(old: Document, text: str, scope: str | None) -> None:
    """Raise :class:`ValidationError` when ``old`` cannot be superseded by ``text`` (a memory of ``scope``,
    when given): another scope, a memory already superseded or retired, a part of another one, its own text."""
    refuse_target(old, scope)
    if same_text(old.text, text):
        raise ValidationError.of(
            "text",
            (
                f"the new text is the text of memory {old.id!r} already; change its fields with update_memory instead "
                f"(nothing was written)"
            ),
        )


def supersession_docs(
    old: Document,
    new_id: str,
    text: str,
    kind: str,
    at: datetime,
    *,
    importance: int | None,
    tags: Any,
    source: str | None,
    conversation_id: str | None,
    expires_at: object,
    extra: Mapping[str, object],
) -> list[dict[str, object]]:
    """The write of a supersession: ``[old memory retired, new memory]`` as ``upsert_docs`` items.
    The old one keeps its vector (``old.embedding``) and its own timestamp; the new one keeps the old
    one's importance and tags unless given."""
    old_meta = stored_memory(old)
    since = old_meta.valid_from or old_meta.created_at or old_meta.timestamp
    if at < since:
        raise ValidationError.of(
            "at",
            (
                f"the change at {format_timestamp(at)} is before memory {old.id!r} started holding "
                f"({format_timestamp(since)}); give a later time (nothing was written)"
            ),
        )
    retired = old_meta.model_dump(by_alias=True, exclude_none=True)
    retired.update(status="superseded", valid_until=at, superseded_by=new_id)
    new: dict[str, object] = {
        **extra,
        "id": new_id,
        "text": text,
        "type": DocType.MEMORY.value,
        "scope": old_meta.scope,
        "importance": old_meta.importance if importance is None else importance,
        "tags": list(old_meta.tags) if tags is None else (list(tags) if not isinstance(tags, str) else tags),
        "timestamp": utc_now(),
        "created_at": at,
        "valid_from": at,
        "supersedes": old.id,
        "change": kind,
    }
    if source is not None:
        new["source"] = source
    if conversation_id is not None:
        new["conversation_id"] = conversation_id
    if expires_at is not None:
        new["expires_at"] = expires_at
    return [{**retired, "id": old.id, "text": old.text, "embedding": old.embedding}, new]


#: what one change of :func:`apply_changes` does with its fact
ACTIONS = ("add", "same", "update", "contradict")


@dataclass(frozen=True)
class MemoryChange:
    """One fact to apply to the memories of a scope (see :func:`apply_changes`): ``add`` it
    as a new memory (the same text as a current memory of the scope merges into that one), merge it into
    memory ``target`` (``same``: the target keeps its text), or supersede ``target`` with it (``update``,
    ``contradict``). ``at``: when it became true (the new memory's ``valid_from``, the supersession's time);
    now when None. ``source_turns``: ids of the turns it was formed from."""

    action: str
    text: str
    target: str | None = None
    importance: int = 3
    tags: tuple[str, ...] = ()
    at: datetime | None = None
    expires_at: datetime | None = None
    source_turns: tuple[str, ...] = ()


@dataclass(frozen=True)
class AppliedChanges:
    """What :func:`apply_changes` wrote: for each change in order, the memory it landed on
    (``ids``) and what was done (``actions``: an ``add`` of a current memory's text is ``same``), and the
    write's sequence (None when nothing needed writing)."""

    ids: tuple[str, ...]
    actions: tuple[str, ...]
    sequence: int | None = None

    def count(self, action: str) -> int:
        return sum(1 for a in self.actions if a == action)


def check_changes(changes: Sequence[MemoryChange]) -> None:
    """Refuse, whole, a set of changes that cannot be applied together: an unknown action, a target missing
    or given to ``add``, one text said by two changes unless both add it, a memory superseded by one change
    and changed by another."""
    problems: list[Problem] = []
    texts: dict[str, tuple[int, str]] = {}
    targets: dict[str, list[tuple[int, str]]] = {}
    for n, change in enumerate(changes):
        if change.action not in ACTIONS:
            problems.append(
                Problem("action", f"change {n}: action must be one of {', '.join(ACTIONS)}, got {change.action!r}", n)
            )
            continue
        if (change.target is None) != (change.action == "add"):
            problems.append(
                Problem(
                    "target",
                    f"change {n}: {change.action!r} "
                    + ("takes no target" if change.action == "add" else "needs the target memory's id"),
                    n,
                )
            )
        if not isinstance(change.text, str) or not change.text.strip():
            problems.append(Problem("text", f"change {n}: the text must be a non-empty string", n))
            continue
        key = normalize_memory_text(change.text)
        if key in texts and not (change.action == "add" and texts[key][1] == "add"):
            problems.append(
                Problem("text", f"changes {texts[key][0]} and {n} both say {change.text!r}; say it once", n)
            )
        texts.setdefault(key, (n, change.action))
        if change.target is not None:
            targets.setdefault(change.target, []).append((n, change.action))
    for target, uses in targets.items():
        if len(uses) > 1 and any(action in CHANGES for _, action in uses):
            problems.append(
                Problem(
                    "target",
                    f"changes {', '.join(str(n) for n, _ in uses)} all change memory "
                    f"{target!r}; a memory superseded takes no other change in the "
                    f"same batch",
                    uses[-1][0],
                )
            )
    if problems:
        raise ValidationError("; ".join(p.message for p in problems) + " (nothing was written)", problems)


def joined_turns(*lists: Sequence[str] | None) -> list[str]:
    """The turn ids of merged facts: each once, in the order first seen, the latest ``MAX_LIST_ITEMS``."""
    return merged_tags(turns or () for turns in lists)[-MAX_LIST_ITEMS:]


def merged_change_doc(old: Document, changes: Sequence[MemoryChange]) -> dict[str, object]:
    """The write of facts that are memory ``old`` again (``same``): it keeps its text, vector and time of
    holding; importance becomes the highest, tags the union, and the facts' turns join ``source_turns``."""
    old_meta = stored_memory(old)
    return memory_edit(
        old,
        None,
        importance=merged_importance([old_meta.importance, *(c.importance for c in changes)]),
        tags=merged_tags([old_meta.tags, *(c.tags for c in changes)]),
        extra={"source_turns": joined_turns(old_meta.source_turns, *(c.source_turns for c in changes))},
        replace_metadata=False,
        timestamp=None,
    )


def added_doc(
    new_id: str, changes: Sequence[MemoryChange], scope: str, *, source: str | None, conversation_id: str | None
) -> dict[str, object]:
    """The write of a new memory from ``changes`` (one fact, or the same text added by several): holding from
    the earliest ``at`` (now when none), the highest importance, every tag and turn."""
    first = changes[0]
    times = [c.at for c in changes if c.at is not None]
    at = min(times) if times else utc_now()
    expiries = [c.expires_at for c in changes if c.expires_at is not None]
    doc: dict[str, object] = {
        "id": new_id,
        "text": first.text,
        "type": DocType.MEMORY.value,
        "scope": scope,
        "importance": merged_importance(c.importance for c in changes),
        "tags": merged_tags(c.tags for c in changes),
        "timestamp": utc_now(),
        "created_at": at,
        "valid_from": at,
    }
    turns = joined_turns(*(c.source_turns for c in changes))
    optional = {
        "source": source,
        "conversation_id": conversation_id,
        "source_turns": turns or None,
        "expires_at": max(expiries) if expiries else None,
    }
    doc.update((k, v) for k, v in optional.items() if v is not None)
    return doc


def change_docs(
    changes: Sequence[MemoryChange],
    scope: str,
    targets: Mapping[str, Document],
    free_id: Callable[..., tuple[str, Document | None]],
    fetch: Callable[[str], Document],
    successor_id: Callable[..., str],
    *,
    source: str | None,
    conversation_id: str | None,
) -> tuple[list[dict[str, object]], list[tuple[str, str]]]:
    """The write of a batch of changes to the memories of ``scope`` (``upsert_docs`` items, written with
    ``merge_memories=False``), and for each change the memory it lands on and what it does. The store's reads
    come as callables: ``targets`` (the changes' targets as stored, with vectors), ``free_id(text, scope,
    skip=ids)`` (the first free derived id, or the current memory saying the text), ``fetch(id)`` (a memory
    with its vector) and ``successor_id(text, scope, skip=ids)`` (the id of a superseding memory). Raises
    what refuses the batch whole (see :func:`apply_changes`)."""
    check_changes(changes)
    missing = [c.target for c in changes if c.target is not None and c.target not in targets]
    if missing:
        raise NotFound(f"no memory with id {missing[0]!r} (deleted meanwhile?); nothing was written")
    found = dict(targets)
    docs: list[dict[str, object]] = []
    landed: list[tuple[str, str] | None] = [None] * len(changes)
    claimed: set[str] = set()  # ids this write gives to new memories
    superseded = {c.target for c in changes if c.action in CHANGES}
    for n, change in enumerate(changes):  # supersessions first: the ids they take are claimed
        if change.action in CHANGES:
            old = found[str(change.target)]
            refuse_supersession(old, change.text, scope)
            new_id = successor_id(change.text, scope, skip=claimed)
            claimed.add(new_id)
            docs.extend(
                supersession_docs(
                    old,
                    new_id,
                    change.text,
                    change.action,
                    change_time(change.at),
                    importance=change.importance,
                    tags=list(change.tags),
                    source=source,
                    conversation_id=conversation_id,
                    expires_at=change.expires_at,
                    extra={"source_turns": joined_turns(change.source_turns)} if change.source_turns else {},
                )
            )
            landed[n] = (new_id, change.action)
    merges: dict[str, list[int]] = {}
    added: dict[str, list[int]] = {}
    for n, change in enumerate(changes):
        if change.action == "same":
            merges.setdefault(str(change.target), []).append(n)
        elif change.action == "add":
            added.setdefault(normalize_memory_text(change.text), []).append(n)
    for indices in added.values():
        group = [changes[n] for n in indices]
        new_id, held = free_id(group[0].text, scope, skip=claimed)
        if held is None:
            claimed.add(new_id)
            docs.append(added_doc(new_id, group, scope, source=source, conversation_id=conversation_id))
            for n in indices:
                landed[n] = (new_id, "add")
        else:  # a current memory says it already: the same as that one
            found.setdefault(held.id, fetch(held.id))
            merges.setdefault(held.id, []).extend(indices)
    for target, indices in merges.items():
        if target in superseded:
            raise ValidationError.of(
                "target",
                (
                    f"memory {target!r} is superseded by one change of this batch and the same as another; "
                    f"nothing was written"
                ),
            )
        refuse_target(found[target], scope, doing="merge into")
        docs.append(merged_change_doc(found[target], [changes[n] for n in indices]))
        for n in indices:
            landed[n] = (target, "same")
    return docs, landed  # type: ignore[return-value]  # every change landed somewhere


def chain(
    doc: Document, fetch: Callable[[str], Document | None], predecessor: Callable[[str], Document | None] | None = None
) -> list[Document]:
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
        if (
            (previous is None or previous.metadata.get("superseded_by") != current.id)
            and predecessor is not None
            and previous_id is None
        ):
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


def refuse_chain_edit(old: Document, changes: Mapping[str, object]) -> None:
    """An in-place edit may not relink a chain or bring a superseded memory back as current (its
    successor is current): :class:`ValidationError` naming the field."""
    problems = [
        Problem(f"metadata.{key}", f"metadata.{key}: {key!r} links a supersession chain and is set by supersede only")
        for key in sorted(set(changes) & CHAIN_KEYS)
    ]
    status = changes.get("status", old.metadata.get("status"))
    if old.metadata.get("status") == "superseded" and old.metadata.get("superseded_by") and status != "superseded":
        problems.append(
            Problem(
                "status",
                (
                    f"status: memory {old.id!r} was superseded by {old.metadata['superseded_by']!r}, which is current; "
                    f"supersede that one to change the fact again"
                ),
            )
        )
    if problems:
        raise ValidationError("; ".join(p.message for p in problems) + " (nothing was written)", problems)


def supersede(
    store: Chains,
    old_id: str,
    new_text: str,
    *,
    kind: str = "update",
    at: datetime | str | float | None = None,
    importance: int | None = None,
    tags: Iterable[str] | None = None,
    expires_at: datetime | str | None = None,
    source: str | None = None,
    conversation_id: str | None = None,
    metadata: Mapping[str, object] | None = None,
    entity: str | None = None,
) -> Supersession:
    """Replace memory ``old_id`` of ``store`` with ``new_text``, keeping the old one as history: see
    :meth:`brain.store.Store.supersede`."""
    kind, when, expires = supersede_arguments(kind, at, expires_at)
    extra = check_extra_metadata(metadata, ("importance", "tags", "expires_at", "conversation_id"), call="supersede")
    own = sorted(set(extra) & (CHAIN_KEYS | {"status", "valid_from", "created_at"}))
    if own:
        raise ValidationError.of(
            f"metadata.{own[0]}",
            f"supersede sets {', '.join(own)} itself; leave "
            f"{'them' if len(own) > 1 else 'it'} out of metadata "
            f"(nothing was written)",
        )
    if not isinstance(new_text, str) or not new_text.strip():
        raise ValidationError.of("text", "the new text must be a non-empty string (nothing was written)")
    with store.lock:
        docs = store.get([old_id], type=DocType.MEMORY, include_embeddings=True, entity=entity)
        if not docs:
            raise NotFound(f"no memory with id {old_id!r}" + (f" visible to entity {entity!r}" if entity else ""))
        old = docs[0]
        refuse_supersession(old, new_text, None if entity is None else entity_scope(entity))
        new_id = successor_id(store, new_text, str(old.metadata.get("scope")))
        items = supersession_docs(
            old,
            new_id,
            new_text,
            kind,
            when,
            importance=importance,
            tags=tags,
            source=source,
            conversation_id=conversation_id,
            expires_at=expires,
            extra=extra,
        )
        store.write_docs(items, merge_memories=False)
        stored = {d.id: d for d in store.get([old_id, new_id])}
        return Supersession(stored[old_id], stored[new_id], kind)


def apply_changes(
    store: Chains,
    changes: Sequence[MemoryChange],
    *,
    scope: str,
    source: str | None = "chat",
    conversation_id: str | None = None,
    with_docs: Sequence[Mapping[str, object]] = (),
) -> AppliedChanges:
    """Apply facts to the memories of ``scope`` in ``store`` in one write, all or nothing (also across a
    crash), together with ``with_docs`` (e.g. the record that the facts were applied): see
    :class:`MemoryChange`. ``add`` stores a new memory (``source``, ``conversation_id``, ``source_turns``,
    ``valid_from`` = its ``at``); an ``add`` whose text a current memory of the scope says already, or a
    ``same``, merges into that memory (highest importance, every tag, the turns joined; its text stays);
    ``update`` and ``contradict`` supersede their target as :func:`supersede` does, at the change's ``at``.

    Refused whole, nothing written: a target that is unknown (:class:`NotFound`), in another scope, or no
    longer current (:class:`~brain.model.errors.Conflict` when superseded meanwhile); a new text another
    current memory of the scope says; changes that contradict each other (:func:`check_changes`); any
    document that fails validation."""
    try:
        scope = check_scope(scope)
    except ValueError as exc:
        raise ValidationError.of("scope", str(exc)) from None
    with store.lock:

        def held(doc_id: str) -> Document:
            return store.get([doc_id], include_embeddings=True)[0]

        def free_id(text: str, scope: str, *, skip: Iterable[str] = ()) -> tuple[str, Document | None]:
            return free_memory_id(store, text, scope, skip=skip)

        def next_id(text: str, scope: str, *, skip: Iterable[str] = ()) -> str:
            return successor_id(store, text, scope, skip=skip)

        wanted = [c.target for c in changes if c.target is not None]
        targets = {d.id: d for d in store.get(wanted, type=DocType.MEMORY, include_embeddings=True)}
        docs, landed = change_docs(
            changes, scope, targets, free_id, held, next_id, source=source, conversation_id=conversation_id
        )
        written = store.write_docs([*docs, *with_docs], merge_memories=False)
    return AppliedChanges(tuple(i for i, _ in landed), tuple(a for _, a in landed), written.sequence)


def free_memory_id(store: Chains, text: str, scope: str, *, skip: Iterable[str] = ()) -> tuple[str, Document | None]:
    """The first derived id of ``text`` in ``scope`` held by no document of ``store`` (nor in ``skip``),
    or the current memory of the scope that says ``text`` already (with that one's id)."""
    skipped = set(skip)
    for attempt in range(50):
        candidate = memory_id(text, scope, attempt)
        if candidate in skipped:
            continue
        found = store.get([candidate])
        if not found:
            return candidate, None
        held = found[0]
        if same_text(held.text, text) and held.type == DocType.MEMORY.value and not is_inactive(held.metadata):
            return candidate, held
    raise BrainError("could not find a free id for a memory after 50 attempts")  # pragma: no cover


def successor_id(store: Chains, text: str, scope: str, *, skip: Iterable[str] = ()) -> str:
    """The id of a superseding memory: its derived id, or the next one when that is taken by another
    text or by a memory no longer current (the same words said again after a change, e.g. a move back,
    are a new memory in the chain, not the old one brought back)."""
    candidate, held = free_memory_id(store, text, scope, skip=skip)
    if held is not None:
        raise ValidationError.of(
            "text",
            (
                f"memory {held.id!r} already says this in scope {scope!r}; retire the old memory with "
                f"update_memory(status='retracted') or supersede it with other words (nothing was written)"
            ),
        )
    return candidate


def memory_history(store: Chains, start_id: str, *, entity: str | None = None) -> list[Document]:
    """The supersession chain of memory ``start_id`` in ``store``: see :meth:`brain.store.Store.history`."""

    def fetch(doc_id: str) -> Document | None:
        found = store.get([doc_id], type=DocType.MEMORY, entity=entity)
        return found[0] if found else None

    def predecessor(doc_id: str) -> Document | None:
        found = store.get(where={"superseded_by": doc_id}, type=DocType.MEMORY, entity=entity)
        return found[0] if len(found) == 1 else None  # two claim it: no single history to tell

    doc = fetch(start_id)
    if doc is None:
        raise NotFound(f"no memory with id {start_id!r}" + (f" visible to entity {entity!r}" if entity else ""))
    return chain(doc, fetch, predecessor)


__all__ = [
    "ACTIONS",
    "MAX_CHAIN",
    "AppliedChanges",
    "Chains",
    "MemoryChange",
    "added_doc",
    "apply_changes",
    "chain",
    "change_docs",
    "change_time",
    "check_change",
    "check_changes",
    "free_memory_id",
    "joined_turns",
    "memory_history",
    "merged_change_doc",
    "refuse_chain_edit",
    "refuse_supersession",
    "refuse_target",
    "successor_id",
    "supersede",
    "supersede_arguments",
    "supersession_docs",
]
