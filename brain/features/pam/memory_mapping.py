"""Memories: a brain ``memory`` document <-> a PAM memory object, both directions in one place so that
an export followed by an import gives the same memory back.

The mapping table (which brain field becomes which PAM field, and the rules for foreign memories) is in
docs/pam.md; this module is its implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from brain.features.pam.keys import BRAIN_KEY, EXTRA_KEY, TYPE_KEY, load_extra
from brain.features.pam.problems import problem_at
from brain.features.pam.spec import (
    DEFAULT_TYPE,
    MEMORY_STORE_FILE,
    PAM_STATUSES,
    PAM_TYPES,
    PLATFORM,
    content_hash,
    pam_tags,
    pam_time,
)
from brain.model.errors import Problem, ValidationError
from brain.model.schemas import (
    GLOBAL_SCOPE,
    LEGACY_STATUS_KEY,
    STATUS_KEY,
    DocType,
    Source,
    metadata_value_problem,
    parse_timestamp,
    validate_metadata,
)

# memory metadata fields with a place of their own in the mapping (everything else is "extra")
_CORE_KEYS = frozenset(
    {"type", "timestamp", "ts_epoch", "source", "scope", "importance", "tags", "entity", "conversation_id"}
)
# the validity window and the successor are PAM's temporal fields of the same names
_TEMPORAL_KEYS = ("valid_from", "valid_until", "superseded_by")
# the memory's status is PAM's "status" (the legacy name too: it is read as the status)
_PAM_KEYS = frozenset({TYPE_KEY, STATUS_KEY, LEGACY_STATUS_KEY, EXTRA_KEY, *_TEMPORAL_KEYS})
# keys an extra metadata field may not have: they mean something else in an upsert_docs item
_NOT_EXTRA = _CORE_KEYS | _PAM_KEYS | {"text", "id", "embedding"}
_BRAIN_FIELDS = ("scope", "source", "importance", "tags", "entity", "conversation_id", "extra")
# PAM memory fields kept verbatim in pam_extra when they differ from what an export would write
_PRESERVED = ("summary", "confidence", "access", "temporal", "provenance", "metadata")


# ---- brain memory -> PAM memory object -----------------------------------------------------------
def _split_type(value: object) -> tuple[str, str | None]:
    if value is None or value == "":
        return DEFAULT_TYPE, None
    text = str(value)
    if text in PAM_TYPES:
        return text, None
    custom = text.removeprefix("custom:") or text
    return "custom", custom


def _join_type(pam_type: str, custom_type: str | None) -> str | None:
    """The pam_type metadata value for a PAM type (None for the default)."""
    if pam_type == "custom":
        # a bare name reads back as custom unless it could mean something else
        plain = (
            custom_type not in PAM_TYPES and custom_type != "custom" and not (custom_type or "").startswith("custom:")
        )
        return custom_type if plain else f"custom:{custom_type}"
    return None if pam_type == DEFAULT_TYPE else pam_type


def _conversation_ref(meta: Mapping[str, Any], refs: Mapping[str, str] | None) -> str | None:
    """The PAM conversation a memory refers to: its conversation_id as such when no conversations are
    exported (``refs`` None), else the PAM id of its conversation when that one is exported."""
    conversation = meta.get("conversation_id")
    if not conversation:
        return None
    return conversation if refs is None else refs.get(conversation)


def _provenance(meta: Mapping[str, Any], kept: Any, refs: Mapping[str, str] | None) -> dict[str, Any]:
    if not isinstance(kept, dict) or not kept:
        out = {"platform": PLATFORM}
        ref = _conversation_ref(meta, refs)
        if ref:
            out["conversation_ref"] = ref
        return out
    if refs is None:
        return kept
    # with conversations exported, conversation_ref names one of them or nothing (the spec's consistency rule)
    out = {k: v for k, v in kept.items() if k != "conversation_ref"}
    ref = _conversation_ref(meta, refs)
    if ref:
        out["conversation_ref"] = ref
    return out


def _temporal(ts: datetime, kept: object) -> dict[str, object]:
    """``temporal`` for a memory last written at ``ts``: the imported block while the memory is as imported."""
    if isinstance(kept, dict) and kept.get("created_at"):
        try:
            kept_created = parse_timestamp(kept["created_at"])
            kept_latest = parse_timestamp(kept.get("updated_at") or kept["created_at"])
        except ValueError:
            kept = None
        else:
            if kept_latest == ts:
                return dict(kept)
            out = {k: v for k, v in kept.items() if k in ("valid_from", "valid_until", "superseded_by")}
            if kept_created <= ts:
                out["created_at"] = kept["created_at"]
                out["updated_at"] = pam_time(ts)
            else:
                out["created_at"] = pam_time(ts)
            return out
    return {"created_at": pam_time(ts)}


def memory_to_pam(
    doc_id: str,
    text: str,
    meta: Mapping[str, Any],
    embedding_ref: str | None = None,
    warnings: list[str] | None = None,
    conversation_refs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One stored memory (its metadata as ``store.get`` returns it) as a PAM memory object, in the form
    the ``portable-ai-memory`` package dumps it (no nulls, defaults filled), so checksums agree.
    ``conversation_refs`` (brain conversation id -> PAM conversation id) are the exported conversations;
    None when conversations are not exported."""
    warnings = warnings if warnings is not None else []
    extra = load_extra(meta.get(EXTRA_KEY), doc_id, warnings)
    ts = parse_timestamp(meta["timestamp"])
    pam_type, custom_type = _split_type(meta.get(TYPE_KEY))
    status = meta.get(STATUS_KEY) or "active"
    if status not in PAM_STATUSES:
        warnings.append(f"memory {doc_id}: {STATUS_KEY}={status!r} is not a PAM status; exported as 'active'")
        status = "active"
    tags = list(meta.get("tags") or [])
    brain: dict[str, object] = {
        "scope": meta.get("scope", GLOBAL_SCOPE),
        "source": meta.get("source", Source.SYSTEM.value),
        "importance": meta.get("importance", 3),
    }
    if tags:
        brain["tags"] = tags
    for key in ("entity", "conversation_id"):
        if meta.get(key) is not None:
            brain[key] = meta[key]
    others = {k: v for k, v in meta.items() if k not in _CORE_KEYS and k not in _PAM_KEYS}
    if others:
        brain["extra"] = others
    memory: dict[str, Any] = {"id": doc_id, "type": pam_type}
    if custom_type is not None:
        memory["custom_type"] = custom_type
    memory.update(status=status, content=text, content_hash=content_hash(text), tags=pam_tags(tags))
    for key in ("summary", "confidence"):
        if key in extra:
            memory[key] = extra[key]
    memory["temporal"] = _temporal(ts, extra.get("temporal"))
    for key in _TEMPORAL_KEYS:  # the memory's own window and successor, over what an import kept
        value = meta.get(key)
        if value is not None:
            memory["temporal"][key] = value if key == "superseded_by" else pam_time(value)
    memory["provenance"] = _provenance(meta, extra.get("provenance"), conversation_refs)
    if "access" in extra:
        memory["access"] = extra["access"]
    if embedding_ref is not None:
        memory["embedding_ref"] = embedding_ref
    given = extra.get("metadata")
    kept_metadata = given if isinstance(given, dict) else {}
    memory["metadata"] = {**kept_metadata, BRAIN_KEY: brain}
    return memory


