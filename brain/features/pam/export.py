"""Export: write a store's memories, their vectors and its conversations as a PAM 1.0 export.

The export directory is handled with care because it may hold a user's files: only a new, empty or
previous brain export directory is written into (unless forced), files are replaced atomically with
the memory store last, and only brain's own earlier files are ever removed. The mapping itself is in
the *_mapping modules; docs/pam.md describes it.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from brain.features.pam.conversation_mapping import conversation_file_name, conversation_to_pam, index_entry
from brain.features.pam.embedding_mapping import embeddings_document
from brain.features.pam.keys import BRAIN_KEY, CONVERSATION_KEY, EXTRA_KEY
from brain.features.pam.memory_mapping import memory_to_pam
from brain.features.pam.problems import schema_problems, summarize
from brain.features.pam.reports import ExportReport
from brain.features.pam.spec import (
    CONVERSATIONS_DIR,
    EMBEDDINGS_FILE,
    MEMORY_STORE_FILE,
    PLATFORM,
    SCHEMA_VERSION,
    SPEC_URI,
    embedding_id,
    integrity_checksum,
    pam_time,
)
from brain.model.errors import BrainError, Problem, ValidationError
from brain.model.schemas import GLOBAL_SCOPE, DocType, entity_scope, valid_name
from brain.rules.memories import is_part

if TYPE_CHECKING:
    from brain.store import Store

# uuid5 namespace of the owner ids derived from where the store lives (default_owner_id)
_OWNER_NAMESPACE = uuid.UUID("3b8f6d1c-2f4e-4c51-9d0a-7e5b2a9c4f10")


@dataclass
class BuiltExport:
    """An export held in memory: ``files`` by their path relative to the export directory, the memory store
    last (it names the others, so it is written after them), and what they hold. A served export travels
    as this (:func:`export_archive` / :func:`read_export_archive`) and is written where the caller is."""

    files: dict[str, bytes]
    memories: int
    embeddings_written: int
    checksum: str
    owner_id: str
    with_embeddings: bool
    with_conversations: bool
    not_exportable: int = 0
    parts_skipped: int = 0
    conversations: int = 0
    messages: int = 0
    summaries: int = 0
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, object]:
        return {key: value for key, value in asdict(self).items() if key != "files"}


def export_pam(
    store: Store,
    out_dir: str | Path,
    *,
    embeddings: bool = True,
    conversations: bool = True,
    owner_id: str | None = None,
    force: bool = False,
    entity: str | None = None,
) -> ExportReport:
    """Write every memory of ``store`` to ``out_dir/memory-store.json``, with ``embeddings`` their
    vectors to ``out_dir/embeddings.json`` and, with ``conversations``, every conversation (its turns
    and summaries) to ``out_dir/conversations/<file>.json``, listed in ``conversations_index``.

    ``out_dir`` must be new, empty or hold a previous brain export; any other directory is refused
    (nothing written) unless ``force``. A previous brain export is replaced file for file: its files
    this export no longer writes (``embeddings.json`` without embeddings, conversations no longer in
    the store) are deleted, and the report lists what was replaced and removed. Files brain did not
    write are never deleted (with ``force`` one of the same name as an export file is overwritten).
    Files are replaced atomically, the memory store last: a failed export leaves the previous files
    (or none) in place.

    ``entity``: an export for that entity only, under the scope rule: the global memories and its own,
    and the conversations that are its own (every turn in its scope), never another entity's."""
    started = time.perf_counter()
    out, previous = _check_out_dir(out_dir, force)  # refused before anything is read from the store
    built = build_export(store, embeddings=embeddings, conversations=conversations, owner_id=owner_id, entity=entity)
    return _write(built, out, previous, started)


