"""Leaving no bytes of deleted documents in the embedded Chroma store's SQLite file.

Chroma deletes a document's rows, but its text survives in the file in three places:

- its write-ahead queue (``embeddings_queue``), which keeps every write's record, text and metadata
  included, until the vector index has persisted past it (every ``hnsw:sync_threshold`` writes);
- its full-text index (``embedding_fulltext_search``, FTS5), whose segments keep a deleted row's
  tokens until they are merged;
- the freed space of the pages the rows were in.

:func:`scrub_deleted` clears each, for documents already deleted through the store: the queue
records of those documents (by id, or by the scope they were in) written before their delete lose their
metadata (the only part holding text; their vectors stay, because the vector index replays the queue
from its last persisted point and the later delete record still removes them), the FTS index is merged
(``optimize``), and the file is vacuumed, which writes every live page afresh and drops the free ones.
``chroma utils vacuum`` does the same vacuum; Chroma documents it as safe while a client is connected,
waiting for the database lock.

A Chroma server (``BRAIN_CHROMA_URL``) keeps its file out of brain's reach: nothing is done there.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from brain.model.errors import StoreUnavailable

if TYPE_CHECKING:
    from brain.config.fields import StorageFields
    from brain.store.locking import DataDirLock


class Scrubbable(Protocol):
    """A mirror that can clear what it deleted from its file's free pages."""

    def scrub(self) -> object: ...


class Scrubbed(Protocol):
    """A store, as far as clearing its files goes (:class:`brain.store.Store`)."""

    @property
    def settings(self) -> StorageFields: ...

    lock: threading.RLock
    dir_lock: DataDirLock | None
    mirror: Scrubbable | None


#: the embedded store's file under ``<data dir>/chroma``
CHROMA_FILE = "chroma.sqlite3"
#: Chroma's operation code of a delete record in ``embeddings_queue``
_DELETE = 3
BUSY_TIMEOUT_SECONDS = 30


# a queue record that still holds text of a document deleted since: its id has a later delete record
_TRACE = (
    "metadata IS NOT NULL AND operation != :delete AND substr(topic, -length(:collection)) = :collection "
    "AND (id IN (SELECT value FROM json_each(:ids)) OR json_extract(metadata, '$.scope') = :scope) "
    "AND seq_id < (SELECT MAX(d.seq_id) FROM embeddings_queue d WHERE d.id = embeddings_queue.id "
    "AND d.topic = embeddings_queue.topic AND d.operation = :delete)"
)


def deleted_traces(chroma_dir: Path, collection_ids: str | Sequence[str], scope: str, ids: Sequence[str] = ()) -> int:
    """How many queue records of the collections ``collection_ids`` still hold text of deleted
    documents that were in ``scope`` or had one of ``ids``."""
    with _connect(chroma_dir) as conn:
        return sum(
            conn.execute(
                f"SELECT COUNT(*) FROM embeddings_queue WHERE {_TRACE}", _params(collection, scope, ids)
            ).fetchone()[0]
            for collection in _as_list(collection_ids)
        )


def scrub_deleted(
    chroma_dir: Path, collection_ids: str | Sequence[str], scope: str, ids: Sequence[str] = ()
) -> dict[str, object]:
    """Erase what the file still holds of deleted documents of the collections ``collection_ids`` that
    were in ``scope`` or had one of ``ids``, and compact the file (and empty its write-ahead log).
    Returns ``{"queue_records_redacted": n, "vacuumed": True}``."""
    with _connect(chroma_dir) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            redacted = sum(
                conn.execute(
                    f"UPDATE embeddings_queue SET metadata = NULL WHERE {_TRACE}", _params(collection, scope, ids)
                ).rowcount
                for collection in _as_list(collection_ids)
            )
            conn.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES ('optimize')")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # old pages in a write-ahead log hold text too
    return {"queue_records_redacted": redacted, "vacuumed": True}


