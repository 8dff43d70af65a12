"""The index snapshot: the resident parts of the in-process indexes (one
:class:`~brain.store.memory_index.MemoryIndex` per scope and indexed type) saved to one file, so that
a start loads them instead of reading the collection.

**The file** is a NumPy ``.npz`` archive (no pickle: loading one never runs code) holding a JSON
header (``header``), and per resident part (:mod:`brain.store.partitions`; the header's ``parts`` lists
their scopes, the global one first) and indexed type its numeric arrays (``<type>/<part>/f32``,
``<type>/<part>/i8``, ...) and its rows as JSON (``<type>/<part>/rows``: ids, texts, metadata, tags,
scopes, problems), each JSON text stored as a ``uint8`` array. It is written to a temporary file
beside its place, flushed to disk and renamed over the old one, so a crash leaves the old snapshot or
the new one, never half of one.

**The header** says what the indexes belong to (the collection's name and Chroma id, the embedder
and its dimension, the indexed types) and how current they are: with a change feed, the sequence up
to which every write is in them (``sequence``, with the feed collection's id); without one (the
embedded store, owned by one process), the collection's size when it was saved (``count``).

**Proving a snapshot current** is the caller's (:class:`brain.store.indexes.InProcessState`): with a
feed, the records after ``sequence`` must all still be in the feed (none compacted), and are applied
on top; without one, the file itself is the proof. :class:`SnapshotKeeper` deletes it before the
store's first write reaches Chroma (and on every delete, with or without a feed, so that no snapshot
keeps a deleted text on disk); a new one is saved when the store closes. A file that exists therefore
was saved after the last write through a store, and its ``count`` must match the collection's (which
catches most writes that bypassed the store).

**Trust.** The snapshot is a cache, and what it holds decides who sees which row, so a load checks it
against what it claims and binds it to its store. The file ends with the keyed hash (HMAC-SHA256) of
all its bytes under its store's key, checked over the raw bytes before anything in the file is parsed.
Then every entry must be stored uncompressed (as brain writes it), so that no entry can declare more
bytes than the file holds: a zip bomb is refused from its headers, unread. JSON nested past Python's
recursion limit is refused too. Each index must be consistent (finite vectors and values; every row's
scope code and kind those its metadata says; the rows per scope the header lists), and every row of a
part must be of the part's scope.

The key is kept where whoever can write the data directory cannot read it. The embedded store's is a
file of its own (:class:`KeyFile`) in BRAIN_SNAPSHOT_KEY_DIR (default
``$XDG_STATE_HOME/brain/snapshot-keys``, refused inside the data directory), named by a hash of the
resolved data directory and the collection, mode 0600 in a 0700 directory. A new random key is written
at every save and deleted with the snapshot before a write, so an older snapshot kept aside and put
back no longer verifies. A missing or unreadable key file (a new machine, a data directory copied or
moved) leaves the snapshot unverifiable: it is ignored and the indexes rebuilt, and the next save
writes a key. A Chroma server's key is a random key in a side collection on the server
(:func:`snapshot_key`, ``<collection>__snapshot_key``), shared by its processes; a key an older brain
kept there for an embedded store (in ``chroma.sqlite3``) is deleted at open (:func:`drop_server_key`).

A snapshot that cannot be used (missing, unreadable, another collection or embedder, not provably
current, inconsistent, not signed with its store's key) is ignored with one log line saying why, and
the indexes are rebuilt from Chroma.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from brain.config import key_dir_problem
from brain.config.fields import StorageFields
from brain.model.errors import ConfigError, StoreError, StoreUnavailable
from brain.model.schemas import GLOBAL_SCOPE
from brain.store.events import WriteEvent, WriteSubscriber
from brain.store.memory_index import MemoryIndex
from brain.store.partitions import Part, paused_gc

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

log = logging.getLogger(__name__)

#: the file layout's version; a snapshot of another version is ignored
FORMAT = 4
#: where the snapshot lives in the data directory, unless BRAIN_INDEX_SNAPSHOT_PATH says otherwise
DIRECTORY = "index_snapshots"
#: the side collection that keeps a Chroma server's snapshot key
KEY_SUFFIX = "__snapshot_key"
_KEY_ID = "key"
#: a key's length in hex digits (32 random bytes)
_KEY_HEX = 64
#: the hash's length (hex HMAC-SHA256), the archive comment that ends the file
MAC_SIZE = 64
#: a file's bytes hashed per read
_CHUNK = 1 << 20
#: an array entry's ``.npy`` header, at most (NumPy's own default bound)
_MAX_NPY_HEADER = 10_000


def snapshot_path(settings: StorageFields) -> Path:
    """BRAIN_INDEX_SNAPSHOT_PATH, else ``<BRAIN_DATA_DIR>/index_snapshots/<collection>.npz``."""
    if settings.index_snapshot_path is not None:
        return settings.index_snapshot_path
    return settings.data_dir / DIRECTORY / f"{settings.collection}.npz"


def snapshot_key(client: ClientAPI, collection: str) -> bytes:
    """The key a Chroma server's snapshots are signed with: made once at random and kept in the side
    collection ``<collection>__snapshot_key`` (the first process to add it wins; every other reads that one)."""
    name = collection + KEY_SUFFIX
    try:
        col = client.get_or_create_collection(
            name, embedding_function=None, metadata={"brain": "index snapshot key", "of": collection}
        )
        got = col.get(ids=[_KEY_ID], include=["documents"])
        if not got["ids"]:
            col.add(ids=[_KEY_ID], documents=[secrets.token_hex(32)], embeddings=np.ones((1, 1), dtype=np.float32))
            got = col.get(ids=[_KEY_ID], include=["documents"])
        return bytes.fromhex((got["documents"] or [])[0])
    except ValueError as exc:  # a key that is not hex: written by hand
        raise StoreError(
            f"the index snapshot key in collection {name!r} is damaged ({exc}); delete that "
            f"collection (a new key is made) or set BRAIN_INDEX_SNAPSHOT=false"
        ) from None
    except Exception as exc:  # connection or server errors from chromadb
        raise StoreUnavailable(f"cannot read the index snapshot key {name!r}: {exc}") from exc


def drop_server_key(client: ClientAPI, collection: str) -> None:
    """Delete the side collection an embedded store kept its key in before it had a key file: a copy in
    the data directory would let whoever can write it sign a snapshot."""
    name = collection + KEY_SUFFIX
    if name in {c.name for c in client.list_collections()}:
        client.delete_collection(name)
        log.info(
            "deleted the index snapshot key kept in the data directory (%s); the key now lives in "
            "BRAIN_SNAPSHOT_KEY_DIR",
            name,
        )


class KeyFile:
    """An embedded store's snapshot key: 32 random bytes, hex, in a file of its own outside the data
    directory. :meth:`read` gives the key the last save wrote; :meth:`renew` writes a new one, before
    every save."""

    def __init__(self, settings: StorageFields):
        key_dir = settings.snapshot_key_dir
        assert key_dir is not None  # Settings resolves it (default: under XDG_STATE_HOME)
        problem = key_dir_problem(key_dir, settings.data_dir)  # settings changed after validation
        if problem:
            raise ConfigError(problem)
        store = f"{settings.data_dir.resolve()}\0{settings.collection}".encode("utf-8", "surrogateescape")
        self.path = key_dir / f"{hashlib.sha256(store).hexdigest()[:32]}.key"

    def read(self) -> bytes:
        """The key, or :class:`SnapshotUnusable` saying why there is none to check with."""
        try:
            with open(self.path, "rb") as stream:
                mode = os.fstat(stream.fileno()).st_mode
                text = stream.read(_KEY_HEX + 2)
        except FileNotFoundError:
            raise SnapshotUnusable(
                f"its key file {self.path} is missing (a new machine, a data directory copied or "
                f"moved, or another BRAIN_SNAPSHOT_KEY_DIR), so it cannot be verified"
            ) from None
        except OSError as exc:
            raise SnapshotUnusable(f"its key file {self.path} cannot be read ({exc})") from None
        if os.name == "posix" and mode & 0o077:  # another user may have written it
            raise SnapshotUnusable(f"its key file {self.path} is open to other users (mode {mode & 0o777:o})")
        try:
            key = bytes.fromhex(text.decode("ascii").strip())
        except ValueError:
            key = b""
        if len(key) * 2 != _KEY_HEX:
            raise SnapshotUnusable(f"its key file {self.path} is damaged (not {_KEY_HEX} hex digits)")
        return key

    def forget(self) -> None:
        """Delete the key, so that no snapshot saved before now verifies again."""
        self.path.unlink(missing_ok=True)

    def renew(self) -> bytes:
        """Write a new random key (atomically, mode 0600, its directory 0700) and return it."""
        key = secrets.token_bytes(_KEY_HEX // 2)
        directory = self.path.parent
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.name == "posix" and directory.stat().st_mode & 0o077:
                directory.chmod(0o700)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)  # 0600
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(key.hex().encode("ascii") + b"\n")
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            _fsync_dir(directory)
        except OSError as exc:
            raise StoreError(
                f"cannot write the index snapshot key {self.path} ({exc}); make {directory} writable, "
                f"set BRAIN_SNAPSHOT_KEY_DIR to a writable directory outside the data directory, or set "
                f"BRAIN_INDEX_SNAPSHOT=false"
            ) from exc
        return key


class ServerKey:
    """A Chroma server's snapshot key (:func:`snapshot_key`): one for every process and save."""

    def __init__(self, client: ClientAPI, collection: str):
        self._client, self._collection = client, collection
        self._key: bytes | None = None

    def read(self) -> bytes:
        if self._key is None:
            self._key = snapshot_key(self._client, self._collection)
        return self._key

    renew = read

    def forget(self) -> None:
        """Nothing: the change feed's sequence, not the key, proves a server's snapshot current."""