def _check_out_dir(out_dir: str | Path, force: bool) -> tuple[Path, set[Path]]:
    """The export directory and the files of the brain export already in it (read once: they can be large);
    a file, or a directory holding other files, is refused unless ``force``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValidationError(f"{out} is a file; give the directory to export into")
    previous = _previous_export(out)
    if previous is None and not force:
        _refuse_foreign_directory(out)
    return out, previous or set()


def build_export(
    store: Store,
    *,
    embeddings: bool = True,
    conversations: bool = True,
    owner_id: str | None = None,
    entity: str | None = None,
) -> BuiltExport:
    """The files of an export of ``store`` (see :func:`export_pam`), validated against the PAM schemas, in
    memory: nothing is written."""
    if entity is not None:
        entity = valid_name(entity)
    if owner_id is not None and (not isinstance(owner_id, str) or not owner_id.strip()):
        raise ValidationError(f"owner_id must be a non-empty string, got {owner_id!r}")
    owner = owner_id or default_owner_id(store)
    model = store.embedder.name
    warnings: list[str] = []
    convs = _store_conversations(store, warnings, entity) if conversations else {}
    refs = {cid: conv["id"] for cid, conv in convs.items()} if conversations else None
    if refs is not None and len(set(refs.values())) < len(refs):
        seen: dict[str, str] = {}
        for cid, pam_id in refs.items():
            if pam_id in seen:
                raise BrainError(
                    f"conversations {seen[pam_id]} and {cid} both carry the PAM id {pam_id!r} "
                    f"(in the {CONVERSATION_KEY} metadata of their first turn); change or remove one"
                )
            seen[pam_id] = cid
    stored = store.get(type=DocType.MEMORY, include_embeddings=embeddings, entity=entity)
    docs = sorted((d for d in stored if not is_part(d.metadata)), key=lambda d: d.id)
    parts_skipped = len(stored) - len(docs)
    memories = [
        memory_to_pam(doc.id, doc.text, doc.metadata, embedding_id(doc.id) if embeddings else None, warnings, refs)
        for doc in docs
    ]
    # PAM's access.exportable=false (kept from an import) is honoured: such memories stay here
    keep = [not (isinstance(m.get("access"), dict) and m["access"].get("exportable") is False) for m in memories]
    not_exportable = keep.count(False)
    if not_exportable:
        docs = [d for d, k in zip(docs, keep) if k]
        memories = [m for m, k in zip(memories, keep) if k]
    checksum = integrity_checksum(memories)
    document: dict[str, object] = {
        "schema": "portable-ai-memory",
        "schema_version": SCHEMA_VERSION,
        "spec_uri": SPEC_URI,
        "export_id": str(uuid.uuid4()),
        "exported_by": f"brain/{_version()}",
        "export_date": pam_time(datetime.now(UTC)),
        "owner": {"id": owner},
        "memories": memories,
    }
    files: dict[str, bytes] = {}
    if conversations:
        # derived_memories from the very provenance written above: the two agree by construction
        derived: dict[str, list[str]] = {}
        for mem in memories:
            ref = mem["provenance"].get("conversation_ref")
            if ref is not None:
                derived.setdefault(ref, []).append(mem["id"])
        index = []
        for cid, conv in convs.items():
            name = conversation_file_name(cid)
            problems = schema_problems(conv, "conversation", f"{CONVERSATIONS_DIR}/{name}")
            if problems:  # never written; only hand-edited pam_extra / pam_conversation metadata does this
                raise BrainError(
                    f"conversation {cid} does not validate against the PAM conversation schema, so nothing was "
                    f"written: {summarize(problems)} (check the {EXTRA_KEY} / {CONVERSATION_KEY} metadata of its turns)"
                )
            files[f"{CONVERSATIONS_DIR}/{name}"] = orjson.dumps(conv, option=orjson.OPT_INDENT_2) + b"\n"
            index.append(index_entry(conv, f"{CONVERSATIONS_DIR}/{name}", derived.get(conv["id"], [])))
        document["conversations_index"] = index
    document["integrity"] = {"canonicalization": "RFC8785", "checksum": checksum, "total_memories": len(memories)}
    document["export_type"] = "full"
    problems = schema_problems(document, "memory-store", MEMORY_STORE_FILE)
    if problems:  # never written; the mapping is sound, so this is pam_extra metadata edited by hand
        raise BrainError(
            f"the export does not validate against the PAM schema, so nothing was written: {summarize(problems)} "
            f"(check the {EXTRA_KEY} metadata of that memory)"
        )
    conversation_files = len(files)
    if embeddings:
        files[EMBEDDINGS_FILE] = orjson.dumps(
            embeddings_document(docs, memories, model), option=orjson.OPT_SERIALIZE_NUMPY
        )
    files[MEMORY_STORE_FILE] = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    return BuiltExport(
        files=files,
        memories=len(memories),
        embeddings_written=len(docs) if embeddings else 0,
        checksum=checksum,
        owner_id=owner,
        with_embeddings=embeddings,
        with_conversations=conversations,
        not_exportable=not_exportable,
        parts_skipped=parts_skipped,
        conversations=conversation_files,
        messages=sum(len(c["messages"]) for c in convs.values()),
        summaries=sum(len(c["raw_metadata"][BRAIN_KEY].get("summaries", [])) for c in convs.values()),
        warnings=warnings,
    )


def write_export(built: BuiltExport, out_dir: str | Path, *, force: bool = False) -> ExportReport:
    """Write ``built`` into ``out_dir`` under the rules of :func:`export_pam`: a new, empty or previous brain
    export directory (else refused unless ``force``), each file replaced atomically, the memory store last,
    the previous export's files this one does not write removed."""
    started = time.perf_counter()
    out, previous = _check_out_dir(out_dir, force)
    return _write(built, out, previous, started)


