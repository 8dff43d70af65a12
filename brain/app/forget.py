"""Forgetting a person: every document in an entity's scope removed, and no trace of it left on disk.

What goes: every document whose scope is ``entity:<name>``, whatever its type: the memories about
the entity, and the turns and summaries of the conversations recorded for it (they are written in
its scope, see :meth:`brain.features.chat.ChatMemory.record_exchange`). Someone asking to forget a person
expects their conversations gone too, not only the facts drawn from them. Global documents stay,
even where they mention the name: they are nobody's.

Where from: every place brain keeps them. The live collection, through the store's write path
(:meth:`brain.store.Store.delete`), so the write events update the mirror (its rows, and with them
their vectors, access log, content hashes and full-text entries) and every in-process index, as any
delete does. The collections a re-index keeps for a roll-back and the one it is building
(:mod:`brain.store.live`), directly. Rows the mirror holds in that namespace without Chroma having
them (written by engram itself). The copies of the mirror ``brain mirror rebuild`` kept
(:func:`brain.features.mirror.erase.kept_copies`). Then the bytes go: the mirror file and its kept copies are
scrubbed (:meth:`brain.features.mirror.EngramMirror.scrub`) and so is the embedded Chroma file, for every
collection (:func:`brain.store.scrub.scrub_deleted`); a Chroma server's file is out of brain's reach,
which the report says.

Interrupted (kill -9, a full disk, a locked file): a marker in the data directory (``forget.pending``,
the entity and the ids, never a text) is written before the first delete and removed once every file
is scrubbed. The next forget of the entity finishes the work even when nothing is stored any more, and
a forget of another entity finishes it first.

Afterwards: the entity is recorded as forgotten (:class:`brain.features.pam.forgotten.Forgotten`, a
keyed hash of its name, never the name), before the first delete. An export made before still holds
its documents; an import of it skips them, and says how many, unless the operator asks for them.

An entity with nothing stored anywhere (and no unfinished forget) is :class:`NotFound`; a malformed
name is a :class:`ValidationError`; a mirror that cannot be written now is a :class:`StoreUnavailable`.
All three before anything changes.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.features.mirror.erase import copy_namespace_rows, erase_from_copy, kept_copies
from brain.features.pam.forgotten import Forgotten
from brain.model.errors import NotFound, StoreUnavailable
from brain.model.schemas import DocType, entity_scope, valid_name
from brain.store.disk import sync_directory, write_json_durably
from brain.store.live import read_pointer
from brain.store.mirror_link import catch_up_mirror
from brain.store.positions import release_positions
from brain.store.scrub import clear_store_index_space, deleted_traces, scrub_deleted

if TYPE_CHECKING:
    from brain.store import Store


#: the marker of forgets under way, in the data directory
MARKER = "forget.pending"


@dataclass
class ForgetReport:
    """What :func:`forget_entity` removed: documents by type, mirror rows by table, and how each file
    was scrubbed (``chroma`` is None for a Chroma server, ``mirror`` None when there is no mirror;
    ``retained``: documents removed from each collection a re-index keeps; ``mirror_copies``: rows
    removed from each kept copy of the mirror; ``resumed``: an interrupted forget of the entity was
    finished)."""

    entity: str
    deleted: dict[str, int]
    mirror: dict[str, int] = field(default_factory=dict)
    scrubbed: dict[str, Any] = field(default_factory=dict)
    conversations: list[str] = field(default_factory=list)  # ids of the conversations whose documents went

    @property
    def total(self) -> int:
        return sum(self.deleted.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "entity": self.entity,
            "deleted": dict(self.deleted),
            "mirror": dict(self.mirror),
            "scrubbed": dict(self.scrubbed),
            "conversations": list(self.conversations),
        }


@dataclass
class _Targets:
    """Everything a forget of one entity removes, found before anything changes."""

    name: str
    scope: str
    docs: list[Any]
    stray: list[str]  # mirror rows in the scope that Chroma does not hold
    retained: dict[str, Any]  # collection name -> the collection (kept by a re-index)
    held: dict[str, list[str]]  # collection name -> ids in the scope
    copies: list[Path]  # mirror copies a rebuild kept
    chroma_dir: Path | None
    collection_ids: list[str]
    resumed: list[dict[str, Any]]  # this entity's unfinished forgets


def _targets(store: Store, name: str) -> _Targets:
    """What forgetting ``name`` removes; :class:`NotFound` when nothing of it is stored anywhere."""
    scope = entity_scope(name)
    mirror = _writable_mirror(store)
    docs = store.get(where={"scope": scope})
    known = {d.id for d in docs}
    stray = [i for i in mirror.namespace_ids(scope) if i not in known] if mirror is not None else []
    retained = _retained_collections(store)
    held = {n: _ids_in_scope(col, scope) for n, col in retained.items()}
    copies = kept_copies(store.settings.mirror_file)
    copy_rows = {c: copy_namespace_rows(c, scope) for c in copies}
    chroma_dir = None if store.settings.chroma_url else store.settings.data_dir / "chroma"
    collection_ids = [str(store.col.id), *(str(col.id) for col in retained.values())]
    resumed = [p for p in _pending(store) if p["entity"] == name]
    if not (docs or stray or any(held.values()) or any(copy_rows.values()) or resumed) and (
        chroma_dir is None or not deleted_traces(chroma_dir, collection_ids, scope)
    ):
        raise NotFound(
            f"nothing is stored for entity {name!r} (no document in scope {scope!r}); "
            "`brain memory list` shows the scopes in use"
        )
    return _Targets(name, scope, docs, stray, retained, held, copies, chroma_dir, collection_ids, resumed)


def forget_preview(store: Store, entity: object) -> dict[str, int]:
    """What :func:`forget_entity` would delete from the store, documents by type (only the types it has),
    without deleting anything; :class:`NotFound` (or :class:`ValidationError`) exactly as it would raise."""
    targets = _targets(store, valid_name(entity))
    return dict(Counter(str(d.metadata.get("type")) for d in targets.docs))


def forget_entity(store: Store, entity: object) -> ForgetReport:
    """Remove every document in ``entity``'s scope from the store, the collections a re-index keeps,
    the mirror, its kept copies and the in-process indexes, and scrub the files of the data directory
    so that none of their text remains (see the module)."""
    name = valid_name(entity)
    for other in _pending(store):  # an interrupted forget of someone else is finished first
        if other["entity"] != name:
            forget_entity(store, other["entity"])
    return _forget(store, _targets(store, name))


def _forget(store: Store, targets: _Targets) -> ForgetReport:
    name, scope, docs, stray, held = targets.name, targets.scope, targets.docs, targets.stray, targets.held
    mirror = store.mirror
    ids = [d.id for d in docs]
    every_id = sorted(
        {*ids, *stray, *(i for found in held.values() for i in found), *(i for p in targets.resumed for i in p["ids"])}
    )
    Forgotten(store.settings.data_dir).record(name)  # first: an import meanwhile already skips them
    _mark(store, name, scope, every_id)
    counts = Counter(str(d.metadata.get("type")) for d in docs)
    deleted = {t.value: counts.get(t.value, 0) for t in DocType}
    mirrored = mirror.footprint([*ids, *stray]) if mirror is not None else {}
    if ids:
        store.delete(ids)  # the write path: events reach the mirror and the in-process indexes
    _check_mirror_followed(store)
    if stray and mirror is not None:  # stray ids are the mirror's own
        mirror.delete(stray)
    for collection, found in held.items():
        if found:
            _delete_ids(targets.retained[collection], found)
    copied = {c.name: erase_from_copy(c, scope) for c in targets.copies}
    scrubbed: dict[str, Any] = {
        "mirror": mirror.scrub() if mirror is not None else None,
        "chroma": None,
        "retained": {n: len(found) for n, found in held.items()},
        "mirror_copies": copied,
        "resumed": bool(targets.resumed),
    }
    if targets.chroma_dir is not None:
        scrubbed["chroma"] = scrub_deleted(targets.chroma_dir, targets.collection_ids, scope, every_id)
        clear_store_index_space(store)  # slots of the vector index's files may hold text the process read
    conversations = sorted(
        {
            str(d.metadata["conversation_id"])
            for d in docs
            if d.metadata.get("type") in (DocType.TURN.value, DocType.SUMMARY.value)
            and d.metadata.get("conversation_id")
        }
    )
    release_positions(store, conversations)
    _unmark(store, name)
    return ForgetReport(name, deleted, mirrored, scrubbed, conversations)


def _writable_mirror(store: Store) -> Any:
    """The store's mirror, when it has one that can be erased from now; else why not, raised."""
    health = store.mirror_health
    if store.mirror is None and health is not None and health.error is not None:
        raise health.error  # a damaged mirror file would keep the texts: it names `brain mirror rebuild`
    if health is not None and health.status == "degraded":
        catch_up_mirror(store)
        if health.status == "degraded":
            raise StoreUnavailable(
                f"the mirror cannot be written now ({health.unwritable}) and holds the texts to "
                f"forget; nothing was deleted. Make it writable again and run the forget again"
            )
    return store.mirror