# ---- PAM memory object -> brain memory ----------------------------------------------------------
def _brain_block(mem: dict[str, Any], where: str, file: str, i: int, problems: list[Problem]) -> dict[str, Any]:
    brain = (mem.get("metadata") or {}).get(BRAIN_KEY)
    if brain is None:
        return {}
    if not isinstance(brain, dict):
        problems.append(problem_at(file, f"{where}.metadata.brain", "must be an object (brain's own fields)", i))
        return {}
    for key in brain:
        if key not in _BRAIN_FIELDS:
            problems.append(
                problem_at(
                    file,
                    f"{where}.metadata.brain.{key}",
                    f"is not a field of brain's block (expected {', '.join(_BRAIN_FIELDS)})",
                    i,
                )
            )
    extra = brain.get("extra", {})
    if not isinstance(extra, dict):
        problems.append(problem_at(file, f"{where}.metadata.brain.extra", "must be an object", i))
    else:
        for key, value in extra.items():
            problem = f"{key!r} cannot be an extra field" if key in _NOT_EXTRA else metadata_value_problem(value)
            if problem:
                problems.append(
                    problem_at(
                        file,
                        f"{where}.metadata.brain.extra.{key}",
                        f"{problem}: extra fields are strings, numbers, booleans or non-empty lists of one of those",
                        i,
                    )
                )
    return brain