def _write(built: BuiltExport, out: Path, previous: set[Path], started: float) -> ExportReport:
    warnings = list(built.warnings)
    conv_dir = out / CONVERSATIONS_DIR
    store_path = out / MEMORY_STORE_FILE
    emb_path = out / EMBEDDINGS_FILE
    for name in built.files:  # only the names brain writes: nothing travels outside the directory
        if not (
            name in (MEMORY_STORE_FILE, EMBEDDINGS_FILE)
            or re.fullmatch(rf"{CONVERSATIONS_DIR}/[A-Za-z0-9][A-Za-z0-9._-]*\.json", name)
        ):
            raise ValidationError(f"an export file may not be called {name!r}; nothing was written")
    try:
        out.mkdir(parents=True, exist_ok=True)
        if any(name.startswith(f"{CONVERSATIONS_DIR}/") for name in built.files):
            conv_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise BrainError(f"cannot create the export directory {out}: {exc}") from exc
    pending: list[tuple[Path, Path]] = []
    try:
        # conversations and embeddings first, the memory store last: it never names files not there yet
        for name, data in built.files.items():
            final = out / name
            pending.append((final, _write_temp(final.parent, final.name, data)))
    except BaseException:
        _discard(pending)
        raise
    replaced = sorted(_relative(final, out) for final, _ in pending if final.exists())
    for final, temp in pending:
        os.replace(temp, final)
    written = {final for final, _ in pending}
    removed = []
    for stale in sorted(previous - written):  # only brain's own files, never anything else
        try:
            stale.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            warnings.append(f"could not remove {stale}, a file of the previous export this one does not write: {exc}")
            continue
        removed.append(_relative(stale, out))
    if not built.with_embeddings and emb_path.exists():
        warnings.append(
            f"{emb_path} was not written by brain and is left as it is; it does not belong to this export "
            f"(an importer reads it beside {MEMORY_STORE_FILE}): move it away"
        )
    return ExportReport(
        out_dir=out,
        memory_store=store_path,
        embeddings=emb_path if built.with_embeddings else None,
        memories=built.memories,
        embeddings_written=built.embeddings_written,
        checksum=built.checksum,
        owner_id=built.owner_id,
        not_exportable=built.not_exportable,
        parts_skipped=built.parts_skipped,
        conversations=built.conversations,
        messages=built.messages,
        summaries=built.summaries,
        conversations_dir=conv_dir if built.with_conversations else None,
        replaced=replaced,
        removed=removed,
        warnings=warnings,
        seconds=time.perf_counter() - started,
    )


def default_owner_id(store: Store) -> str:
    """``BRAIN_OWNER_ID``, else a stable UUID derived from where the collection lives."""
    if store.settings.owner_id:
        return store.settings.owner_id
    where = store.settings.chroma_url or str(Path(store.settings.data_dir).resolve())
    return str(uuid.uuid5(_OWNER_NAMESPACE, f"{where}\x1f{store.settings.collection}"))


