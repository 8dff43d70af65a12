"""Disaster recovery in both directions: the store from the mirror, the mirror from the store.

:func:`recover_store` (``brain restore --from-mirror``) rebuilds a lost Chroma store. The mirror holds
what exists nowhere else: memories, and the conversations (turns and summaries) with the default
``BRAIN_MIRROR_TYPES``. Every document in it comes back with its id, text, metadata and stored vector
(:func:`brain.features.mirror.sync.restore_from_mirror`). What the mirror does not hold comes from its files:

- persona: reloaded from ``persona.md`` (BRAIN_PERSONA_PATH) when the file is there;
- FAQ: re-ingested from the knowledge-base folders given (``--kb``); without them the report says to
  run ``brain ingest <kb>``;
- a type outside BRAIN_MIRROR_TYPES that has no file (e.g. turns, when the setting leaves them out)
  is lost, and the report says so;
- with RAG_TRACK_ACCESS, memories keep the ``last_used`` time of their last write: recording a use
  updates Chroma alone.

:func:`rebuild_mirror` (``brain mirror rebuild``) does the opposite for a damaged or unwanted mirror
file: it moves the file aside (kept, under a timestamped name), writes a new one from the store with
the store's vectors (nothing is embedded), and copies into it the rows engram wrote itself from the
old file when they can still be read (they exist nowhere else). The old file of a sound mirror is
then deleted when the new one holds every row it held; a damaged one is kept.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.features.ingest import ingest_paths
from brain.features.mirror.guard import check_deletions
from brain.features.mirror.integrity import MirrorHealth, companions, drop_empty_wal, move_aside
from brain.features.mirror.store import EngramMirror
from brain.features.mirror.sync import PAGE, RestoreReport, SyncReport, restore_from_mirror, store_ids, sync_mirror
from brain.features.persona import load_persona
from brain.model.errors import REBUILD_COMMAND, BrainError, MirrorCorrupt

if TYPE_CHECKING:
    from brain.store import Store

log = logging.getLogger(__name__)


def _mirror_off() -> BrainError:
    return BrainError("the mirror is off (BRAIN_MIRROR_ENABLED=false); set BRAIN_MIRROR_ENABLED=true")


# ---- the store from the mirror --------------------------------------------------------------------


@dataclass
class RecoveryReport:
    """What :func:`recover_store` brought back, from where, and what it could not."""

    mirror: RestoreReport
    persona: dict[str, object] | None = None  # brain.features.persona.PersonaLoad.to_dict()
    knowledge_base: dict[str, Any] | None = None  # brain.features.ingest.IngestReport.to_dict()
    not_restored: list[str] = field(default_factory=list)  # what is missing and what to do about it

    def to_dict(self) -> dict[str, object]:
        return {
            "mirror": self.mirror.to_dict(),
            "restored": self.mirror.restored,
            "reused_vectors": self.mirror.reused_vectors,
            "embedded": self.mirror.embedded,
            "by_type": self.mirror.by_type,
            "persona": self.persona,
            "knowledge_base": self.knowledge_base,
            "not_restored": self.not_restored,
        }


def recover_store(
    store: Store,
    *,
    persona_path: str | Path | None = None,
    kb_paths: Sequence[str | Path] = (),
    include_foreign: bool = True,
    batch: int = 500,
) -> RecoveryReport:
    """Rebuild ``store`` from its mirror and the files (see the module docstring).

    ``persona_path`` defaults to BRAIN_PERSONA_PATH; ``kb_paths`` are the knowledge-base files or
    folders to ingest again; ``batch``: documents written per store write. A damaged mirror cannot be
    restored from (the error says so, and what to use instead). An interrupted restore is completed by
    running it again; until then the store does not start (:mod:`brain.features.mirror.guard`).
    """
    mirror = store.mirror
    if mirror is None:
        health = store.mirror_health
        if health is not None and health.error is not None:
            raise _unrestorable(health.error)
        raise _mirror_off()
    try:
        restored = restore_from_mirror(store, mirror, include_foreign=include_foreign, batch=batch)
    except MirrorCorrupt as exc:
        raise _unrestorable(exc) from exc
    report = RecoveryReport(restored)
    present = set(restored.by_type)
    mirrored = set(store.settings.mirrored_types)

    path = Path(persona_path) if persona_path is not None else store.settings.persona_path
    if path.is_file():
        report.persona = load_persona(store, path).to_dict()
    elif "persona" not in present:
        report.not_restored.append(
            f"persona: it comes from its file and {path} does not exist; load it with `brain persona load PATH`"
        )

    if kb_paths:
        report.knowledge_base = ingest_paths(store, list(kb_paths)).to_dict()
    elif "faq" not in present:
        report.not_restored.append(
            "faq: FAQ documents come from the knowledge-base files, which the mirror does not keep; "
            "ingest them again with `brain ingest <kb>` (or `brain restore --from-mirror --kb <kb>`)"
        )

    lost = sorted({"memory", "turn", "summary"} - mirrored - present)
    if lost:
        report.not_restored.append(
            f"{', '.join(lost)}: not mirrored (BRAIN_MIRROR_TYPES={','.join(store.settings.mirrored_types)}), "
            f"so they were lost with the store and have no file to come from; include them in BRAIN_MIRROR_TYPES "
            f"to keep them"
        )
    if "memory" in present and store.settings.track_access:
        report.not_restored.append(
            "memory: when each memory was last used in a context is kept in Chroma alone (it changes on every "
            "retrieval); restored memories carry the last-use time of their last write"
        )
    log.info(
        "recovered the store from the mirror: %d documents, %d stored vectors reused, %d embedded; %d not restored",
        report.mirror.restored,
        report.mirror.reused_vectors,
        report.mirror.embedded,
        len(report.not_restored),
    )
    return report


def _unrestorable(error: MirrorCorrupt) -> BrainError:
    return BrainError(
        f"cannot restore from the mirror {error.path}: it is damaged ({error.detail}). `{REBUILD_COMMAND}` "
        f"goes the other way (it rebuilds the mirror from the store), so it cannot help a lost store. Restore "
        f"from a copy of the mirror file made before the damage: BRAIN_MIRROR_PATH=<copy> brain restore --from-mirror"
    )


# ---- the mirror from the store --------------------------------------------------------------------


def _holds_nothing_more(old: Path, mirror: EngramMirror) -> bool:
    """Whether every row of the mirror file ``old`` is in ``mirror`` too."""
    try:
        with closing(sqlite3.connect(f"file:{old}?mode=ro", uri=True)) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM memories")]
    except sqlite3.Error:
        return False
    return len(mirror.existing_ids(ids)) == len(set(ids))


@dataclass
class RebuildReport:
    """``moved_aside``: the old file (and its WAL files) under their new names; ``foreign_copied``: rows
    engram wrote itself carried over from the old file; ``foreign_error``: why they could not be read."""

    path: str
    moved_aside: list[str]
    sync: SyncReport
    foreign_copied: int = 0
    foreign_error: str | None = None
    seconds: float = 0.0
    old_deleted: bool = False  # the old file was sound and the new one holds all its rows

    def to_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        return {**asdict(self), "written": self.sync.added}


def rebuild_mirror(store: Store, *, force: bool = False) -> RebuildReport:
    """Replace the store's mirror file by one rebuilt from the store (see the module docstring).

    Refuses, unless ``force``, when the store holds none of the mirrored types but the mirror file is
    not empty: that is a lost store, which ``brain restore --from-mirror`` rebuilds from the mirror.
    A readable mirror is checked as a catch-up checks it (:mod:`brain.features.mirror.guard`: a store much
    smaller than the mirror, created again, or half restored is refused too).
    Afterwards ``store.mirror`` is the new file and ``store.mirror_health`` is ok again.
    """
    health = store.mirror_health
    if health is None or not health.enabled:
        raise _mirror_off()
    started = time.perf_counter()
    path = store.mirror.path if store.mirror is not None else Path(health.path)
    types = store.settings.mirrored_types
    if store.mirror is not None and not force:
        ours = store.mirror.ids(foreign=False)
        if ours:
            present = store_ids(store, types, PAGE)
            check_deletions(
                store, store.mirror, mirror_rows=len(ours), would_delete=len(ours - present), store_rows=len(present)
            )
    if not force and path.exists() and path.stat().st_size > 0 and not any(store.count(t) for t in types):
        raise BrainError(
            f"the store holds no {', '.join(types)} documents, so rebuilding would leave the mirror {path} empty. "
            f"To bring a lost store back from the mirror run `brain restore --from-mirror`; to rebuild anyway "
            f"pass --force (the old file is kept under a new name)"
        )
    healthy = health.error is None and store.mirror is not None
    if store.mirror is not None:
        store.mirror.close()
        store.mirror = None
    moved = move_aside(path)
    if moved:
        log.info("mirror %s moved aside to %s", path, moved[0])
    mirror = EngramMirror(path, store.embedder.name, batch_size=store.settings.mirror_batch_size)
    try:
        synced = sync_mirror(store, mirror, types=types)
        report = RebuildReport(str(path), [str(p) for p in moved], synced)
        if moved:
            try:
                report.foreign_copied = mirror.copy_foreign_rows(moved[0])
            except (MirrorCorrupt, sqlite3.DatabaseError) as exc:  # the old file is kept: report, do not fail
                report.foreign_error = exc.detail if isinstance(exc, MirrorCorrupt) else str(exc)
            else:
                if healthy and _holds_nothing_more(moved[0], mirror):
                    # a copy of a sound file with nothing the new one lacks would only keep texts a forget
                    # has to reach: it goes, with the files its reads left beside it
                    for old in [*moved, *companions(moved[0])]:
                        old.unlink(missing_ok=True)
                    report.moved_aside, report.old_deleted = [], True
            drop_empty_wal(moved[0])  # the reads above opened the old file: no empty -wal/-shm left beside it
    except BaseException:
        mirror.close()
        raise
    store.mirror = mirror
    store.mirror_health = MirrorHealth(path)
    report.seconds = time.perf_counter() - started
    log.info(
        "mirror rebuilt at %s from the store: %d documents (%.1f s)", report.path, report.sync.added, report.seconds
    )
    return report
