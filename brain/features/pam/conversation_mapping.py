"""Conversations: a brain conversation (its turns and summaries) <-> a PAM conversation file, and its
``conversations_index`` entry. Both directions live here so that an export followed by an import gives
the same turns and summaries back; another producer's conversation maps onto a derived brain id.

The mapping table and the rules for foreign conversations are in docs/pam.md.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any, TypeVar

import orjson

from brain.features.pam.keys import BRAIN_KEY, CONVERSATION_KEY, EXTRA_KEY, load_extra
from brain.features.pam.problems import problem_at
from brain.features.pam.spec import PLATFORM, SCHEMA_VERSION, pam_time
from brain.model.errors import Problem, ValidationError
from brain.model.ids import derived_id
from brain.model.schemas import (
    GLOBAL_SCOPE,
    DocType,
    Source,
    check_conversation_id,
    metadata_value_problem,
    parse_timestamp,
    validate_metadata,
)

# uuid5 namespace of the conv-<uuid> ids given to conversations of other PAM producers
_CONVERSATION_NAMESPACE = uuid.UUID("9c2e4b7a-61d3-4f0e-8a5b-3d7f1e6c2a94")
_TURN_CORE = frozenset({"type", "timestamp", "ts_epoch", "source", "scope", "conversation_id", "role", "turn_index"})
_SUMMARY_CORE = frozenset(
    {"type", "timestamp", "ts_epoch", "source", "scope", "conversation_id", "turn_range", "summary_index"}
)
_TURN_PAM_KEYS = frozenset({EXTRA_KEY, CONVERSATION_KEY})
_MESSAGE_BRAIN_FIELDS = ("turn_index", "source", "scope", "extra")
_SUMMARY_BRAIN_FIELDS = ("id", "text", "summary_index", "turn_range", "created_at", "source", "scope", "extra")
# PAM message / conversation fields kept (in pam_extra / pam_conversation) when they differ from an export's
_MESSAGE_PRESERVED = (
    "provider_message_id",
    "model",
    "token_count",
    "attachments",
    "citations",
    "tool_calls",
    "raw_metadata",
)
_CONVERSATION_PRESERVED = (
    "id",
    "provider",
    "title",
    "temporal",
    "participants",
    "model",
    "system_instruction",
    "is_archived",
    "tags",
    "import_metadata",
    "raw_metadata",
)
#: the message roles brain keeps as turns
_ROLES = ("user", "assistant")


# ---- brain conversation -> PAM conversation ------------------------------------------------------
_M = TypeVar("_M", bound=Mapping[str, Any])


def _ordered_turns(turns: Iterable[tuple[str, str, _M]]) -> list[tuple[str, str, _M]]:
    return sorted(turns, key=lambda t: (int(t[2].get("turn_index") or 0), parse_timestamp(t[2]["timestamp"]), t[0]))


def _ordered_summaries(
    summaries: Iterable[tuple[str, str, Mapping[str, Any]]],
) -> list[tuple[str, str, Mapping[str, object]]]:
    return sorted(
        summaries, key=lambda s: (int(s[2].get("summary_index") or 0), parse_timestamp(s[2]["timestamp"]), s[0])
    )


def _message(doc_id: str, text: str, meta: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    """One turn as a PAM message (without its parent/children links)."""
    kept = load_extra(meta.get(EXTRA_KEY), doc_id, warnings, "turn")
    brain: dict[str, object] = {
        "turn_index": meta.get("turn_index"),
        "source": meta.get("source", Source.SYSTEM.value),
        "scope": meta.get("scope", GLOBAL_SCOPE),
    }
    others = {k: v for k, v in meta.items() if k not in _TURN_CORE and k not in _TURN_PAM_KEYS}
    if others:
        brain["extra"] = others
    message: dict[str, object] = {
        "id": doc_id,
        "role": meta["role"],
        "content": {"type": "text", "text": text},
        "created_at": pam_time(meta["timestamp"]),
    }
    for key in _MESSAGE_PRESERVED:
        if key in kept and key != "raw_metadata":
            message[key] = kept[key]
    given_raw = kept.get("raw_metadata")
    raw = given_raw if isinstance(given_raw, dict) else {}
    message["raw_metadata"] = {**raw, BRAIN_KEY: brain}
    return message


def _summary_entry(doc_id: str, text: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, object] = {"id": doc_id, "text": text, "summary_index": meta.get("summary_index")}
    if meta.get("turn_range") is not None:
        entry["turn_range"] = meta["turn_range"]
    entry.update(
        created_at=pam_time(meta["timestamp"]),
        source=meta.get("source", Source.SYSTEM.value),
        scope=meta.get("scope", GLOBAL_SCOPE),
    )
    others = {k: v for k, v in meta.items() if k not in _SUMMARY_CORE}
    if others:
        entry["extra"] = others
    return entry


def _conversation_temporal(kept: Any, first: datetime, last: datetime) -> dict[str, Any]:
    """The conversation's span; an imported ``temporal`` stays while no later turn extends it."""
    if isinstance(kept, dict) and kept.get("created_at"):
        try:
            kept_last = parse_timestamp(kept.get("updated_at") or kept["created_at"])
        except ValueError:
            kept = None
        else:
            if last <= kept_last:
                return dict(kept)
            return {"created_at": kept["created_at"], "updated_at": pam_time(last)}
    out = {"created_at": pam_time(first)}
    if last != first:
        out["updated_at"] = pam_time(last)
    return out