def _check_mirror_followed(store: Store) -> None:
    """The delete reached Chroma but not the mirror (it could not be written meanwhile): the marker
    stays, and the next forget erases the rows."""
    health = store.mirror_health
    if health is not None and health.status == "degraded":
        raise StoreUnavailable(
            f"the documents were deleted from the store, but the mirror could not be written "
            f"({health.unwritable}) and still holds their texts; make it writable again and "
            f"run the forget again to finish"
        )


def _retained_collections(store: Store) -> dict[str, Any]:
    """The Chroma collections of the store other than the live one: those a re-index keeps for a
    roll-back and the one it is building."""
    state = read_pointer(store.client, store.settings.collection)
    if state is None:
        return {}
    names = [g.collection for g in state.kept] + ([state.building.collection] if state.building else [])
    existing = {c.name for c in store.client.list_collections()}
    out = {}
    for collection in dict.fromkeys(names):
        if collection != store.collection_name and collection in existing:
            try:
                out[collection] = store.client.get_collection(collection, embedding_function=None)
            except Exception as exc:  # connection or server errors from chromadb
                raise StoreUnavailable(
                    f"cannot open the kept collection {collection!r} to forget from it: {exc}"
                ) from exc
    return out


def _ids_in_scope(collection: Any, scope: str) -> list[str]:
    try:
        return list(collection.get(where={"scope": scope}, include=[])["ids"])
    except Exception as exc:  # connection or server errors from chromadb
        raise StoreUnavailable(f"cannot read the kept collection {collection.name!r}: {exc}") from exc