def pam_to_memory(
    mem: dict[str, Any],
    i: int,
    file: str = MEMORY_STORE_FILE,
    conversations: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[Problem]]:
    """A PAM memory object (package-dump form) as an ``upsert_docs`` item, and the problems found.
    ``conversations`` maps the PAM ids of the conversations imported with it to their brain ids (None:
    the file has no conversations_index)."""
    where = f"memories[{i}]"
    problems: list[Problem] = []
    brain = _brain_block(mem, where, file, i, problems)
    tags = mem.get("tags", [])
    original = brain.get("tags")
    # the original tags, unless another tool changed the PAM tags since brain wrote them
    if isinstance(original, list) and all(isinstance(t, str) for t in original) and pam_tags(original) == tags:
        tags = original
    temporal = mem["temporal"]
    try:
        timestamp = parse_timestamp(temporal.get("updated_at") or temporal["created_at"])
    except ValueError as exc:
        problems.append(problem_at(file, f"{where}.temporal", str(exc), i))
        return {}, problems
    meta: dict[str, Any] = {
        "timestamp": timestamp,
        "scope": brain.get("scope", GLOBAL_SCOPE),
        "source": brain.get("source", Source.IMPORT.value),
        "importance": brain.get("importance", 3),
        "tags": tags,
    }
    for key in ("entity", "conversation_id"):
        if brain.get(key) is not None:
            meta[key] = brain[key]
    if meta["scope"] == GLOBAL_SCOPE:
        # older exports named who a global memory was about; the entity is now the scope, and the
        # memory stays global (visible to everyone) as it was
        meta.pop("entity", None)
    ref = (mem.get("provenance") or {}).get("conversation_ref")
    if "conversation_id" not in meta and conversations and isinstance(ref, str) and ref in conversations:
        meta["conversation_id"] = conversations[ref]  # a foreign memory, linked to its imported conversation
    if isinstance(brain.get("extra"), dict):
        meta.update((k, v) for k, v in brain["extra"].items() if k not in _NOT_EXTRA)
    if problems:
        return {}, problems
    pam_type = _join_type(mem["type"], mem.get("custom_type"))
    if pam_type is not None:
        meta[TYPE_KEY] = pam_type
    if mem.get("status", "active") != "active":
        meta[STATUS_KEY] = mem["status"]
    for key in _TEMPORAL_KEYS:
        if temporal.get(key) is not None:
            meta[key] = temporal[key]
    # what an export of the memory as mapped so far would write; keep what differs from it
    try:
        refs = None if conversations is None else {b: p for p, b in conversations.items()}
        plain = memory_to_pam(mem["id"], mem["content"], {**meta, "type": DocType.MEMORY.value}, conversation_refs=refs)
    except (TypeError, ValueError) as exc:
        problems.append(problem_at(file, f"{where}.metadata.brain", str(exc), i))
        return {}, problems
    kept = {}
    for key in _PRESERVED:
        value = mem.get(key)
        if key == "metadata":
            value = {k: v for k, v in (value or {}).items() if k != BRAIN_KEY} or None
        if value is not None and value != plain.get(key):
            kept[key] = value
    if kept:
        meta[EXTRA_KEY] = orjson.dumps(kept).decode()
    try:
        validate_metadata(DocType.MEMORY, meta)
    except ValidationError as exc:
        for p in exc.problems or [Problem("metadata", str(exc))]:
            problems.append(problem_at(file, _brain_path(where, p.field or "metadata"), p.message, i))
    return {"id": mem["id"], "type": DocType.MEMORY.value, "text": mem["content"], **meta}, problems


def _brain_path(where: str, field_name: str) -> str:
    """The JSON path in a PAM memory of a brain metadata field."""
    top = field_name.split(".")[0]
    if top == "timestamp":
        return f"{where}.temporal"
    if top in _TEMPORAL_KEYS:
        return f"{where}.temporal.{top}"
    if top == "tags":
        return f"{where}.tags"
    if top in _BRAIN_FIELDS:
        return f"{where}.metadata.brain.{field_name}"
    if top in (TYPE_KEY, STATUS_KEY, LEGACY_STATUS_KEY, EXTRA_KEY, "type"):
        return where
    if top == "metadata":  # a rule over several fields, e.g. entity against scope
        return f"{where}.metadata.brain"
    return f"{where}.metadata.brain.extra.{field_name}"