def conversation_to_pam(
    conversation_id: str,
    turns: Iterable[tuple[str, str, Mapping[str, object]]],
    summaries: Iterable[tuple[str, str, Mapping[str, object]]] = (),
    warnings: list[str] | None = None,
) -> dict[str, object]:
    """A brain conversation — its turns and summaries as ``(id, text, metadata)`` — as a PAM
    conversation document; see docs/pam.md for the mapping."""
    warnings = warnings if warnings is not None else []
    turns, summaries = _ordered_turns(turns), _ordered_summaries(summaries)
    if not turns and not summaries:
        raise ValueError(f"conversation {conversation_id} has neither turns nor summaries")
    kept = (
        load_extra(turns[0][2].get(CONVERSATION_KEY), turns[0][0], warnings, "turn", CONVERSATION_KEY) if turns else {}
    )
    times = [parse_timestamp(meta["timestamp"]) for _, _, meta in (*turns, *summaries)]
    messages = [_message(doc_id, text, meta, warnings) for doc_id, text, meta in turns]
    for before, after in pairwise(messages):  # a linear conversation, as a DAG too
        after["parent_id"] = before["id"]
        before["children_ids"] = [after["id"]]
    conversation: dict[str, object] = {
        "schema": "portable-ai-memory-conversation",
        "schema_version": SCHEMA_VERSION,
        "id": kept.get("id") or conversation_id,
        "provider": kept.get("provider") or {"name": PLATFORM, "conversation_id": conversation_id},
    }
    if "title" in kept:
        conversation["title"] = kept["title"]
    conversation["temporal"] = _conversation_temporal(kept.get("temporal"), min(times), max(times))
    roles = {m["role"] for m in messages}
    conversation["participants"] = kept.get("participants") or [{"role": r} for r in _ROLES if r in roles]
    conversation["messages"] = messages
    for key in ("model", "system_instruction", "is_archived", "tags", "import_metadata"):
        if key in kept:
            conversation[key] = kept[key]
    brain: dict[str, object] = {"conversation_id": conversation_id}
    if summaries:
        brain["summaries"] = [_summary_entry(*s) for s in summaries]
    given_raw = kept.get("raw_metadata")
    raw = given_raw if isinstance(given_raw, dict) else {}
    conversation["raw_metadata"] = {**raw, BRAIN_KEY: brain}
    return conversation


def conversation_file_name(conversation_id: str) -> str:
    """The file name of a conversation: its brain id when that is a safe file name, else a hash of it."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", conversation_id) and len(conversation_id) <= 200:
        return f"{conversation_id}.json"
    return f"conv-{hashlib.sha256(conversation_id.encode('utf-8')).hexdigest()[:32]}.json"


def index_entry(conversation: dict[str, Any], ref: str, derived: list[str]) -> dict[str, Any]:
    entry: dict[str, object] = {"id": conversation["id"], "platform": conversation["provider"]["name"]}
    if conversation.get("title") is not None:
        entry["title"] = conversation["title"]
    entry["message_count"] = len(conversation["messages"])
    entry["temporal"] = conversation["temporal"]
    if conversation.get("tags"):
        entry["tags"] = conversation["tags"]
    entry["derived_memories"] = derived
    entry["storage"] = {"type": "file", "ref": ref, "format": "json"}
    return entry


# ---- PAM conversation -> brain turns and summaries -----------------------------------------------
@dataclass
class ConversationItems:
    """A PAM conversation mapped to brain documents."""

    pam_id: str
    conversation_id: str  # brain's conv-... id
    turns: list[dict[str, object]]  # upsert_docs items
    summaries: list[dict[str, object]]
    skipped: dict[str, int]  # messages not imported, by reason


def foreign_conversation_id(pam_id: str) -> str:
    """The brain id of another producer's conversation: ``conv-<uuid5 of its PAM id>``, stable across imports."""
    return f"conv-{uuid.uuid5(_CONVERSATION_NAMESPACE, pam_id)}"


