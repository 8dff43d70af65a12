"""Exports and imports carried over HTTP: one uncompressed tar each way, files checked by name and kind.

``GET /v1/export`` sends :func:`export_archive` of an export built in memory, and the caller writes it where it
is (:func:`brain.features.pam.export.write_export`); ``POST /v1/import`` takes :func:`import_archive` of the
caller's files and imports them from a private folder (:func:`unpack_import`).
"""

from __future__ import annotations

import io
import re
import shutil
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO

import orjson

from brain.features.pam.export import BuiltExport
from brain.features.pam.spec import CONVERSATIONS_DIR, EMBEDDINGS_FILE, MEMORY_STORE_FILE
from brain.model.errors import BrainError, ValidationError

#: the member of an export archive that carries what the export holds (BuiltExport.counts)
ARCHIVE_COUNTS = "brain-export.json"
#: members an import archive may hold: the memory store, its embeddings and a file per conversation (each
#: becomes a file on the server's disk)
MAX_MEMBERS = 200_000
#: characters of a conversation file's name: a file system takes 255 bytes for one name; an export's are
#: at most 205 (conversation_mapping.conversation_file_name)
MAX_FILE_NAME = 250
#: the file names an archive may carry: the export's own, nothing that climbs out of its folder
_FILE_NAME = re.compile(
    rf"({re.escape(MEMORY_STORE_FILE)}|{re.escape(EMBEDDINGS_FILE)}|"
    rf"{CONVERSATIONS_DIR}/[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_FILE_NAME - 6}}}\.json)"
)
#: bytes copied at a time from a member to its file
_CHUNK = 1 << 20