def _delete_ids(collection: Any, ids: list[str], batch: int = 1000) -> None:
    try:
        for start in range(0, len(ids), batch):
            collection.delete(ids=ids[start : start + batch])
    except Exception as exc:  # connection or server errors from chromadb
        raise StoreUnavailable(
            f"cannot delete from the kept collection {collection.name!r}: {exc}; run the forget again to finish"
        ) from exc


# ---- the marker of forgets under way ------------------------------------------------------------------


def _marker_path(store: Store) -> Path:
    return Path(store.settings.data_dir) / MARKER


def _pending(store: Store) -> list[dict[str, object]]:
    path = _marker_path(store)
    try:
        return list(json.loads(path.read_text(encoding="utf-8")).get("forgets", []))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise StoreUnavailable(
            f"cannot read {path}, the record of an unfinished forget ({exc}); if you know "
            f"which entity it was, run its forget again, then delete the file"
        ) from exc


def _mark(store: Store, name: str, scope: str, ids: list[str]) -> None:
    entries = [p for p in _pending(store) if p["entity"] != name]
    _write_marker(store, entries + [{"entity": name, "scope": scope, "ids": ids}])


def _unmark(store: Store, name: str) -> None:
    _write_marker(store, [p for p in _pending(store) if p["entity"] != name])


def _write_marker(store: Store, entries: list[dict[str, object]]) -> None:
    """Replace the marker durably (:func:`~brain.store.disk.write_json_durably`), or remove it when empty."""
    path = _marker_path(store)
    try:
        if entries:
            write_json_durably(path, {"forgets": entries})
        else:
            path.unlink(missing_ok=True)
            sync_directory(path.parent)
    except OSError as exc:
        raise StoreUnavailable(
            f"cannot write {path}, the record of a forget under way ({exc}); nothing more was "
            f"deleted: free space or fix the permissions and run the forget again"
        ) from exc


__all__ = ["MARKER", "ForgetReport", "forget_entity", "forget_preview"]
