"""What keeps a lost store from emptying the mirror.

The mirror is the copy that survives the loss of the Chroma store, so the store is the truth that
deletes mirror rows (a catch-up, a rebuild) only while it plausibly is the store the mirror follows.
:func:`check_deletions` refuses, with :class:`~brain.model.errors.StoreLooksLost`, when:

- a restore from the mirror into the store began and never finished (a kill -9 in the middle): the
  store holds part of the mirror (:class:`~brain.model.errors.RestoreUnfinished`; running the restore
  again completes it). :func:`restore_started` leaves the marker in the mirror file, which travels
  with the rows it protects, and :func:`restore_finished` removes it;
- the store holds none of the mirrored documents while the mirror holds some (a lost disk, a wrong
  BRAIN_DATA_DIR, an empty new Chroma server behind BRAIN_CHROMA_URL);
- it lacks more than :data:`SHRINK_SHARE` of the mirror's rows, and more than :data:`SHRINK_FLOOR`
  of them: the mirror follows every write, so a catch-up only ever has a few deletes to repair;
- its collection is not the one the mirror last followed (created again: a new Chroma id) and the
  catch-up would delete rows. A collection that replaced the followed one while that one still exists
  (a re-index swap, a roll-back) is the same store.

``force`` is the user's explicit word that the store is right (``brain mirror sync --force``).
The mirror records the collection it follows (:func:`record_store`) after every catch-up and restore,
an empty mirror the store it is attached to (:func:`adopt_store`), and a re-index the collection it
swapped to (:func:`store_moved`).

The store's own open never deletes mirror rows in bulk: rolling back a write a dead process left
half done touches that write's ids only (:mod:`brain.store.write_intents`), and a restore's writes bypass
the mirror, so rolling one back leaves the mirror alone.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from brain.model.errors import MirrorCorrupt, RestoreUnfinished, StoreLooksLost, StoreUnavailable

if TYPE_CHECKING:
    from brain.features.mirror.store import EngramMirror
    from brain.store import Store

log = logging.getLogger(__name__)

#: engram_meta keys: the collection the mirror follows, and a restore under way
STORE_KEY = "brain_store_collection"
RESTORE_KEY = "brain_restore_unfinished"
#: the share of the mirror's rows, and the number, a catch-up may delete without being told to
SHRINK_SHARE = 0.10
SHRINK_FLOOR = 10

_RESTORE = "brain restore --from-mirror"
_CONFIRM = "brain mirror sync --force"


@dataclass(frozen=True)
class StoreIdentity:
    """The Chroma collection a mirror follows: its name, its id (new whenever it is created again) and
    where it lives (said in messages; a moved data directory keeps its collection's id)."""

    collection: str
    id: str
    where: str

    @classmethod
    def of(cls, store: Store) -> StoreIdentity:
        where = store.settings.chroma_url or str(store.settings.data_dir / "chroma")
        return cls(store.collection_name, str(store.col.id), where)

    @classmethod
    def parse(cls, text: str | None) -> StoreIdentity | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(str(data["collection"]), str(data["id"]), str(data.get("where", "")))
        except (ValueError, KeyError, TypeError):
            return None  # written by something else: not a record to trust

    def dump(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def followed_store(mirror: EngramMirror) -> StoreIdentity | None:
    """The collection the mirror last followed (None: never recorded, e.g. a file older than this record)."""
    return StoreIdentity.parse(mirror.meta(STORE_KEY))


def record_store(mirror: EngramMirror, store: Store) -> None:
    """Record that the mirror follows ``store``'s live collection now."""
    identity = StoreIdentity.of(store)
    if followed_store(mirror) != identity:
        mirror.set_meta(STORE_KEY, identity.dump())


def adopt_store(mirror: EngramMirror, store: Store) -> None:
    """A mirror that holds none of brain's rows and follows no collection yet starts following
    ``store`` (called when the mirror is attached to a store at open). A mirror with rows is never
    re-pointed here: only a catch-up or a restore that passed :func:`check_deletions` does that."""
    if followed_store(mirror) is None and not mirror.ids(foreign=False):
        try:
            record_store(mirror, store)
        except MirrorCorrupt:
            raise
        except StoreUnavailable as exc:  # e.g. a read-only file: the open goes on, the next catch-up records it
            log.warning("the mirror %s could not record the store it follows: %s", mirror.path, exc)


def store_moved(mirror: EngramMirror, before: StoreIdentity, store: Store) -> None:
    """``store`` serves another collection now (a re-index swapped it, or rolled it back): a mirror
    that followed the one it served ``before`` follows the new one."""
    if followed_store(mirror) in (None, before):
        record_store(mirror, store)


def unfinished_restore(mirror: EngramMirror) -> dict[str, object] | None:
    """The marker of a restore that began and did not finish: ``{"collection", "id", "where", "started"}``."""
    text = mirror.meta(RESTORE_KEY)
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    return found if isinstance(found, dict) else {"started": None}


def restore_started(mirror: EngramMirror, store: Store) -> None:
    """Mark a restore from ``mirror`` into ``store`` as under way (before its first write)."""
    marker = {**asdict(StoreIdentity.of(store)), "started": time.time()}
    mirror.set_meta(RESTORE_KEY, json.dumps(marker, sort_keys=True))


def restore_finished(mirror: EngramMirror, store: Store) -> None:
    """The restore wrote every row: the mirror follows ``store`` from now on."""
    record_store(mirror, store)
    mirror.set_meta(RESTORE_KEY, None)


def check_deletions(
    store: Store, mirror: EngramMirror, *, mirror_rows: int, would_delete: int, store_rows: int, force: bool = False
) -> None:
    """Raise :class:`StoreLooksLost` when deleting ``would_delete`` of the mirror's ``mirror_rows``
    rows (brain's own; ``store_rows``: the store's mirrored documents) to match ``store`` is not to be
    done without the user's word (see the module docstring). ``force``: that word was given."""
    if force:
        return
    now = StoreIdentity.of(store)
    restoring = unfinished_restore(mirror)
    if restoring is not None:
        started = restoring.get("started")
        when = (
            time.strftime(" at %Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else ""
        )
        raise RestoreUnfinished(
            f"a restore from the mirror {mirror.path} into the store ({now.where}) began{when} and did not finish: "
            f"the store holds {store_rows} of the mirror's {mirror_rows} documents. Run `{_RESTORE}` again to "
            f"complete it; nothing was deleted from the mirror. To keep the store as it is instead and let the "
            f"mirror lose the rest, run `{_CONFIRM}`",
            mirror_rows=mirror_rows,
            would_delete=would_delete,
        )
    if not would_delete:
        return
    tail = (
        f"Nothing was deleted from the mirror. Bring the store back from it with `{_RESTORE}`; if the store "
        f"is right and the mirror should lose those rows too, run `{_CONFIRM}`"
    )
    if store_rows == 0:
        raise StoreLooksLost(
            f"the store ({now.where}, collection {now.collection!r}) holds none of the {mirror_rows} documents "
            f"the mirror {mirror.path} keeps: it looks lost (a lost disk, a wrong BRAIN_DATA_DIR or "
            f"BRAIN_CHROMA_URL, a new empty Chroma server). {tail}",
            mirror_rows=mirror_rows,
            would_delete=would_delete,
        )
    if would_delete > SHRINK_FLOOR and would_delete > SHRINK_SHARE * mirror_rows:
        raise StoreLooksLost(
            f"the store ({now.where}, collection {now.collection!r}) lacks {would_delete} of the {mirror_rows} "
            f"documents the mirror {mirror.path} keeps: it is much smaller than its mirror, which follows every "
            f"write (part of the store lost, or another store). {tail}",
            mirror_rows=mirror_rows,
            would_delete=would_delete,
        )
    followed = followed_store(mirror)
    if followed is not None and followed.id != now.id and not _still_there(store, followed):
        raise StoreLooksLost(
            f"the store's collection {now.collection!r} ({now.where}) is not the collection the mirror "
            f"{mirror.path} followed ({followed.collection!r} with id {followed.id}, at {followed.where}; it was "
            f"created again since), and it lacks {would_delete} of the {mirror_rows} documents the mirror keeps. "
            f"{tail}",
            mirror_rows=mirror_rows,
            would_delete=would_delete,
        )


def _still_there(store: Store, followed: StoreIdentity) -> bool:
    """Whether the collection the mirror followed still exists as it was: a re-index swapped the store
    to another collection, and the store was not lost."""
    from chromadb.errors import NotFoundError

    try:
        col = store.client.get_collection(followed.collection, embedding_function=None)
    except (NotFoundError, ValueError):  # gone (older chromadb raise ValueError)
        return False
    return str(col.id) == followed.id


__all__ = [
    "SHRINK_FLOOR",
    "adopt_store",
    "SHRINK_SHARE",
    "StoreIdentity",
    "check_deletions",
    "followed_store",
    "record_store",
    "restore_finished",
    "restore_started",
    "store_moved",
    "unfinished_restore",
]