def _message_text(content: object) -> str:
    if not isinstance(content, dict):
        return ""
    if content.get("type") == "multipart":
        return "\n\n".join(p["text"] for p in content.get("parts") or [] if p.get("text"))
    return content.get("text") or ""


def _block(
    value: object, allowed: tuple[str, ...], where: str, file: str, problems: list[Problem]
) -> dict[str, object]:
    """A brain block (``raw_metadata.brain`` and the like), checked for its shape and field names."""
    if not isinstance(value, dict):
        problems.append(problem_at(file, where, "must be an object (brain's own fields)"))
        return {}
    for key in value:
        if key not in allowed:
            problems.append(
                problem_at(file, f"{where}.{key}", f"is not a field of brain's block (expected {', '.join(allowed)})")
            )
    return value


def _extra_fields(
    block: dict[str, object], reserved: frozenset[str], where: str, file: str, problems: list[Problem]
) -> dict[str, object]:
    extra = block.get("extra", {})
    if not isinstance(extra, dict):
        problems.append(problem_at(file, f"{where}.extra", "must be an object"))
        return {}
    for key, value in extra.items():
        problem = f"{key!r} cannot be an extra field" if key in reserved else metadata_value_problem(value)
        if problem:
            problems.append(
                problem_at(
                    file,
                    f"{where}.extra.{key}",
                    f"{problem}: extra fields are strings, numbers, booleans or non-empty lists of one of those",
                )
            )
    return extra


def _check_item(item: dict[str, object], where: str, file: str, problems: list[Problem]) -> None:
    meta = {k: v for k, v in item.items() if k not in ("id", "text")}
    try:
        validate_metadata(item["type"], meta)
    except ValidationError as exc:
        for p in exc.problems or [Problem("metadata", str(exc))]:
            problems.append(problem_at(file, where, f"{p.field or 'metadata'}: {p.message}"))