def _pack(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _shown(name: str) -> str:
    """A member's name for an error: whole when short, else its start and its length."""
    return repr(name) if len(name) <= 80 else f"{name[:60]!r}... ({len(name):,} characters)"


def _name_problem(name: str, allowed: set[str]) -> str | None:
    """Why ``name`` cannot be a member of an export archive, or None."""
    if name in allowed or _FILE_NAME.fullmatch(name):
        return None
    prefix = f"{CONVERSATIONS_DIR}/"
    if name.startswith(prefix) and len(name) - len(prefix) > MAX_FILE_NAME:
        return (
            f"the archive holds {_shown(name)}, a conversation file name of more than {MAX_FILE_NAME} characters; "
            f"rename the file (and its conversations_index storage.ref) to a shorter name"
        )
    return f"the archive holds {_shown(name)}, which is not a file of a PAM export"


def _members(
    archive: tarfile.TarFile, allowed: set[str], budget: int, max_members: int | None = None
) -> Iterator[tuple[str, IO[bytes]]]:
    """Each member of ``archive`` with a reader of its bytes, every one checked from its header before a
    byte of it is read: a regular file, not sparse (its size would not be what it takes in the archive),
    of an export's name, named once, at most ``max_members`` of them, and their sizes together at most
    ``budget`` (the archive's own size: the bytes of a regular member are in the archive)."""
    seen: set[str] = set()
    left = budget
    for count, member in enumerate(archive, 1):
        name = member.name
        if max_members is not None and count > max_members:
            raise ValidationError(
                f"the archive holds more than {max_members:,} files; an export has its memory store, its "
                "embeddings and one file per conversation: import a smaller export (e.g. `brain export --entity`)"
            )
        if not member.isfile():
            raise ValidationError(f"the archive holds {_shown(name)}, which is not a file of a PAM export")
        if member.issparse():
            raise ValidationError(
                f"the archive member {_shown(name)} is a sparse file (it would expand to {member.size:,} bytes); "
                "send the files as regular tar members, as `brain import` does"
            )
        problem = _name_problem(name, allowed)
        if problem:
            raise ValidationError(problem)
        if name in seen:
            raise ValidationError(
                f"the archive holds {_shown(name)} twice, and which copy to import cannot be known; send each file once"
            )
        if member.size > left:
            raise ValidationError(
                f"the archive member {_shown(name)} says it holds {member.size:,} bytes, more than the archive "
                "does; the archive is damaged: make it again"
            )
        left -= member.size
        seen.add(name)
        handle = archive.extractfile(member)
        assert handle is not None  # a regular file has a reader
        yield name, handle


def _unpack(data: bytes, allowed: set[str]) -> dict[str, bytes]:
    """Every member of the archive ``data`` (checked as :func:`_members` does), read into memory (an export
    the server sent: as many members as it has conversations)."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for name, handle in _members(archive, allowed, len(data)):
                files[name] = handle.read()
    except tarfile.TarError as exc:
        raise ValidationError(f"the archive could not be read ({exc}); send an uncompressed tar") from None
    if MEMORY_STORE_FILE not in files:
        raise ValidationError(f"the archive holds no {MEMORY_STORE_FILE}")
    return files


def export_archive(built: BuiltExport) -> bytes:
    """``built`` as one tar: what it holds (:data:`ARCHIVE_COUNTS`) and its files, the memory store last."""
    return _pack([(ARCHIVE_COUNTS, orjson.dumps(built.counts())), *built.files.items()])


def read_export_archive(data: bytes) -> BuiltExport:
    """The export an archive of :func:`export_archive` holds."""
    files = _unpack(data, {ARCHIVE_COUNTS})
    counts: object = orjson.loads(files.pop(ARCHIVE_COUNTS, b"null"))
    if not isinstance(counts, dict):
        raise BrainError(f"the export archive lacks {ARCHIVE_COUNTS}; run the export again")
    files[MEMORY_STORE_FILE] = files.pop(MEMORY_STORE_FILE)  # written last: it names the others
    return BuiltExport(files=files, **counts)


def import_archive(path: Path) -> bytes:
    """:func:`write_import_archive` into memory (for a small export, or a test)."""
    buffer = io.BytesIO()
    write_import_archive(path, buffer)
    return buffer.getvalue()


def write_import_archive(path: Path, out: BinaryIO) -> None:
    """The files an import of ``path`` reads (a PAM export's folder, or its ``memory-store.json``) as one tar,
    written to ``out`` a file at a time from disk (an export of any size costs no more memory than a chunk): the
    memory store, ``embeddings.json`` beside it and the conversation files of ``conversations/``."""
    store_file = path / MEMORY_STORE_FILE if path.is_dir() else path
    folder = store_file.parent
    if not store_file.is_file():
        raise ValidationError(f"{store_file} is not a file; give a PAM export's folder or its {MEMORY_STORE_FILE}")
    members = [(MEMORY_STORE_FILE, store_file)]
    if (folder / EMBEDDINGS_FILE).is_file():
        members.append((EMBEDDINGS_FILE, folder / EMBEDDINGS_FILE))
    conversations = folder / CONVERSATIONS_DIR
    if conversations.is_dir():
        for file in sorted(conversations.glob("*.json")):
            name = f"{CONVERSATIONS_DIR}/{file.name}"
            if _FILE_NAME.fullmatch(name) and file.is_file():
                members.append((name, file))
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, file in members:
            info = tarfile.TarInfo(name)
            info.size = file.stat().st_size
            info.mtime = int(time.time())
            with file.open("rb") as data:
                archive.addfile(info, data)


def unpack_import(archive: bytes | Path, into: Path) -> Path:
    """Write the files of an :func:`import_archive` (its bytes, or the file holding them) into the folder
    ``into``, a member at a time (each checked before it is read, see :func:`_members`); the memory
    store's path. Nothing is written outside ``into``."""
    found = False
    try:
        with (
            tarfile.open(fileobj=io.BytesIO(archive), mode="r:")
            if isinstance(archive, bytes)
            else tarfile.open(archive, mode="r:")
        ) as tar:
            size = len(archive) if isinstance(archive, bytes) else archive.stat().st_size
            for name, handle in _members(tar, set(), size, MAX_MEMBERS):
                target = into / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    shutil.copyfileobj(handle, out, _CHUNK)
                found = found or name == MEMORY_STORE_FILE
    except tarfile.TarError as exc:
        raise ValidationError(f"the archive could not be read ({exc}); send an uncompressed tar") from None
    if not found:
        raise ValidationError(f"the archive holds no {MEMORY_STORE_FILE}")
    return into / MEMORY_STORE_FILE


__all__ = [
    "ARCHIVE_COUNTS",
    "MAX_FILE_NAME",
    "MAX_MEMBERS",
    "export_archive",
    "import_archive",
    "read_export_archive",
    "unpack_import",
]
