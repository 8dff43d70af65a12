"""The files side: naming files (``kb_file``), collecting them under the given paths, matching older
names, decoding, hashing, and turning a file's drafts into chunked documents with derived ids."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.config import find_project_root
from brain.features.ingest.parsers import Draft
from brain.features.ingest.report import IngestReport
from brain.model.ids import derived_id
from brain.rules.chunking import TokenChunker

#: bumped when parsing changes what documents a file gives: every file is then re-read once
PARSER_VERSION = "kb-parser/1"


#: how ``kb_file`` names are formed (root name / path inside the root); documents without it are older
KB_NAMES = 2


SUPPORTED = {".md": "markdown", ".markdown": "markdown", ".jsonl": "jsonl", ".csv": "csv", ".txt": "text"}


@dataclass
class SourceFile:
    path: Path  # the resolved root joined with the path inside it
    kb_file: str  # its name in the store
    kind: str


@dataclass
class _GivenDirectory:
    name: str  # its root name
    paths: tuple[str, ...]  # its absolute spellings: resolved, and as given


def kb_root_name(directory: str | os.PathLike[str]) -> str:
    """The stable name of a knowledge-base root: its path relative to the project holding it
    (``.`` for the project itself), else the directory's own name (see the module docstring)."""
    resolved = Path(directory).resolve()
    project = find_project_root(resolved)
    if project is not None:
        return resolved.relative_to(project).as_posix()
    return resolved.name or resolved.as_posix()


def _joined(root_name: str, inside: str) -> str:
    return inside if root_name == "." else f"{root_name}/{inside}"


def kb_name(path: str | os.PathLike[str]) -> str:
    """How ``path`` is named in ``kb_file``: a directory by its root name, a file given by name by
    its folder's root name and its own name. The same from any working directory."""
    path = Path(path)
    if path.is_dir():
        return kb_root_name(path)
    return _joined(kb_root_name(path.parent), path.name)


def name_under(kb_file: str, directory: str) -> bool:
    if directory == ".":
        return not os.path.isabs(kb_file)
    return kb_file.startswith(directory.rstrip("/") + "/")


def legacy_name_under(old_name: str, directory: _GivenDirectory) -> bool:
    """Whether an older name (relative to the working directory of its run, or absolute) lies inside
    ``directory``, assuming that run was started at or above the directory."""
    if os.path.isabs(old_name):
        return any(old_name.startswith(path.rstrip("/") + "/") for path in directory.paths)
    for path in directory.paths:
        parts = path.strip("/").split("/")
        if any(old_name.startswith("/".join(parts[i:]) + "/") for i in range(len(parts))):
            return True
    return False


def collect_files(
    paths: Sequence[str | os.PathLike[str]], report: IngestReport
) -> tuple[list[SourceFile], list[_GivenDirectory]]:
    files: dict[str, SourceFile] = {}
    directories: list[_GivenDirectory] = []

    def add(path: Path, root: Path, root_name: str) -> None:
        kind = SUPPORTED.get(path.suffix.lower())
        name = _joined(root_name, path.relative_to(root).as_posix())
        if kind is None:
            report.skipped.append(
                {
                    "path": name,
                    "reason": f"unsupported file type {path.suffix or '(none)'!r}; expected {', '.join(SUPPORTED)}",
                }
            )
        elif name not in files:
            files[name] = SourceFile(path, name, kind)

    for given in paths:
        path = Path(given)
        if path.is_dir():
            root = path.resolve()
            name = kb_root_name(root)
            directories.append(
                _GivenDirectory(name, tuple(dict.fromkeys([root.as_posix(), Path(os.path.abspath(path)).as_posix()])))
            )
            for folder, dirs, names in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for file_name in sorted(names):
                    if not file_name.startswith("."):
                        add(Path(folder) / file_name, root, name)
        elif path.is_file():
            root = path.parent.resolve()  # the folder's links resolved, the file's own name kept
            add(root / path.name, root, kb_root_name(root))
        elif path.exists():
            report.skipped.append({"path": kb_name(path), "reason": "not a regular file or directory"})
        else:
            report.add_error(str(given), None, "no such file or directory")
            report.files_bad += 1
    return list(files.values()), directories