def _kept(given: dict[str, Any], plain: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The fields of ``given`` an export would not write as they are (absent ones and schema defaults
    left out: the export's own value stands for them)."""
    kept: dict[str, object] = {}
    for key in keys:
        if key not in given:
            continue
        value = given[key]
        wanted: object
        if key == "raw_metadata":
            value = {k: v for k, v in (value or {}).items() if k != BRAIN_KEY}
            wanted = {k: v for k, v in (plain.get(key) or {}).items() if k != BRAIN_KEY}
        else:
            wanted = plain.get(key)
        if value in (None, [], {}, False) and wanted is None:
            continue
        if value != wanted:
            kept[key] = value
    return kept


_NOT_TURN_EXTRA = _TURN_CORE | _TURN_PAM_KEYS | {"text", "id", "embedding"}
_NOT_SUMMARY_EXTRA = _SUMMARY_CORE | {"text", "id", "embedding"}


def pam_to_conversation(conv: dict[str, Any], file: str) -> tuple[ConversationItems | None, list[Problem]]:
    """A PAM conversation document as brain turns and summaries, and the problems found. A brain
    export (``raw_metadata.brain``) comes back with its ids, indexes and metadata; another producer's
    conversation gets a derived ``conv-<uuid>`` id, derived turn ids and turn_index by message order."""
    problems: list[Problem] = []
    raw = conv.get("raw_metadata") or {}
    brain = None
    if BRAIN_KEY in raw:
        brain = _block(raw[BRAIN_KEY], ("conversation_id", "summaries"), "raw_metadata.brain", file, problems)
    if brain:
        try:
            cid = check_conversation_id(brain.get("conversation_id"))
        except ValueError as exc:
            problems.append(problem_at(file, "raw_metadata.brain.conversation_id", str(exc)))
            return None, problems
    else:
        cid = foreign_conversation_id(conv["id"])
    skipped: dict[str, int] = {}
    turns: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    last = 0
    for j, msg in enumerate(conv["messages"]):
        where = f"messages[{j}]"
        text = _message_text(msg.get("content"))
        reason = None
        if msg["role"] not in _ROLES:
            reason = f"role {msg['role']}"
        elif msg.get("is_thought"):
            reason = "thought"
        elif not text.strip():
            reason = "no text"
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        own = (msg.get("raw_metadata") or {}).get(BRAIN_KEY) if brain else None
        if own is not None:
            block = _block(own, _MESSAGE_BRAIN_FIELDS, f"{where}.raw_metadata.brain", file, problems)
            doc_id, turn_index = msg["id"], block.get("turn_index")
            source, scope = block.get("source", Source.IMPORT.value), block.get("scope", GLOBAL_SCOPE)
            extra = _extra_fields(block, _NOT_TURN_EXTRA, f"{where}.raw_metadata.brain", file, problems)
        else:  # message ids are unique within their conversation only
            doc_id, turn_index = derived_id("pam-message", conv["id"], msg["id"]), last + 1
            source, scope, extra = Source.IMPORT.value, GLOBAL_SCOPE, {}
        if isinstance(turn_index, int) and not isinstance(turn_index, bool):
            last = max(last, turn_index)
        item = {
            "id": doc_id,
            "type": DocType.TURN.value,
            "text": text,
            "timestamp": msg["created_at"],
            "source": source,
            "scope": scope,
            "conversation_id": cid,
            "role": msg["role"],
            "turn_index": turn_index,
            **{k: v for k, v in extra.items() if k not in _NOT_TURN_EXTRA},
        }
        _check_item(item, f"{where}.raw_metadata.brain" if own is not None else where, file, problems)
        turns.append((j, item, msg))
    summaries = []
    entries = brain.get("summaries", []) if brain else []
    if not isinstance(entries, list):
        problems.append(problem_at(file, "raw_metadata.brain.summaries", "must be a list"))
        entries = []
    for k, entry in enumerate(entries):
        where = f"raw_metadata.brain.summaries[{k}]"
        block = _block(entry, _SUMMARY_BRAIN_FIELDS, where, file, problems)
        if not block:
            continue
        missing = [key for key in ("id", "text", "created_at") if not isinstance(block.get(key), str) or not block[key]]
        if missing:
            problems.append(problem_at(file, where, f"needs {', '.join(missing)} (non-empty strings)"))
            continue
        extra = _extra_fields(block, _NOT_SUMMARY_EXTRA, where, file, problems)
        item = {
            "id": block["id"],
            "type": DocType.SUMMARY.value,
            "text": block["text"],
            "timestamp": block["created_at"],
            "source": block.get("source", Source.IMPORT.value),
            "scope": block.get("scope", GLOBAL_SCOPE),
            "conversation_id": cid,
            "summary_index": block.get("summary_index"),
            "turn_range": block.get("turn_range"),
            **{k: v for k, v in extra.items() if k not in _NOT_SUMMARY_EXTRA},
        }
        _check_item(item, where, file, problems)
        summaries.append(item)
    if problems:
        return None, problems
    # PAM fields brain has no place for: kept as JSON, written back unchanged by an export
    for _, item, msg in turns:
        plain = _message(item["id"], item["text"], _meta_of(item), [])
        kept = _kept(msg, plain, _MESSAGE_PRESERVED)
        if kept:
            item[EXTRA_KEY] = orjson.dumps(kept).decode()
    items = [item for _, item, _ in turns]
    if items or summaries:
        try:
            plain_conv = conversation_to_pam(
                cid,
                [(t["id"], t["text"], _meta_of(t)) for t in items],
                [(s["id"], s["text"], _meta_of(s)) for s in summaries],
            )
        except ValueError as exc:  # e.g. a time that does not parse
            return None, [problem_at(file, "messages", str(exc))]
        kept = _kept(conv, plain_conv, _CONVERSATION_PRESERVED)
        if kept and items:
            first = _ordered_turns([(t["id"], t["text"], t) for t in items])[0][2]
            first[CONVERSATION_KEY] = orjson.dumps(kept).decode()
    return ConversationItems(conv["id"], cid, items, summaries, skipped), []


def _meta_of(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("id", "text")}
