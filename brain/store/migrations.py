"""Stores written before the typed ``status`` and ``part_of`` fields, rewritten to them when opened.

Older stores said what these fields say with adapter strings: ``pam_status`` (the PAM importer's
status), and the Xaibo modules' ``xaibo.kind`` / ``xaibo.chunk`` / ``xaibo.memory_id`` markers (a
continuation chunk of a long memory, a row of a vector index). :func:`migrate_typed_fields` rewrites
such rows: ``pam_status`` becomes ``status``; a chunk gets ``part_of`` = its memory's id, a vector row
``part_of`` = ``xaibo-index:<index>``; the old markers go. The old index-scope prefixes (``retired:``,
``part:``) lived only in memory and need nothing.

Cheap when nothing is old: one ``where`` query per old marker, each answering no rows. Idempotent:
a migrated row no longer matches, so a migration killed halfway finishes at the next open. The mirror
(which keeps each row's metadata as JSON) is rewritten first, each page in its own transaction, then
Chroma; killed between the two, the row is still old in Chroma and both are rewritten again.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from brain.model.errors import MirrorCorrupt
from brain.model.schemas import (
    LEGACY_STATUS_KEY,
    PART_OF_KEY,
    STATUS_KEY,
    STATUSES,
    XAIBO_INDEX_PREFIX,
    DocType,
    check_scope,
    entity_of,
    from_chroma,
)

log = logging.getLogger(__name__)

# the markers older Xaibo modules wrote
OLD_KIND_KEY, OLD_CHUNK_KEY, OLD_MEMORY_ID_KEY = "xaibo.kind", "xaibo.chunk", "xaibo.memory_id"
_INDEX_KEY = "xaibo.index"

#: every row written with an old marker matches one of these
OLD_MARKERS: tuple[dict[str, object], ...] = (
    {LEGACY_STATUS_KEY: {"$in": list(STATUSES)}},
    {OLD_KIND_KEY: {"$in": ["memory", "vector"]}},
    {OLD_CHUNK_KEY: {"$gte": 0}},
)  # (xaibo.memory_id never came without xaibo.kind)


def typed(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with the old markers replaced by the typed fields (the old keys set to None, which
    removes them in a Chroma update)."""
    out = dict(meta)
    if LEGACY_STATUS_KEY in out:
        status = out.pop(LEGACY_STATUS_KEY)
        out[LEGACY_STATUS_KEY] = None
        if status in STATUSES and STATUS_KEY not in meta:
            out[STATUS_KEY] = status
    kind = out.get(OLD_KIND_KEY)
    chunk = out.get(OLD_CHUNK_KEY)
    owner = out.get(OLD_MEMORY_ID_KEY)
    if kind == "vector" and isinstance(out.get(_INDEX_KEY), str):
        out[PART_OF_KEY] = XAIBO_INDEX_PREFIX + out[_INDEX_KEY]
    elif chunk and isinstance(owner, str) and owner:
        out[PART_OF_KEY] = owner
    for key in (OLD_KIND_KEY, OLD_CHUNK_KEY, OLD_MEMORY_ID_KEY):
        if key in out:
            out[key] = None
    return out


def migrate_typed_fields(col: Any, batch_size: int, mirror: Any = None) -> int:
    """Rewrite the memory rows of ``col`` (a Chroma collection) that carry old markers, ``batch_size``
    rows per call (the client's ``get_max_batch_size()``), and their rows in ``mirror`` (an
    :class:`~brain.features.mirror.EngramMirror`, or None). Returns how many rows were rewritten."""
    # one query for every marker: a store that is already migrated pays one empty filtered read per open
    where = {"$and": [{"type": DocType.MEMORY.value}, {"$or": list(OLD_MARKERS)}]}
    done = 0
    seen: set[str] = set()
    while True:
        page = col.get(where=where, limit=batch_size, include=["documents", "metadatas", "embeddings"])
        ids = [i for i in page["ids"] if i not in seen]
        if not ids:
            break
        seen.update(ids)  # a row that cannot lose its marker is tried once, not forever
        rows = {
            i: (d or "", typed(dict(m or {})), e)
            for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"])
            if i in ids
        }
        mirror = _mirror_rows(mirror, rows)
        col.update(ids=list(rows), metadatas=[meta for _, meta, _ in rows.values()])
        done += len(rows)
    if done:
        log.info("%d stored rows rewritten from their old status / part markers to the typed fields", done)
    return done


