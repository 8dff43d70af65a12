"""Forgetting a person: every document in an entity's scope removed, and no trace of it left on disk.

What goes: every document whose scope is ``entity:<name>``, whatever its type: the memories about
the entity, and the turns and summaries of the conversations recorded for it (they are written in
its scope, see :meth:`brain.chat.ChatMemory.record_exchange`). Someone asking to forget a person
expects their conversations gone too, not only the facts drawn from them. Global documents stay,
even where they mention the name: they are nobody's.

How: the documents are deleted through the store's write path (:meth:`brain.store.RagStore.delete`),
so the write events update the mirror (its rows, and with them their vectors, access log, content
hashes and full-text entries) and every in-process index, as any delete does. Rows the mirror holds
in that namespace without Chroma having them (written by engram itself) are deleted from the mirror
too. Then the bytes go: the mirror file is scrubbed (:meth:`brain.mirror.EngramMirror.scrub`) and so
is the embedded Chroma file (:func:`brain.store.scrub.scrub_deleted`); a Chroma server's file is out
of brain's reach, which the report says.

An entity with nothing stored (no document in its scope, no mirror row, no trace left in Chroma's
file) is :class:`NotFound`; a malformed name is a :class:`ValidationError`. Both before anything changes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brain.access import check_entity_name
from brain.memory_admin import case_hint
from brain.errors import NotFound
from brain.schemas import DocType, entity_scope
from brain.store.scrub import deleted_traces, scrub_deleted
from brain.wording import counted

if TYPE_CHECKING:
    from brain.store import Store


_NOUNS = {"faq": "FAQ entry", "persona": "persona section"}  # the other types are their own nouns


@dataclass
class ForgetReport:
    """What :func:`forget_entity` removed: documents by type, mirror rows by table, and how each file
    was scrubbed (``chroma`` is None for a Chroma server, ``mirror`` None when there is no mirror)."""

    entity: str
    deleted: dict[str, int]
    mirror: dict[str, int] = field(default_factory=dict)
    scrubbed: dict[str, Any] = field(default_factory=dict)
    conversations: list[str] = field(default_factory=list)  # ids of the conversations whose documents went

    @property
    def total(self) -> int:
        return sum(self.deleted.values())

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "deleted": dict(self.deleted), "mirror": dict(self.mirror),
                "scrubbed": dict(self.scrubbed), "conversations": list(self.conversations)}

    def summary(self) -> str:
        lines = [f"forgot entity {self.entity!r}: {describe(self.deleted)}"]
        if self.mirror:
            lines.append("mirror: " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in self.mirror.items()))
        if self.scrubbed.get("chroma") is None:
            lines.append("note: the Chroma server's own files are not scrubbed by brain (BRAIN_CHROMA_URL)")
        return "\n".join(lines)


@dataclass
class _Targets:
    name: str
    scope: str
    docs: list[Any]
    stray: list[str]  # mirror rows in the scope that Chroma does not hold
    chroma_dir: Any
    collection_id: str


def _targets(store: Store, entity: Any) -> _Targets:
    """What forgetting ``entity`` removes; :class:`NotFound` when nothing of it is stored (see the module)."""
    name = check_entity_name(entity)
    scope = entity_scope(name)
    docs = store.get(where={"scope": scope})
    mirror = store.mirror
    health = store.mirror_health
    if mirror is None and health is not None and health.error is not None:
        raise health.error  # a damaged mirror file would keep the texts: it names `brain mirror rebuild`
    known = {d.id for d in docs}
    stray = [i for i in mirror.namespace_ids(scope) if i not in known] if mirror is not None else []
    chroma_dir = None if store.settings.chroma_url else store.settings.data_dir / "chroma"
    collection_id = str(store.col.id)
    if not docs and not stray and (chroma_dir is None or not deleted_traces(chroma_dir, collection_id, scope)):
        raise NotFound(f"nothing is stored for entity {name!r} (no document in scope {scope!r})"
                       f"{case_hint(store, name)}; `brain memory list` shows the scopes in use")
    return _Targets(name, scope, docs, stray, chroma_dir, collection_id)


def forget_preview(store: Store, entity: Any) -> dict[str, int]:
    """What :func:`forget_entity` would delete, documents by type (only the types it has), without
    changing anything; :class:`NotFound` (or :class:`ValidationError`) exactly as it would raise."""
    targets = _targets(store, entity)
    return dict(Counter(str(d.metadata.get("type")) for d in targets.docs))


def describe(counts: dict[str, int]) -> str:
    """Documents by type in words: ``2 memories, 1 summary`` (``no documents`` for none)."""
    return ", ".join(counted(n, _NOUNS.get(t, t)) for t, n in counts.items() if n) or "no documents"


def forget_entity(store: Store, entity: Any) -> ForgetReport:
    """Remove every document in ``entity``'s scope from the store, its mirror and the in-process indexes,
    and scrub the files of the data directory so that none of their text remains (see the module)."""
    targets = _targets(store, entity)
    name, scope, docs, stray = targets.name, targets.scope, targets.docs, targets.stray
    chroma_dir, collection_id, mirror = targets.chroma_dir, targets.collection_id, store.mirror
    ids = [d.id for d in docs]
    counts = Counter(str(d.metadata.get("type")) for d in docs)
    deleted = {t.value: counts.get(t.value, 0) for t in DocType}
    mirrored = mirror.footprint([*ids, *stray]) if mirror is not None else {}
    if ids:
        store.delete(ids)  # the write path: events reach the mirror and the in-process indexes
    if stray:
        mirror.delete(stray)
    scrubbed: dict[str, Any] = {"mirror": mirror.scrub() if mirror is not None else None, "chroma": None}
    if chroma_dir is not None:
        scrubbed["chroma"] = scrub_deleted(chroma_dir, collection_id, scope, ids)
    conversations = sorted({str(d.metadata["conversation_id"]) for d in docs
                            if d.metadata.get("type") in (DocType.TURN.value, DocType.SUMMARY.value)
                            and d.metadata.get("conversation_id")})
    store.release_positions(conversations)
    return ForgetReport(name, deleted, mirrored, scrubbed, conversations)


__all__ = ["ForgetReport", "describe", "forget_entity", "forget_preview"]
