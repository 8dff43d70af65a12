"""Exports and imports carried over HTTP: one uncompressed tar each way, files checked by name and kind.

``GET /v1/export`` sends :func:`export_archive` of an export built in memory, and the caller writes it where it
is (:func:`brain.features.pam.export.write_export`); ``POST /v1/import`` takes :func:`import_archive` of the
caller's files and imports them from a private folder (:func:`unpack_import`).
"""

from __future__ import annotations

import io
import re
import tarfile
import time
from pathlib import Path
from typing import Any

import orjson

from brain.features.pam.export import BuiltExport
from brain.features.pam.spec import CONVERSATIONS_DIR, EMBEDDINGS_FILE, MEMORY_STORE_FILE
from brain.model.errors import BrainError, ValidationError

#: the member of an export archive that carries what the export holds (BuiltExport.counts)
ARCHIVE_COUNTS = "brain-export.json"
#: the file names an archive may carry: the export's own, nothing that climbs out of its folder
_FILE_NAME = re.compile(
    rf"({re.escape(MEMORY_STORE_FILE)}|{re.escape(EMBEDDINGS_FILE)}|{CONVERSATIONS_DIR}/[A-Za-z0-9][A-Za-z0-9._-]*\.json)"
)


def _pack(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _unpack(data: bytes, allowed: set[str]) -> dict[str, bytes]:
    """Every member of the archive ``data``; a member that is not a regular file of an allowed name is refused."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                handle = archive.extractfile(member) if member.isfile() else None
                if handle is None or not (member.name in allowed or _FILE_NAME.fullmatch(member.name)):
                    raise ValidationError(f"the archive holds {member.name!r}, which is not a file of a PAM export")
                files[member.name] = handle.read()
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
    counts: Any = orjson.loads(files.pop(ARCHIVE_COUNTS, b"null"))
    if not isinstance(counts, dict):
        raise BrainError(f"the export archive lacks {ARCHIVE_COUNTS}; run the export again")
    files[MEMORY_STORE_FILE] = files.pop(MEMORY_STORE_FILE)  # written last: it names the others
    return BuiltExport(files=files, **counts)


def import_archive(path: Path) -> bytes:
    """The files an import of ``path`` reads (a PAM export's folder, or its ``memory-store.json``) as one tar:
    the memory store, ``embeddings.json`` beside it and the conversation files of ``conversations/``."""
    store_file = path / MEMORY_STORE_FILE if path.is_dir() else path
    folder = store_file.parent
    if not store_file.is_file():
        raise ValidationError(f"{store_file} is not a file; give a PAM export's folder or its {MEMORY_STORE_FILE}")
    members = [(MEMORY_STORE_FILE, store_file.read_bytes())]
    if (folder / EMBEDDINGS_FILE).is_file():
        members.append((EMBEDDINGS_FILE, (folder / EMBEDDINGS_FILE).read_bytes()))
    conversations = folder / CONVERSATIONS_DIR
    if conversations.is_dir():
        for file in sorted(conversations.glob("*.json")):
            name = f"{CONVERSATIONS_DIR}/{file.name}"
            if _FILE_NAME.fullmatch(name) and file.is_file():
                members.append((name, file.read_bytes()))
    return _pack(members)


def unpack_import(data: bytes, into: Path) -> Path:
    """Write the files of an :func:`import_archive` into the folder ``into``; the memory store's path."""
    for name, content in _unpack(data, set()).items():
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return into / MEMORY_STORE_FILE


__all__ = ["ARCHIVE_COUNTS", "export_archive", "import_archive", "read_export_archive", "unpack_import"]