def _store_conversations(store: Store, warnings: list[str], entity: str | None = None) -> dict[str, dict[str, Any]]:
    """Every conversation of the store (of its turns and summaries) as a PAM document, by brain id; with
    ``entity``, those that are its own (:func:`brain.rules.memories.may_use_conversation`), with its documents only."""
    from brain.rules.memories import may_use_conversation

    Row = tuple[str, str, dict[str, Any]]  # id, text, metadata
    grouped: dict[str, tuple[list[Row], list[Row]]] = {}
    scopes: dict[str, tuple[set[str], set[str]]] = {}
    for doc_type, slot in ((DocType.TURN, 0), (DocType.SUMMARY, 1)):
        for doc in store.get(type=doc_type):
            cid = doc.metadata["conversation_id"]
            scopes.setdefault(cid, (set(), set()))[slot].add(str(doc.metadata.get("scope") or GLOBAL_SCOPE))
            if entity is None or doc.metadata.get("scope") == entity_scope(entity):
                grouped.setdefault(cid, ([], []))[slot].append((doc.id, doc.text, doc.metadata))
    if entity is not None:  # as brain.access.policy decides it: by its turns' scopes (its summaries' without turns)
        grouped = {
            cid: docs for cid, docs in grouped.items() if may_use_conversation(scopes[cid][0] or scopes[cid][1], entity)
        }
    return {cid: conversation_to_pam(cid, t, s, warnings) for cid, (t, s) in sorted(grouped.items())}


def _relative(path: Path, out: Path) -> str:
    return path.relative_to(out).as_posix()


def _read_object(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing or something else."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _previous_export(out: Path) -> set[Path] | None:
    """The files of a brain export already in ``out``: its memory store (``exported_by`` brain), the
    ``embeddings.json`` holding exactly brain's embeddings of its memories, and the conversation files its
    ``conversations_index`` names. None when ``out`` holds no brain export."""
    store_path = out / MEMORY_STORE_FILE
    document = _read_object(store_path) if store_path.is_file() else None
    if (
        document is None
        or document.get("schema") != "portable-ai-memory"
        or not str(document.get("exported_by", "")).startswith(f"{PLATFORM}/")
    ):
        return None
    files = {store_path}
    memory_ids = {m.get("id") for m in document.get("memories") or [] if isinstance(m, dict)}
    emb_path = out / EMBEDDINGS_FILE
    emb = _read_object(emb_path) if emb_path.is_file() else None
    entries = (
        emb.get("embeddings") if emb is not None and emb.get("schema") == "portable-ai-memory-embeddings" else None
    )
    if isinstance(entries, list) and all(
        isinstance(e, dict) and e.get("memory_id") in memory_ids and e.get("id") == embedding_id(e["memory_id"])
        for e in entries
    ):
        files.add(emb_path)
    for entry in document.get("conversations_index") or []:
        storage = entry.get("storage") if isinstance(entry, dict) else None
        ref = storage.get("ref") if isinstance(storage, dict) and storage.get("type") == "file" else None
        # brain writes refs as conversations/<plain file name>; anything else it did not write
        name = ref.removeprefix(f"{CONVERSATIONS_DIR}/") if isinstance(ref, str) else ""
        if name != ref and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*\.json", name):
            path = out / CONVERSATIONS_DIR / name
            if path.is_file():
                files.add(path)
    return files


def _refuse_foreign_directory(out: Path) -> None:
    """Refuse to export into a directory that holds files but no brain export (nothing is written)."""
    try:
        entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    except OSError as exc:
        raise BrainError(f"cannot read the export directory {out}: {exc}") from exc
    if entries:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise ValidationError(
            f"{out} is not empty ({shown}) and holds no brain export; nothing was written. Export into a new "
            f"or empty directory, or force it (`brain export --force`, force=True): brain then writes its files "
            f"there, overwriting any of the same name, and deletes nothing",
            [Problem("out_dir", f"not empty and not a brain export: {shown}")],
        )


def _write_temp(directory: Path, name: str, data: bytes) -> Path:
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise BrainError(f"cannot write {directory / name}: {exc}") from exc
    return Path(temp)


def _discard(pending: list[tuple[Path, Path]]) -> None:
    for _, temp in pending:
        temp.unlink(missing_ok=True)


@lru_cache(maxsize=1)
def _version() -> str:
    from brain.model.version import __version__

    return __version__