def reclaim_dropped(store: Scrubbed) -> int:
    """Give back the space of collections deleted from the embedded store ``store``; returns the bytes
    the data directory shrank by (0 on a Chroma server, whose files are its own).

    Chroma deletes a collection's rows but leaves its vector index directory (``<segment id>/`` under
    ``chroma/``, no longer named by any segment), and SQLite keeps the freed pages in its file until it is
    vacuumed; the mirror's file keeps the pages of the vectors of models dropped with them. Under the
    store's lock: no write of this process touches either file meanwhile."""
    if store.dir_lock is None:
        return 0
    chroma_dir = store.settings.data_dir / "chroma"
    with store.lock:
        before = _tree_bytes(store.settings.data_dir)
        with _connect(chroma_dir) as conn:
            named = {str(row[0]) for row in conn.execute("SELECT id FROM segments")}
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        folders = [f for f in chroma_dir.iterdir() if f.is_dir() and _is_segment_id(f.name)]
        # a folder is a segment's only while some live segment's folder bears its id: a Chroma that
        # named them otherwise keeps every folder
        if any(f.name in named for f in folders):
            for folder in folders:
                if folder.name not in named:
                    shutil.rmtree(folder, ignore_errors=True)
        if store.mirror is not None:
            store.mirror.scrub()
        return max(before - _tree_bytes(store.settings.data_dir), 0)


def _is_segment_id(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _as_list(collection_ids: str | Sequence[str]) -> list[str]:
    return [str(collection_ids)] if isinstance(collection_ids, str) else [str(c) for c in collection_ids]


def _params(collection_id: str, scope: str, ids: Sequence[str]) -> dict[str, object]:
    return {"collection": str(collection_id), "scope": scope, "ids": json.dumps(list(ids)), "delete": _DELETE}


@contextmanager
def _connect(chroma_dir: Path) -> Iterator[sqlite3.Connection]:
    path = Path(chroma_dir) / CHROMA_FILE
    if not path.is_file():
        raise StoreUnavailable(f"no Chroma file at {path}; is BRAIN_DATA_DIR the store's data directory?")
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open {path} to erase deleted documents: {exc}") from exc
    try:
        conn.execute("PRAGMA secure_delete = ON")  # what the redaction frees is zeroed too
        yield conn
    except sqlite3.Error as exc:
        raise StoreUnavailable(
            f"could not erase deleted documents' bytes from {path} ({exc}); the documents are "
            f"deleted, but their text may remain in the file: stop other programs using the "
            f"store and run the forget again"
        ) from exc
    finally:
        conn.close()


__all__ = ["CHROMA_FILE", "Scrubbable", "Scrubbed", "deleted_traces", "reclaim_dropped", "scrub_deleted"]


#: the vector index's header (Chroma's hnswlib files): a 4-byte format number, then offsetLevel0,
#: max_elements, cur_element_count and size_data_per_element as 8-byte integers
_HEADER = struct.Struct("<4xQQQQ")


def clear_unused_index_space(chroma_dir: Path) -> int:
    """Zero the slots past the last element in each vector index's per-element files
    (``data_level0.bin`` and ``length.bin``) of the embedded store; returns how many files changed.

    Both files are written from buffers allocated for ``max_elements`` slots and never cleared, so the
    slots no element uses yet hold whatever the process's memory held: text it read among it. Nothing
    reads those slots (the header's element count bounds every read), and Chroma writes them again only
    when it writes the whole file (a new or resized index): :meth:`brain.store.Store.close` clears them
    after closing its client, and a forget right after its scrub, under the store's lock. A file whose
    size does not match its header is left as it is."""
    changed = 0
    for header in Path(chroma_dir).glob("*/header.bin"):
        try:
            _, max_elements, used, per_element = _HEADER.unpack_from(header.read_bytes())
        except (OSError, struct.error):
            continue
        if per_element <= 0 or used > max_elements:
            continue
        for name, slot in (("data_level0.bin", per_element), (_LENGTHS, _LENGTH_SLOT)):
            changed += _zero_tail(header.with_name(name), max_elements * slot, used * slot)
    return changed


def clear_store_index_space(store: Scrubbed) -> int:
    """Zero the vector index files' unused slots of ``store`` now (:func:`clear_unused_index_space`): on
    the embedded store this process holds, under the store's lock, so no write of Chroma's index happens
    meanwhile. Returns how many files changed (0 on a Chroma server, whose files are its own)."""
    if store.dir_lock is None:
        return 0
    with store.lock:
        return clear_unused_index_space(store.settings.data_dir / "chroma")


#: one link-list length per element, a 4-byte unsigned integer each
_LENGTHS = "length.bin"
_LENGTH_SLOT = 4


def _zero_tail(path: Path, expected_size: int, start: int) -> int:
    try:
        if path.stat().st_size != expected_size:
            return 0
        with open(path, "r+b") as out:
            out.seek(start)
            tail = out.read()
            if tail.count(0) == len(tail):
                return 0
            out.seek(start)
            out.write(bytes(len(tail)))
            out.flush()
            os.fsync(out.fileno())
    except OSError:
        return 0
    return 1