def _mirror_rows(mirror: Any, rows: dict[str, tuple[str, dict[str, object], Any]]) -> Any:
    """Write ``rows`` to ``mirror``; a damaged mirror is left alone (the store reports it when it opens
    it again) and None returned so the rest of the migration skips it."""
    if mirror is None:
        return None
    clean = {i: (d, {k: v for k, v in m.items() if v is not None}, e) for i, (d, m, e) in rows.items()}
    try:
        with mirror.transaction():
            mirror.upsert(
                {"id": i, "text": d, "metadata": from_chroma(m), "embedding": np.asarray(e, dtype=np.float32)}
                for i, (d, m, e) in clean.items()
            )
    except MirrorCorrupt as exc:
        log.warning("the mirror was not migrated: %s", exc)
        return None
    return mirror


#: recorded in the collection's metadata once every entity scope is in its canonical form (or left alone on
#: purpose): the scan of every row's scope runs once per store, not at every open
NAMES_MIGRATED_KEY = "brain_entity_names_canonical"


def migrate_entity_names(chroma: Any, mirror: Any = None, mirror_types: Any = ()) -> dict[str, Any]:
    """Move the rows stored under an entity name that is not in its canonical form (``entity:Alice``, written
    when names were case-sensitive) to the canonical scope (``entity:alice``), when that is safe: no row is
    in the canonical scope yet and no other spelling maps to it. Otherwise two people once told apart by
    spelling would become one, so those rows are left where they are (ranked for nobody, see
    :func:`brain.store.memory_rows.read_row`) and returned under ``"left"``. ``chroma``: the store's
    :class:`~brain.store.chroma.ChromaAccess`. Ids do not change. The mirror (rows of ``mirror_types``) is
    rewritten first, then Chroma, so a migration killed halfway is finished at the next open. Runs once per
    store (:data:`NAMES_MIGRATED_KEY`). Returns ``{"moved": {old scope: new}, "rows": n, "left": {old scope:
    why}}``."""
    col, batch_size = chroma.collection, chroma.max_batch_size
    report: dict[str, Any] = {"moved": {}, "rows": 0, "left": {}}
    if (col.metadata or {}).get(NAMES_MIGRATED_KEY):
        return report
    canonical_of: dict[str, str | None] = {}  # each scope seen -> its canonical form when it differs, else None
    legacy_ids: dict[str, list[str]] = {}  # the ids of the rows of those scopes only
    for page in chroma.pages(None, ["metadatas"]):
        for doc_id, meta in zip(page["ids"], page["metadatas"]):
            scope = str((meta or {}).get("scope") or "")
            if scope not in canonical_of:
                canonical_of[scope] = _other_form(scope)
            if canonical_of[scope] is not None:
                legacy_ids.setdefault(scope, []).append(doc_id)
    spellings: dict[str, list[str]] = {}
    for old in legacy_ids:
        spellings.setdefault(str(canonical_of[old]), []).append(old)
    for canonical, olds in sorted(spellings.items()):
        if canonical in canonical_of or len(olds) > 1:
            for old in olds:
                report["left"][old] = (
                    f"{canonical} holds rows already"
                    if canonical in canonical_of
                    else f"{', '.join(sorted(olds))} are all {canonical}"
                )
            continue
        (old,) = olds
        ids = legacy_ids[old]
        for first in range(0, len(ids), batch_size):
            page = col.get(ids=ids[first : first + batch_size], include=["documents", "metadatas", "embeddings"])
            rows = {}
            for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"]):
                meta = {**(m or {}), "scope": canonical}
                if "entity" in meta:
                    meta["entity"] = entity_of(canonical)
                rows[i] = (d or "", meta, e)
            kept = {i: r for i, r in rows.items() if r[1].get("type") in mirror_types}
            if mirror is not None and kept:
                mirror = _mirror_rows(mirror, kept)
            col.update(ids=list(rows), metadatas=[meta for _, meta, _ in rows.values()])
            report["rows"] += len(rows)
        report["moved"][old] = canonical
    for old, new in report["moved"].items():
        log.info("entity scope %r moved to its canonical form %r", old, new)
    for old, why in report["left"].items():
        log.warning("entity scope %r left as it is, ranked for nobody: %s; rename its rows by hand", old, why)
    col.modify(metadata={**(col.metadata or {}), NAMES_MIGRATED_KEY: 1})
    return report


def _other_form(scope: str) -> str | None:
    """The canonical form of an entity scope written in another form, else None (the global scope, a scope
    already canonical, or one that names no valid entity: the index reports those)."""
    if entity_of(scope) is None:
        return None
    try:
        canonical = check_scope(scope)
    except ValueError:
        return None
    return canonical if canonical != scope else None


__all__ = ["NAMES_MIGRATED_KEY", "OLD_MARKERS", "migrate_entity_names", "migrate_typed_fields", "typed"]