def _file_mac(key: bytes, stream: Any, size: int) -> bytes:
    """The keyed hash (HMAC-SHA256, hex) of the next ``size`` bytes of ``stream``, read a chunk at a time."""
    digest = hmac.new(key, digestmod=hashlib.sha256)
    left = size
    while left > 0:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            raise SnapshotUnusable(f"it ends {left} bytes early")
        digest.update(chunk)
        left -= len(chunk)
    return digest.hexdigest().encode("ascii")


def _scope_counts(metas: list[dict[str, object]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for meta in metas:
        scope = str(meta.get("scope", GLOBAL_SCOPE))
        counts[scope] = counts.get(scope, 0) + 1
    return counts


class SnapshotUnusable(Exception):
    """Why a snapshot cannot be used (the log line says it, then the indexes are rebuilt)."""


@dataclass(frozen=True)
class SnapshotIdentity:
    """What a snapshot's indexes belong to; a snapshot of anything else is ignored."""

    collection: str
    collection_id: str
    embedder: str
    dimension: int
    types: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "types": list(self.types)}

    def mismatch(self, header: Mapping[str, object]) -> str | None:
        """What in ``header`` differs from this identity, or None."""
        for key, want in self.to_dict().items():
            if header.get(key) != want:
                return f"it was saved for {key} {header.get(key)!r}, not {want!r}"
        return None


@dataclass(frozen=True)
class Snapshot:
    """A loaded snapshot: its indexes and how current they are (``sequence`` and ``feed_id`` with a
    change feed, None without; ``count``: the collection's size when saved)."""

    parts: dict[str, Part]
    sequence: int | None
    feed_id: str | None
    count: int
    saved_at: float
    part_files: dict[str, str]


def write_snapshot(
    path: Path,
    identity: SnapshotIdentity,
    parts: dict[str, Part],
    *,
    count: int,
    sequence: int | None,
    feed_id: str | None,
    key: bytes,
    part_files: dict[str, str] | None = None,
) -> None:
    """Save the ``parts`` (by scope) to ``path`` atomically (a temporary file renamed over it), signed with ``key``;
    ``part_files``: the evicted parts' files that are current, by scope (:class:`PartFiles`)."""
    entries: dict[str, np.ndarray] = {}
    scopes: dict[str, dict[str, int]] = {}
    order = sorted(parts, key=lambda scope: (scope != GLOBAL_SCOPE, scope))
    for number, scope in enumerate(order):
        written, counts = part_entries(parts[scope], f"{number}/")
        entries.update(written)
        for doc_type, held in counts.items():
            for name, n in held.items():
                scopes.setdefault(doc_type, {})[name] = scopes.get(doc_type, {}).get(name, 0) + n
    header = {
        "parts": order,
        "part_files": dict(part_files or {}),
        "format": FORMAT,
        **identity.to_dict(),
        "count": count,
        "sequence": sequence,
        "feed_id": feed_id,
        "saved_at": time.time(),
        "scopes": scopes,
    }
    entries["header"] = json_bytes(header)
    write_archive(path, entries, key)


def write_archive(path: Path, entries: dict[str, np.ndarray], key: bytes, *, durable: bool = True) -> None:
    """Write ``entries`` as an uncompressed ``.npz`` at ``path`` atomically, its last :data:`MAC_SIZE` bytes (the
    archive comment) the keyed hash of every byte before them. ``durable``: flushed to the disk before the
    rename (a cache whose loss costs only a read of Chroma skips it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w+b") as out:
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                for name, arr in entries.items():
                    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
                archive.comment = b"0" * MAC_SIZE  # a place for the hash, written below
            end = out.tell()
            out.seek(0)
            digest = _file_mac(key, out, end - MAC_SIZE)
            out.seek(end - MAC_SIZE)
            out.write(digest)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(path.parent)


def read_snapshot(path: Path, identity: SnapshotIdentity, key: bytes) -> Snapshot:
    """The snapshot at ``path`` if it belongs to ``identity``, is consistent and is signed with ``key``;
    else :class:`SnapshotUnusable`."""
    if not path.is_file():
        raise SnapshotUnusable("there is none")
    try:
        with paused_gc(), open(path, "rb") as stream:
            archive = read_archive(stream, key)
            header = json_value(archive["header"])
            if not isinstance(header, dict):
                raise SnapshotUnusable("its header is not a JSON object")
            if header.get("format") != FORMAT:
                raise SnapshotUnusable(f"it has format {header.get('format')!r}, not {FORMAT}")
            mismatch = identity.mismatch(header)
            if mismatch:
                raise SnapshotUnusable(mismatch)
            order = header.get("parts")
            if (
                not isinstance(order, list)
                or not order
                or order[0] != GLOBAL_SCOPE
                or not all(isinstance(scope, str) for scope in order)
                or len(set(order)) != len(order)
            ):
                raise SnapshotUnusable("its parts are not a list of distinct scopes, the global one first")
            parts: dict[str, Part] = {}
            held: dict[str, dict[str, int]] = {t: {} for t in identity.types}
            for number, scope in enumerate(order):
                parts[scope], counts = read_part(archive, identity, scope, f"{number}/")
                for doc_type, in_part in counts.items():
                    for name, n in in_part.items():
                        held[doc_type][name] = held[doc_type].get(name, 0) + n
            sequence, feed_id, count = header.get("sequence"), header.get("feed_id"), header.get("count")
            if not (sequence is None or _whole(sequence)) or not isinstance(count, int) or not _whole(count):
                raise SnapshotUnusable(f"its sequence {sequence!r} or count {count!r} is not a whole number")
            claimed = header.get("scopes")
            for doc_type in identity.types:
                if not isinstance(claimed, dict) or claimed.get(doc_type, {}) != held[doc_type]:
                    raise SnapshotUnusable(f"its {doc_type} rows per scope are not those its header lists")
            files = header.get("part_files", {})
            if not isinstance(files, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and len(v) == 64 for k, v in files.items()
            ):
                raise SnapshotUnusable("its part files are not a mapping of scopes to SHA-256 digests")
            return Snapshot(
                parts,
                sequence,
                None if feed_id is None else str(feed_id),
                count,
                float(header.get("saved_at") or 0.0),
                dict(files),
            )
    except SnapshotUnusable:
        raise
    except RecursionError:
        raise SnapshotUnusable("a JSON entry is nested deeper than Python's recursion limit") from None
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        # a truncated or damaged archive, a missing entry, bad JSON, wrong shapes (MemoryIndex.restore)
        raise SnapshotUnusable(f"it cannot be read ({type(exc).__name__}: {exc})") from None


def part_entries(part: Part, label: str = "") -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]]:
    """A part's archive entries, per type its arrays and rows named ``<type>/<label><name>``, and its rows
    per scope by type (for a header to list)."""
    entries: dict[str, np.ndarray] = {}
    counts: dict[str, dict[str, int]] = {}
    for doc_type, index in part.items():
        arrays, rows = index.export()
        entries.update({f"{doc_type}/{label}{name}": arr for name, arr in arrays.items()})
        entries[f"{doc_type}/{label}rows"] = json_bytes(rows)
        counts[doc_type] = _scope_counts(rows["metas"])
    return entries, counts


def read_part(
    archive: dict[str, np.ndarray], identity: SnapshotIdentity, scope: str, label: str = ""
) -> tuple[Part, dict[str, dict[str, int]]]:
    """The part :func:`part_entries` wrote for ``scope``, and its rows per scope by type; every row must be of
    ``scope`` (else :class:`SnapshotUnusable`)."""
    part: Part = {}
    counts: dict[str, dict[str, int]] = {}
    for doc_type in identity.types:
        prefix = f"{doc_type}/{label}"
        arrays = {
            name[len(prefix) :]: arr
            for name, arr in archive.items()
            if name.startswith(prefix) and name != prefix + "rows"
        }
        rows = json_value(archive[prefix + "rows"])
        if not isinstance(rows, dict):
            raise SnapshotUnusable(f"the rows of {doc_type} are not a JSON object")
        index = part[doc_type] = MemoryIndex.restore(identity.dimension, arrays, rows)
        counts[doc_type] = _scope_counts(rows["metas"])
        if set(counts[doc_type]) - {scope} or index.scope_names() - {scope}:
            raise SnapshotUnusable(f"its part of {scope!r} holds {doc_type} rows of another scope")
    return part, counts


def read_archive(stream: Any, key: bytes) -> dict[str, np.ndarray]:
    """The entries of a snapshot file, read at a bounded cost: first the keyed hash of the raw bytes
    (nothing is parsed before it matches); then every member must be stored uncompressed, as
    :func:`write_archive` writes it, so that no member can be larger than its share of the file, and
    each array must declare no more bytes than its member holds. A crafted archive (a zip bomb, a
    header claiming a huge array) is refused from the sizes it declares, before anything is read."""
    size = os.fstat(stream.fileno()).st_size
    if size <= MAC_SIZE:
        raise SnapshotUnusable(f"it is {size} bytes, too short to be a snapshot")
    stream.seek(size - MAC_SIZE)
    stored = stream.read(MAC_SIZE)
    stream.seek(0)
    if not hmac.compare_digest(stored, _file_mac(key, stream, size - MAC_SIZE)):
        raise SnapshotUnusable(
            "it is not signed with this store's snapshot key (edited, of an older format, or saved for another store)"
        )
    stream.seek(0)
    with zipfile.ZipFile(stream) as opened:
        members = opened.infolist()
        declared = 0
        for info in members:
            if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
                raise SnapshotUnusable(
                    f"its entry {info.filename!r} is compressed (method {info.compress_type}, "
                    f"{info.compress_size} bytes declaring {info.file_size}); brain writes none"
                )
            declared += info.file_size
        if declared > size:
            raise SnapshotUnusable(f"its entries declare {declared} bytes, more than the file's {size}")
        archive: dict[str, np.ndarray] = {}
        for info in members:
            name = info.filename.removesuffix(".npy")
            if name in archive:
                raise SnapshotUnusable(f"it holds the entry {name!r} twice")
            with opened.open(info) as member:
                archive[name] = _read_array(member, info.file_size, name)
    return archive


def _read_array(member: Any, size: int, name: str) -> np.ndarray:
    """One ``.npy`` member of ``size`` bytes: a plain dtype, and exactly the bytes its shape needs."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member, max_header_size=_MAX_NPY_HEADER)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member, max_header_size=_MAX_NPY_HEADER)
    else:
        raise SnapshotUnusable(f"its entry {name!r} is .npy version {version}")
    if dtype.hasobject:
        raise SnapshotUnusable(f"its entry {name!r} holds Python objects")
    needed = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
    left = size - member.tell()
    if needed != left:
        raise SnapshotUnusable(f"its entry {name!r} declares {needed} bytes of data but holds {left}")
    data = bytearray(member.read(needed))  # writable, as np.load gives
    if len(data) != needed:
        raise SnapshotUnusable(f"its entry {name!r} ends early")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


class SnapshotKeeper(WriteSubscriber):
    """The snapshot file of one store: kept only while it is provably current (see the module
    docstring), and told by the store whether its indexes changed since it was saved or loaded.

    ``owned``: the store is the only writer (the embedded store), so the file must go before the
    store's first write reaches Chroma; with a change feed the sequence proves it instead."""

    cache = True  # deletes other processes made reach it too

    def __init__(self, path: Path, identity: SnapshotIdentity, *, owned: bool, keys: KeyFile | ServerKey):
        """``keys``: the store's snapshot key, read at a load and renewed at a save."""
        self.path = path
        self.identity = identity
        self.keys = keys
        self.owned = owned
        self.current = False  # the file holds what the indexes hold
        self._file_may_exist = True

    def stage(self, event: WriteEvent) -> None:
        if self.owned:  # a file left behind would be served after this write: the write waits for it
            try:
                self.discard()
            except OSError as exc:
                raise StoreError(
                    f"cannot delete the index snapshot {self.path} or its key before writing ({exc}); nothing "
                    f"was written. Make it deletable, or set BRAIN_INDEX_SNAPSHOT=false"
                ) from exc

    def commit(self, event: WriteEvent) -> None:
        self.current = False
        if event.op == "delete":  # a deleted text must not stay on disk in a snapshot
            try:
                self.discard()
            except OSError as exc:  # the delete itself is done (and a start applies it over the file)
                log.warning(
                    "could not delete the index snapshot %s after a delete (%s): it may still hold "
                    "deleted texts; delete it by hand",
                    self.path,
                    exc,
                )

    def discard(self) -> None:
        """Delete the file and, for the embedded store, its key (once, until the next save): a copy of the
        file kept aside and put back after a write would otherwise still verify."""
        if self._file_may_exist:
            self.path.unlink(missing_ok=True)
            self.keys.forget()
            self._file_may_exist = False

    def load(self) -> Snapshot | None:
        """The snapshot, or None after logging why it cannot be used."""
        if not self.path.is_file():
            self.reject("there is none", quiet=True)
            return None
        try:
            snapshot = read_snapshot(self.path, self.identity, self.keys.read())
        except SnapshotUnusable as exc:
            self.reject(str(exc), quiet=not self.path.exists())
            return None
        except StoreUnavailable as exc:  # the key cannot be read: rebuild, as for any unusable snapshot
            self.reject(str(exc))
            return None
        return snapshot

    def reject(self, why: str, *, quiet: bool = False) -> None:
        """Log that the snapshot is ignored, and why."""
        log.log(
            logging.INFO if quiet else logging.WARNING,
            "index snapshot %s ignored: %s; rebuilding the in-process indexes from Chroma",
            self.path,
            why,
        )

    def save(
        self,
        parts: dict[str, Part],
        *,
        count: int,
        sequence: int | None,
        feed_id: str | None,
        part_files: dict[str, str] | None = None,
    ) -> Path:
        write_snapshot(
            self.path,
            self.identity,
            parts,
            count=count,
            sequence=sequence,
            feed_id=feed_id,
            key=self.keys.renew(),
            part_files=part_files,
        )
        self._file_may_exist = True
        self.current = True
        return self.path


def json_bytes(value: object) -> np.ndarray:
    return np.frombuffer(json.dumps(value, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def json_value(arr: np.ndarray) -> Any:
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise ValueError(f"a JSON entry is {arr.dtype}{list(arr.shape)}, not bytes")
    # the C parser stops at Python's recursion limit with RecursionError, which the reader turns into
    # "unusable": that bounds the depth without a second pass over the text
    return json.loads(arr.tobytes().decode("utf-8"))


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows cannot open a directory
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "DIRECTORY",
    "FORMAT",
    "KEY_SUFFIX",
    "KeyFile",
    "ServerKey",
    "Snapshot",
    "SnapshotIdentity",
    "SnapshotKeeper",
    "SnapshotUnusable",
    "drop_server_key",
    "json_bytes",
    "json_value",
    "part_entries",
    "read_archive",
    "read_part",
    "read_snapshot",
    "snapshot_key",
    "snapshot_path",
    "write_archive",
    "write_snapshot",
]