def older_names(
    files: list[SourceFile], stored: dict[str, dict[str, dict[str, object]]], report: IngestReport
) -> dict[str, list[tuple[str, bool]]]:
    """``{kb_file: [(older name, exact), ...]}``: stored names written by an earlier version (no
    ``kb_names``) that belong to a file of this run. ``exact``: an absolute name resolving to the
    file; otherwise a relative name the file's path ends with (claimed only if the texts agree)."""
    current = {f.kb_file for f in files}
    older = [
        name for name, docs in stored.items() if name not in current and not any("kb_names" in m for m in docs.values())
    ]
    if not older:
        return {}
    exact: dict[str, str] = {}
    by_suffix: dict[str, set[str]] = {}
    for f in files:
        for spelling in {f.path.as_posix(), Path(os.path.realpath(f.path)).as_posix()}:
            exact.setdefault(spelling, f.kb_file)
            parts = spelling.split("/")
            for i in range(1, len(parts)):
                by_suffix.setdefault("/".join(parts[i:]), set()).add(f.kb_file)
    found: dict[str, list[tuple[str, bool]]] = {}
    for name in older:
        if os.path.isabs(name):
            owner = exact.get(name) or exact.get(Path(os.path.realpath(name)).as_posix())
            if owner is not None:
                found.setdefault(owner, []).append((name, True))
            continue
        owners = by_suffix.get(os.path.normpath(name).replace(os.sep, "/"), set())
        if len(owners) == 1:
            found.setdefault(next(iter(owners)), []).append((name, False))
        elif owners:
            report.warnings.append(
                {
                    "path": name,
                    "line": None,
                    "message": (
                        f"ingested under an older name that fits {len(owners)} files "
                        f"({', '.join(sorted(owners)[:3])}); left as is (--prune on its folder removes it)"
                    ),
                }
            )
    return found


def decode_text(raw: bytes) -> str:
    """UTF-8 (a leading BOM is dropped) with universal newlines; raises UnicodeDecodeError."""
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


#: control characters no text file holds: C0 but tab, line and form feeds and carriage return, DEL, C1
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
#: above this share of control characters, a file is binary whatever its name says
_BINARY_SHARE = 0.1


def binary_problem(text: str) -> tuple[int, str] | None:
    """Why ``text`` (a decoded file) is not text: a NUL character, which no text file holds (a binary
    file, or text saved as UTF-16), or mostly or only control characters. None for text. Such a file
    embeds as noise that sits near every query, so it is refused, not ingested."""
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        return line, (
            f"holds {text.count(chr(0)):,} NUL characters, the first on this line: a binary file, or text saved "
            f"as UTF-16; save it as UTF-8 text, or move it out of the knowledge base"
        )
    controls = _CONTROL.findall(text)
    blank = not _CONTROL.sub("", text).strip()
    if not controls or (not blank and len(controls) <= _BINARY_SHARE * len(text)):
        return None  # text, perhaps with a stray control character
    first = _CONTROL.search(text)
    line = text.count("\n", 0, first.start() if first else 0) + 1
    left = ", and nothing but them and white space" if blank else ""
    return line, (
        f"{len(controls):,} of its {len(text):,} characters are control characters{left}: a binary file; "
        f"move it out of the knowledge base"
    )


def utf8_problem(raw: bytes, exc: UnicodeDecodeError) -> tuple[int, str]:
    line = raw.count(b"\n", 0, exc.start) + 1
    column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
    return line, (f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {column}); save the file as UTF-8")


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def hash_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def file_hash(raw: bytes, chunker: TokenChunker) -> str:
    h = hashlib.sha256(f"{PARSER_VERSION}\x1f{chunker.signature}\x1f".encode())
    h.update(raw)
    return h.hexdigest()[:32]


def file_documents(kb_file: str, kb_hash: str, drafts: list[Draft], chunker: TokenChunker) -> list[dict[str, Any]]:
    """The file's documents with ids and full metadata (see the module docstring)."""
    pieces: list[tuple[str, dict[str, object]]] = []
    for draft in drafts:
        parts = chunker.chunk(draft.text)
        for i, part in enumerate(parts):
            pieces.append((part, {**draft.meta, "kb_part": i + 1, "kb_parts": len(parts)}))
    seen: dict[str, int] = {}
    docs = []
    for text, meta in pieces:
        digest = _digest(text, meta)
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        docs.append(
            {
                "id": derived_id("kb", kb_file, str(n), digest),
                "text": text,
                "type": "faq",
                "source": "kb",
                **meta,
                "kb_file": kb_file,
                "kb_names": KB_NAMES,
                "kb_hash": kb_hash,
                "kb_docs": len(pieces),
                "kb_text_hash": hash_text(text),
            }
        )
    return docs
