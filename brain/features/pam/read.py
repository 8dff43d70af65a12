"""Reading a PAM export and validating it whole before anything is written: where its files are, JSON
that is well-formed, finite and no deeper than MAX_NESTING, the official schemas, unique ids, content
hashes, the integrity checksum, embeddings that belong to their memories, and conversation files
inside the export directory.

Everything here is about the files as such; what their objects mean to brain is the mappings' job.
The rules are listed in docs/pam.md ("Import rules").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from brain.features.pam.problems import json_path, problem_at, reject, schema_problems
from brain.features.pam.spec import (
    EMBEDDINGS_FILE,
    MAX_NESTING,
    MEMORY_STORE_FILE,
    SCHEMA_VERSION,
    content_hash,
    integrity_checksum,
)
from brain.model.errors import Problem, ValidationError


@dataclass
class PamFiles:
    """A validated PAM export: the memory store (and its embeddings, when there were any)."""

    memory_store_path: Path
    embeddings_path: Path | None
    document: dict[str, Any]
    #: memories as the portable-ai-memory package dumps them (nulls dropped, defaults filled)
    memories: list[dict[str, Any]]
    #: embedding objects by embedding id
    embeddings: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    #: the conversation files conversations_index names, validated against the conversation schema
    conversations: list[ConversationFile] = field(default_factory=list)
    #: whether the memory store has a conversations_index at all (an empty one counts)
    conversations_indexed: bool = False
    #: index entries without a file to read (no ``storage``, or storage other than ``file``)
    unfiled_conversations: int = 0


@dataclass
class ConversationFile:
    """One conversation file of an export, as read (schema-valid)."""

    path: Path
    name: str  # its storage ref, as problems name it, e.g. conversations/conv-1.json
    index: int  # its entry in conversations_index
    document: dict[str, Any]


def _read_json(path: Path, name: str | None = None, *, non_finite: bool = False) -> Any:
    """A PAM file, parsed and no deeper than :data:`MAX_NESTING`. With ``non_finite``, the numbers JSON
    cannot carry (``NaN``, ``Infinity``, ``1e999``) are read as such, so that the caller can name the
    object holding them (orjson would only give a line and column)."""
    name = name or path.name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:  # also invalid UTF-8, NaN and Infinity, and 1024 levels of nesting
        if "depth limit" in str(exc) or "recursion" in str(exc).lower():
            where = f"line {exc.lineno}, column {exc.colno}"
            raise ValidationError(
                f"{name}: {where}: nested more than {MAX_NESTING} levels deep (PAM documents need fewer than 10); "
                "nothing was written",
                [problem_at(name, where, f"nested more than {MAX_NESTING} levels deep")],
            ) from None
        document = _lenient_json(data) if non_finite else None
        if document is None:
            raise ValidationError(
                f"{name} is not valid JSON: {exc} (nothing was written)",
                [problem_at(name, "(document root)", str(exc))],
            ) from None
    if _nesting(data) > MAX_NESTING:
        where = json_path(_too_deep(document, MAX_NESTING)[:8]) + "..."
        raise ValidationError(
            f"{name}: {where}: nested more than {MAX_NESTING} levels deep (PAM documents need fewer than 10); "
            "nothing was written",
            [problem_at(name, where, f"nested more than {MAX_NESTING} levels deep")],
        )
    return document


def _lenient_json(data: bytes) -> object:
    """``data`` parsed by the standard library (which reads NaN and infinities), or None when that fails
    too or finds no such number (then orjson refused it for another reason, which stands)."""
    import json

    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return document if _non_finite(document, "") else None


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def _nesting(data: bytes) -> int:
    """How deeply the valid JSON text ``data`` nests: its brackets outside strings, counted in numpy
    (an embeddings file holds millions of numbers; walking the parsed document would be slow)."""
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    return int(np.cumsum(np.where((codes == ord("[")) | (codes == ord("{")), 1, -1), dtype=np.int64).max())


def _too_deep(document: object, limit: int) -> list[object]:
    """The JSON path of the first object or list nested deeper than ``limit`` (iteratively: the
    document may be deeper than Python's recursion limit)."""
    stack: list[tuple[Any, list[object]]] = [(document, [])]
    while stack:
        value, path = stack.pop()
        if len(path) >= limit:
            return path
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        stack.extend((child, [*path, key]) for key, child in items if isinstance(child, (dict, list)))
    return []


def _non_finite(document: Any, file: str) -> list[Problem]:
    """Problems for every NaN or infinite number in an embeddings document, naming its embedding."""
    problems: list[Problem] = []
    stack: list[tuple[Any, list[Any]]] = [(document, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float) and not np.isfinite(value):
            where, owner = json_path(path), ""
            if len(path) >= 2 and path[0] == "embeddings" and isinstance(path[1], int):
                emb = document["embeddings"][path[1]]
                if isinstance(emb, dict):
                    owner = f"embedding {emb.get('id')!r} of memory {emb.get('memory_id')!r} "
                if len(path) >= 3 and path[2] == "vector":
                    where = json_path(path[:3])  # one problem per vector, not per value
            message = f"{owner}has a value that is not a finite number ({value}); vectors hold finite numbers"
            if not any(p.field == where for p in problems):
                problems.append(problem_at(file, where, message, path[1] if owner else None))
            continue
        if isinstance(value, dict):
            stack.extend((child, [*path, key]) for key, child in value.items())
        elif isinstance(value, list):
            stack.extend((child, [*path, i]) for i, child in enumerate(value))
    return sorted(problems, key=lambda p: p.field)


def _locate(path: str | Path) -> tuple[Path, Path | None]:
    given = Path(path)
    if given.is_dir():
        store_path = given / MEMORY_STORE_FILE
        if not store_path.is_file():
            raise ValidationError(f"no {MEMORY_STORE_FILE} in {given}; give the export directory or the file itself")
    elif given.is_file():
        store_path = given
    else:
        raise ValidationError(f"{given} does not exist; give a PAM export directory or its {MEMORY_STORE_FILE}")
    emb_path = store_path.parent / EMBEDDINGS_FILE
    return store_path, emb_path if emb_path.is_file() else None


def read_pam(path: str | Path) -> PamFiles:
    """Read and validate a PAM export (directory or memory-store file, with an optional
    ``embeddings.json`` beside it). Raises :class:`ValidationError` naming every problem's JSON path."""
    store_path, emb_path = _locate(path)
    sfile = store_path.name
    document = _read_json(store_path)
    problems = schema_problems(document, "memory-store", sfile)
    reject(problems)
    warnings: list[str] = []
    version = document["schema_version"]
    if version.split("-")[0].split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        problems.append(problem_at(sfile, "schema_version", f"PAM {version} is not supported; brain reads PAM 1.x"))
    raw_memories: list[dict[str, Any]] = document["memories"]
    first_index: dict[str, int] = {}
    for i, mem in enumerate(raw_memories):
        if mem["id"] in first_index:
            first = first_index[mem["id"]]
            message = f"duplicate id {mem['id']!r} (also memories[{first}])"
            problems.append(problem_at(sfile, f"memories[{i}].id", message, i))
        else:
            first_index[mem["id"]] = i
        expected = content_hash(mem["content"])
        if mem["content_hash"] != expected:
            problems.append(
                problem_at(
                    sfile,
                    f"memories[{i}].content_hash",
                    f"is {mem['content_hash']} but the content hashes to {expected} (content edited after export?)",
                    i,
                )
            )
    reject(problems)
    memories = _package_dump(raw_memories, sfile)
    integrity = document.get("integrity")
    if integrity is not None:
        if integrity["total_memories"] != len(raw_memories):
            problems.append(
                problem_at(
                    sfile,
                    "integrity.total_memories",
                    f"says {integrity['total_memories']} but the file holds {len(raw_memories)} memories",
                )
            )
        elif not _checksum_matches(integrity["checksum"], raw_memories, memories):
            problems.append(
                problem_at(
                    sfile,
                    "integrity.checksum",
                    "does not match the memories (the file changed after export); remove the integrity block "
                    "to import it anyway",
                )
            )
    by_memory: dict[str, dict[str, Any]] = {}
    by_id: dict[str, dict[str, object]] = {}
    if emb_path is not None:
        efile = emb_path.name
        emb_doc = _read_json(emb_path, non_finite=True)
        reject(problems + _non_finite(emb_doc, efile))
        emb_problems = schema_problems(emb_doc, "embeddings", efile)
        reject(problems + emb_problems)
        if emb_doc["schema_version"] != version:
            problems.append(
                problem_at(efile, "schema_version", f"is {emb_doc['schema_version']!r} but {sfile} is {version!r}")
            )
        for j, emb in enumerate(emb_doc["embeddings"]):
            where = f"embeddings[{j}]"
            if emb["id"] in by_id:
                problems.append(problem_at(efile, f"{where}.id", f"duplicate embedding id {emb['id']!r}", j))
            by_id[emb["id"]] = emb
            if emb["memory_id"] in by_memory:
                problems.append(
                    problem_at(efile, f"{where}.memory_id", f"a second embedding for memory {emb['memory_id']!r}", j)
                )
            elif emb["memory_id"] not in first_index:
                problems.append(
                    problem_at(efile, f"{where}.memory_id", f"no memory {emb['memory_id']!r} in {sfile}", j)
                )
            by_memory.setdefault(emb["memory_id"], emb)
            vector = emb.get("vector")
            if vector is not None and len(vector) != emb["dimensions"]:
                problems.append(
                    problem_at(
                        efile,
                        f"{where}.vector",
                        f"embedding {emb['id']!r} of memory {emb['memory_id']!r} has {len(vector)} values but "
                        f"dimensions is {emb['dimensions']}",
                        j,
                    )
                )
    dangling = 0
    for i, mem in enumerate(raw_memories):
        ref = mem.get("embedding_ref")
        if ref is None:
            continue
        if emb_path is None:
            dangling += 1
        elif ref not in by_id:
            problems.append(
                problem_at(
                    sfile, f"memories[{i}].embedding_ref", f"names {ref!r}, which {EMBEDDINGS_FILE} does not hold", i
                )
            )
        elif by_id[ref]["memory_id"] != mem["id"]:
            problems.append(
                problem_at(
                    sfile,
                    f"memories[{i}].embedding_ref",
                    f"names {ref!r}, which is the embedding of memory {by_id[ref]['memory_id']!r}, "
                    f"not of {mem['id']!r}",
                    i,
                )
            )
    conversations, unfiled = _read_conversations(document, store_path.parent, sfile, problems)
    reject(problems)
    if unfiled:
        warnings.append(
            f"{unfiled} conversations_index entries name no conversation file (no storage, or storage other "
            "than a file); their conversations are not imported"
        )
    if dangling:
        warnings.append(
            f"{dangling} memories name embeddings but there is no {EMBEDDINGS_FILE}; "
            "their vectors are computed from content"
        )
    return PamFiles(
        store_path,
        emb_path,
        document,
        memories,
        by_id,
        warnings,
        conversations,
        "conversations_index" in document,
        unfiled,
    )


def _read_conversations(
    document: dict[str, Any], base: Path, sfile: str, problems: list[Problem]
) -> tuple[list[ConversationFile], int]:
    """Read and schema-check every conversation file the index names (paths relative to ``base``)."""
    out: list[ConversationFile] = []
    unfiled = 0
    version = document["schema_version"]
    seen: dict[str, int] = {}
    files: dict[Path, int] = {}
    root = base.resolve()
    for i, entry in enumerate(document.get("conversations_index") or []):
        where = f"conversations_index[{i}]"
        if entry["id"] in seen:
            problems.append(
                problem_at(
                    sfile,
                    f"{where}.id",
                    f"duplicate conversation id {entry['id']!r} (also conversations_index[{seen[entry['id']]}])",
                    i,
                )
            )
            continue
        seen[entry["id"]] = i
        storage = entry.get("storage")
        if not storage or storage["type"] != "file":
            unfiled += 1
            continue
        ref = storage["ref"]
        path = (base / ref).resolve()
        if not path.is_relative_to(root):
            problems.append(
                problem_at(
                    sfile,
                    f"{where}.storage.ref",
                    f"{ref!r} is outside the export directory; give a path relative to it",
                    i,
                )
            )
            continue
        if path in files:
            problems.append(
                problem_at(
                    sfile, f"{where}.storage.ref", f"{ref!r} is also the file of conversations_index[{files[path]}]", i
                )
            )
            continue
        files[path] = i
        if not path.is_file():
            problems.append(
                problem_at(
                    sfile,
                    f"{where}.storage.ref",
                    f"names the conversation file {ref}, which does not exist ({path}); copy it beside {sfile} "
                    "or remove the entry",
                    i,
                )
            )
            continue
        conv = _read_json(path, ref)
        found = schema_problems(conv, "conversation", ref)
        if found:
            problems.extend(found)
            continue
        if conv["schema_version"] != version:
            problems.append(
                problem_at(ref, "schema_version", f"is {conv['schema_version']!r} but {sfile} is {version!r}")
            )
        if conv["id"] != entry["id"]:
            problems.append(problem_at(ref, "id", f"is {conv['id']!r} but {sfile} {where} names {entry['id']!r}"))
        out.append(ConversationFile(path, ref, i, conv))
    return out, unfiled


def _checksum_matches(declared: str, raw: list[dict[str, object]], dumped: list[dict[str, object]]) -> bool:
    """The declared checksum is over the memories as written, or as the PAM package dumps them."""
    if integrity_checksum(raw) == declared:
        return True
    return dumped != raw and integrity_checksum(dumped) == declared


def _package_dump(raw_memories: list[dict[str, object]], file: str) -> list[dict[str, object]]:
    """The memories as the portable-ai-memory package models dump them (its checksum's form)."""
    import pydantic
    from portable_ai_memory.models import MemoryObject

    out, problems = [], []
    for i, mem in enumerate(raw_memories):
        try:
            out.append(MemoryObject.model_validate(mem).model_dump(mode="json", by_alias=True, exclude_none=True))
        except pydantic.ValidationError as exc:  # the schema passed; the package's models are stricter here
            for err in exc.errors():
                problems.append(problem_at(file, json_path(["memories", i, *err["loc"]]), err["msg"], i))
    reject(problems)
    return out
