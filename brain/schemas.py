"""Document types and their metadata models.

Every document in the ``conversations`` collection carries a ``type`` and the metadata of that type,
validated here before anything is written. ``to_chroma`` turns a model into the flat dict Chroma
stores: ISO ``timestamp`` normalised to UTC plus a numeric ``ts_epoch`` (Chroma's range operators
take numbers only), underscore keys for the FAQ's specialist fields, no empty lists (Chroma
rejects them).

Every key the store itself reads back is either a typed field of a model (``importance``,
``created_at``, ``last_used``, ``pam_status``, the Xaibo part markers, ...) or reserved
(:data:`RESERVED_KEYS`: computed or set by the store, never given as metadata). Every stored value
is bounded (the ``MAX_*`` limits below), because Chroma fails on a document with a few thousand
metadata values and then refuses every later write to the collection.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any, Literal, Mapping

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from brain.errors import Problem, ValidationError, joined


class DocType(str, Enum):
    PERSONA = "persona"
    FAQ = "faq"
    MEMORY = "memory"
    TURN = "turn"
    SUMMARY = "summary"


class Source(str, Enum):
    CHAT = "chat"
    KB = "kb"
    SYSTEM = "system"
    IMPORT = "import"


DOC_TYPES: tuple[str, ...] = tuple(t.value for t in DocType)
GLOBAL_SCOPE = "global"
#: an entity name (the ``<name>`` of an ``entity:<name>`` scope): 1 to 128 characters, no control
#: characters, no space at either end; published as is in the API's schema
ENTITY_PATTERN = r"^\S(?:[^\x00-\x1f]{0,126}\S)?$"
ENTITY_MAX_LENGTH = 128
#: a conversation id, ``conv-<id>``
CONVERSATION_ID_PATTERN = r"^conv-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
CONVERSATION_ID_MAX_LENGTH = 133
_SCOPE_RE = re.compile(r"^entity:(?P<name>" + ENTITY_PATTERN[1:-1] + r")$")
_CONV_RE = re.compile(CONVERSATION_ID_PATTERN)
_RANGE_RE = re.compile(r"^(\d+)-(\d+)$")
#: keys the store computes or sets itself: never extra metadata, and never changed by
#: ``RagStore.update_memory`` (a document's id, text, vector, type, scope, origin and time are its own)
RESERVED_KEYS = frozenset({"type", "timestamp", "ts_epoch", "source", "scope", "id", "text", "embedding"})
#: what to do instead of setting a reserved key, for the error message
RESERVED_HINTS = {
    "type": "the document type is given once, as the document's type",
    "timestamp": "give the time as the timestamp argument",
    "ts_epoch": "it is computed from the timestamp",
    "source": "it records where the document came from and does not change",
    "scope": "a memory's scope never changes: store a new memory in the other scope and delete this one",
    "id": "the id is the document's own",
    "text": "give the new text as the text argument",
    "embedding": "the store embeds the text with its own model",
}
# key prefixes Chroma refuses or reserves for itself
_CHROMA_RESERVED_PREFIXES = ("$", "#", "chroma:")

# ---- limits ------------------------------------------------------------------------------------
# Chroma keeps one row per metadata key and per list item; one document with more than about 5,460
# of them fails Chroma's compaction, after which every write to the collection fails too (and every
# read after a restart). These limits keep every document far below that, with room for real data.
#: keys in one document's metadata (brain's own fields included)
MAX_METADATA_KEYS = 100
#: characters in a metadata key
MAX_KEY_LENGTH = 128
#: characters in a string value
MAX_STRING_LENGTH = 65_536
#: items in a list value
MAX_LIST_ITEMS = 256
#: characters in a string item of a list
MAX_LIST_ITEM_LENGTH = 1_024
#: a memory's tags, and the characters of one tag
MAX_TAGS = 100
MAX_TAG_LENGTH = 100
#: keys plus list items of one document (what Chroma stores as rows)
MAX_METADATA_ENTRIES = 2_048

# ---- keys the store interprets ------------------------------------------------------------------
#: a memory's lifecycle status, as PAM defines it; memories with an inactive one are kept (store,
#: mirror, exports) but never retrieved
STATUS_KEY = "pam_status"
PAM_STATUSES = ("active", "superseded", "deprecated", "retracted", "archived")
INACTIVE_STATUSES = frozenset({"superseded", "retracted", "archived"})
#: the markers of a Xaibo part (see brain.memory_index): a row of a vector index, or a continuation chunk
XAIBO_KIND_KEY = "xaibo.kind"
XAIBO_CHUNK_KEY = "xaibo.chunk"


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def parse_timestamp(value: Any, field: str = "timestamp") -> datetime:
    """ISO 8601 string, datetime or epoch seconds -> aware UTC datetime; naive times are refused."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be an ISO 8601 time with a timezone, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"{field} {value!r} is not a time that can be stored (epoch seconds out of range)") from None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z") or text.endswith("z"):
            text = text[:-1] + "+00:00"
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{field} must be an ISO 8601 time such as 2026-11-21T09:30:00+00:00, got {value!r}"
            ) from None
    if not isinstance(value, datetime):
        raise ValueError(f"{field} must be an ISO 8601 time with a timezone, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(
            f"{field} {value.isoformat()!r} has no timezone: add one, e.g. {value.isoformat()}+00:00"
        )
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+14:00 lies before year 1 in UTC
        raise ValueError(
            f"{field} {value.isoformat()!r} is out of range: in UTC it falls outside the years 1..9999"
        ) from None


def format_timestamp(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat()


def check_scope(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"scope must be 'global' or 'entity:<name>', got {value!r}")
    if value == GLOBAL_SCOPE or _SCOPE_RE.fullmatch(value):
        return value
    raise ValueError(f"scope must be 'global' or 'entity:<name>' (name without leading/trailing spaces), got {value!r}")


def entity_scope(entity: str) -> str:
    """The scope string of an entity, validated."""
    if not isinstance(entity, str):
        raise ValueError(f"an entity is a name (a string), got {entity!r}")
    if not entity.strip():
        raise ValueError("the entity is empty: give a name such as 'alice'")
    return check_scope(f"entity:{entity}")


def entity_of(scope: str) -> str | None:
    """The entity whose scope ``scope`` is, or None for the global scope."""
    return scope.removeprefix("entity:") if scope.startswith("entity:") else None


def memory_scope(scope: Any = None, entity: Any = None) -> str:
    """The scope of a memory given its ``scope`` and/or ``entity`` (raises ValueError).

    ``entity`` *is* a scope: a memory about Bob is stored in ``entity:bob``, and only there. Given
    both, they must agree; given neither, the memory is global. A global memory has no entity."""
    if entity is None:
        return GLOBAL_SCOPE if scope is None else check_scope(scope)
    own = entity_scope(entity)
    if scope is not None and check_scope(scope) != own:
        raise ValueError(
            f"entity {entity!r} and scope {scope!r} disagree: a memory about {entity!r} is stored in scope "
            f"{own!r}; give only the entity, or only the scope"
        )
    return own


def valid_entity_scope(entity: Any) -> str:
    """``entity``'s scope, or :class:`ValidationError` naming the field (for callers that take an
    entity as an argument)."""
    if not isinstance(entity, str):
        raise ValidationError(f"entity must be a string, got {entity!r}", [Problem("entity", "not a string")])
    try:
        return entity_scope(entity)
    except ValueError as exc:
        message = f"entity: {exc}"
        raise ValidationError.of("entity", message) from None


def check_last_used(value: Any) -> float:
    """``value`` as a last-use time (epoch seconds, finite, >= 0), else ValueError saying so."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"last_used must be epoch seconds (a number >= 0), got {value!r}")
    return float(value)


def check_conversation_id(value: Any) -> str:
    if not isinstance(value, str) or not _CONV_RE.fullmatch(value):
        raise ValueError(f"conversation_id must look like 'conv-<id>' (letters, digits, . _ : -), got {value!r}")
    return value


def valid_conversation_id(value: Any) -> str:
    """``value`` if it is a conversation id, else :class:`ValidationError` naming the field (for callers
    that take one as an argument rather than as metadata)."""
    try:
        return check_conversation_id(value)
    except ValueError as exc:
        raise ValidationError.of("conversation_id", str(exc)) from None


#: a conversation id, ``conv-<id>``, checked with a message that says what it must look like
ConversationId = Annotated[str, BeforeValidator(check_conversation_id)]


def parse_turn_range(value: Any) -> tuple[int, int]:
    """A summary's ``turn_range`` ``'<start>-<end>'`` as ``(start, end)``, ``1 <= start <= end``;
    ValueError saying what it must look like otherwise."""
    match = _RANGE_RE.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"turn_range must look like '<start>-<end>' e.g. '1-8', got {value!r}")
    start, end = int(match.group(1)), int(match.group(2))
    if start < 1 or start > end:
        raise ValueError(f"turn_range must have 1 <= start <= end, got {value!r}")
    return start, end


def format_turn_range(start: int, end: int) -> str:
    """The ``turn_range`` of turns ``start`` to ``end`` (the inverse of :func:`parse_turn_range`)."""
    return f"{start}-{end}"


_INT64 = (-(2**63), 2**63 - 1)


def metadata_value_problem(value: Any) -> str | None:
    """Why Chroma cannot store ``value`` as a metadata value (or brain's limits refuse it), or None
    when it can."""
    if value is None:
        return "null values cannot be stored"
    if isinstance(value, str):
        if len(value) > MAX_STRING_LENGTH:
            return f"a string of {len(value)} characters; at most {MAX_STRING_LENGTH} (MAX_STRING_LENGTH) are stored"
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if _INT64[0] <= value <= _INT64[1] else "integer out of the 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else "NaN and infinite numbers cannot be stored"
    if isinstance(value, (list, tuple)):
        if not value:
            return "empty lists cannot be stored"
        if len(value) > MAX_LIST_ITEMS:
            return f"a list of {len(value)} items; at most {MAX_LIST_ITEMS} (MAX_LIST_ITEMS) are stored"
        kinds = {type(v) for v in value}
        if len(kinds) > 1 or not kinds <= {str, int, float, bool}:
            return "lists must hold strings, numbers or booleans, all of one type"
        for n, item in enumerate(value):
            if isinstance(item, str) and len(item) > MAX_LIST_ITEM_LENGTH:
                return (f"item {n} is a string of {len(item)} characters; list items have at most "
                        f"{MAX_LIST_ITEM_LENGTH} (MAX_LIST_ITEM_LENGTH)")
        problems = [p for p in map(metadata_value_problem, value) if p]
        return problems[0] if problems else None
    if isinstance(value, dict):
        return "nested objects cannot be stored"
    return f"values of type {type(value).__name__} cannot be stored"


def _key_error(key: str, message: str) -> PydanticCustomError:
    """A model error about metadata key ``key`` (validate_metadata reports it under that field)."""
    return PydanticCustomError("metadata_key", message, {"key": key})


def _storable_extra(key: str, value: Any) -> None:
    problem = metadata_value_problem(value)
    if problem:
        shown = repr(value) if len(repr(value)) <= 80 else f"{repr(value)[:80]}..."
        raise _key_error(key,
            f"metadata field {key!r} must be a string, number, boolean or a non-empty list of one of those, "
            f"got {shown} ({problem})"
        )


def bounds_problems(stored: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key, message)`` for every limit the flat metadata dict ``stored`` breaks (see ``MAX_*``)."""
    problems: list[tuple[str, str]] = []
    for key, value in stored.items():
        if len(key) > MAX_KEY_LENGTH:
            problems.append((key, f"metadata key {key[:40]!r}... has {len(key)} characters; at most "
                                  f"{MAX_KEY_LENGTH} (MAX_KEY_LENGTH)"))
        problem = metadata_value_problem(value) if isinstance(value, (str, list, tuple)) else None
        if problem:
            problems.append((key, f"metadata field {key!r}: {problem}"))
    if len(stored) > MAX_METADATA_KEYS:
        problems.append(("metadata", f"metadata has {len(stored)} fields; at most {MAX_METADATA_KEYS} "
                                     f"(MAX_METADATA_KEYS) are stored per document"))
    entries = sum(len(v) if isinstance(v, (list, tuple)) else 1 for v in stored.values())
    if entries > MAX_METADATA_ENTRIES:
        problems.append(("metadata", f"metadata holds {entries} values (fields plus list items); at most "
                                     f"{MAX_METADATA_ENTRIES} (MAX_METADATA_ENTRIES) are stored per document"))
    return problems


class BaseMetadata(BaseModel):
    """Fields every document has."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, use_enum_values=True)

    type: DocType = Field(description="document type")
    timestamp: datetime = Field(description="ISO 8601 time with a timezone, stored normalised to UTC (+00:00)")
    source: Source = Field(Source.SYSTEM, description="where the document came from: chat, kb, system or import")
    scope: str = Field(GLOBAL_SCOPE, description="'global' or 'entity:<name>'")

    @field_validator("timestamp", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> datetime:
        return parse_timestamp(value)

    @field_validator("scope", mode="before")
    @classmethod
    def _scope(cls, value: Any) -> str:
        return check_scope(value)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: Any) -> Any:
        allowed = [s.value for s in Source]
        if isinstance(value, Source) or value in allowed:
            return value
        raise ValueError(f"source must be one of {', '.join(allowed)}, got {value!r}")

    @model_validator(mode="after")
    def _extras(self) -> "BaseMetadata":
        extras = self.model_extra or {}
        if len(extras) > MAX_METADATA_KEYS:  # before looking at each one
            raise ValueError(f"metadata has {len(extras)} extra fields; at most {MAX_METADATA_KEYS} "
                             f"(MAX_METADATA_KEYS) are stored per document")
        for key, value in extras.items():
            if not isinstance(key, str) or not key:
                raise ValueError("metadata keys must be non-empty strings")
            if len(key) > MAX_KEY_LENGTH:
                raise _key_error(key[:MAX_KEY_LENGTH], f"metadata key {key[:40]!r}... has {len(key)} characters; "
                                                        f"at most {MAX_KEY_LENGTH} (MAX_KEY_LENGTH)")
            if key in RESERVED_KEYS:
                raise _key_error(key, f"metadata field {key!r} is reserved: {RESERVED_HINTS[key]}")
            if key.startswith(_CHROMA_RESERVED_PREFIXES):
                raise _key_error(key, f"metadata field {key!r} cannot start with '$', '#' or 'chroma:' (Chroma reserves them)")
            if key in type(self).model_fields:
                raise _key_error(key, f"metadata field {key!r} was given twice (as {key!r} and by its stored name)")
            _storable_extra(key, value)
        return self

    @property
    def ts_epoch(self) -> float:
        return self.timestamp.timestamp()

    def to_chroma(self) -> dict[str, Any]:
        """The flat metadata dict stored in Chroma."""
        data = self.model_dump(by_alias=True, exclude_none=True, mode="python")
        data["timestamp"] = format_timestamp(self.timestamp)
        data["ts_epoch"] = self.ts_epoch
        out: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, Enum):
                value = value.value
            if isinstance(value, datetime):  # typed times other than the timestamp (created_at)
                value = format_timestamp(value)
            if isinstance(value, tuple):
                value = list(value)
            if isinstance(value, list):
                if not value:
                    continue  # Chroma refuses empty lists; absence reads back as []
                value = list(value)
            out[key] = value
        return out


def _whole_number(field: str, minimum: int) -> Any:
    """A validator of an optional integer field >= ``minimum`` (no booleans, strings or fractions)."""

    def check(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"{field} must be an integer >= {minimum}, got {value!r}")
        if value < minimum:
            raise ValueError(f"{field} must be an integer >= {minimum}, got {value!r}")
        return int(value)

    return BeforeValidator(check)


class PersonaMetadata(BaseMetadata):
    type: Literal[DocType.PERSONA] = Field(description="document type")
    version: str = Field(description="version of the persona this section belongs to")
    topic: str | None = Field(None, description="section topic, e.g. 'tone'")
    heading: str | None = Field(None, description="the section's Markdown heading")
    position: Annotated[int | None, _whole_number("position", 0)] = Field(
        None, description="the section's place in the persona, from 0")
    sections: Annotated[int | None, _whole_number("sections", 1)] = Field(
        None, description="how many sections this persona version has")
    content_hash: str | None = Field(None, description="hash of the persona file this version was loaded from")

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("version must be a non-empty string")
        return value


class FaqMetadata(BaseMetadata):
    type: Literal[DocType.FAQ] = Field(description="document type")
    topic: str | None = Field(None, description="topic of the entry")
    specialist_name: str | None = Field(
        None, alias="_specialist_name", description="the specialist (tool) this entry is about"
    )
    version: str = Field("auto", alias="_version", description="knowledge-base version")
    kb_file: str | None = Field(None, description="the knowledge-base file the entry was ingested from")
    kb_hash: str | None = Field(None, description="hash of that file when it was ingested")
    kb_text_hash: str | None = Field(None, description="hash of the entry's text")
    kb_part: Annotated[int | None, _whole_number("kb_part", 1)] = Field(
        None, description="which piece of a long section or entry this is, from 1")
    kb_parts: Annotated[int | None, _whole_number("kb_parts", 1)] = Field(
        None, description="how many pieces the section or entry was split into")
    kb_docs: Annotated[int | None, _whole_number("kb_docs", 1)] = Field(
        None, description="how many documents the file was ingested as")


class MemoryMetadata(BaseMetadata):
    type: Literal[DocType.MEMORY] = Field(description="document type")
    importance: int = Field(3, description="1 (trivia) .. 5 (essential)")
    tags: list[str] = Field(default_factory=list, description=f"free-form labels (at most {MAX_TAGS}, "
                                                                  f"each at most {MAX_TAG_LENGTH} characters)")
    entity: str | None = Field(None, description="who the memory is about: the name of its entity:<name> scope "
                                                 "(given alone, it sets that scope); a global memory has none")
    conversation_id: ConversationId | None = Field(None, description="conversation the memory came from (conv-...)")
    created_at: datetime | None = Field(None, description="when the memory was first written (ISO 8601 with a "
                                                          "timezone, stored in UTC); the timestamp when absent")
    last_used: float | None = Field(None, description="when the memory was last retrieved, epoch seconds >= 0")
    pam_status: Literal[PAM_STATUSES] | None = Field(  # type: ignore[valid-type]
        None, description="lifecycle status as PAM defines it; superseded, retracted and archived memories "
                          "are kept but never retrieved")
    merged_from: list[str] | None = Field(None, description="ids of the memories consolidation merged into this one")
    xaibo_kind: Literal["memory", "vector"] | None = Field(
        None, alias=XAIBO_KIND_KEY, description="Xaibo rows: 'memory' (a memory or its chunk) or 'vector' "
                                                "(a vector-index row, never ranked as a memory)")
    xaibo_chunk: Annotated[int | None, _whole_number(XAIBO_CHUNK_KEY, 0)] = Field(
        None, alias=XAIBO_CHUNK_KEY, description="Xaibo chunk number: 0 the memory itself, 1.. a continuation chunk")

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, value: Any) -> int:
        # strict: JSON numbers only (a whole float such as 4.0 is accepted, as JSON tools write it)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"importance must be an integer between 1 and 5, got {value!r}")
        if not 1 <= value <= 5:
            raise ValueError(f"importance must be between 1 and 5, got {value:g}")
        return int(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
            raise ValueError(f"tags must be a list of strings, got {value!r}")
        seen: dict[str, None] = {}
        for tag in value:
            if not isinstance(tag, str):
                raise ValueError(f"tags must be a list of strings, got {tag!r} ({type(tag).__name__}) in it")
            tag = tag.strip()
            if len(tag) > MAX_TAG_LENGTH:
                raise ValueError(f"tags: a tag of {len(tag)} characters ({tag[:30]!r}...); at most {MAX_TAG_LENGTH} "
                                 f"(MAX_TAG_LENGTH)")
            if tag:
                seen.setdefault(tag, None)
        if len(seen) > MAX_TAGS:
            raise ValueError(f"tags: {len(seen)} tags given; a memory has at most {MAX_TAGS} (MAX_TAGS)")
        return list(seen)

    @field_validator("created_at", mode="before")
    @classmethod
    def _created_at(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"created_at must be an ISO 8601 time such as 2026-11-21T09:30:00+00:00, got {value!r}")
        return parse_timestamp(value, "created_at")

    @field_validator("last_used", mode="before")
    @classmethod
    def _last_used(cls, value: Any) -> Any:
        return None if value is None else check_last_used(value)

    @field_validator("pam_status", mode="before")
    @classmethod
    def _pam_status(cls, value: Any) -> Any:
        if value is not None and value not in PAM_STATUSES:
            raise ValueError(f"pam_status must be one of {', '.join(PAM_STATUSES)}, got {value!r}")
        return value

    @field_validator("merged_from", mode="before")
    @classmethod
    def _merged_from(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
                isinstance(i, str) and i for i in value):
            raise ValueError(f"merged_from must be a list of document ids, got {value!r}")
        return list(value)

    @field_validator("xaibo_kind", mode="before")
    @classmethod
    def _xaibo_kind(cls, value: Any) -> Any:
        if value is not None and value not in ("memory", "vector"):
            raise ValueError(f"{XAIBO_KIND_KEY} must be 'memory' or 'vector', got {value!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _scope_from_entity(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("entity") is not None:
            if data.get("scope") is not None:
                try:
                    check_scope(data["scope"])
                except ValueError:
                    return data  # the scope field reports its own problem
            try:
                scope = memory_scope(data.get("scope"), data["entity"])
            except ValueError as exc:
                raise _key_error("entity", str(exc) if str(exc).startswith("entity") else f"entity: {exc}") from None
            data = {**data, "scope": scope}
        return data

    @model_validator(mode="after")
    def _entity_from_scope(self) -> "MemoryMetadata":
        self.entity = entity_of(self.scope)
        return self


class TurnMetadata(BaseMetadata):
    type: Literal[DocType.TURN] = Field(description="document type")
    conversation_id: ConversationId = Field(description="conversation id, conv-...")
    role: Literal["user", "assistant"] = Field(description="user or assistant")
    turn_index: int | None = Field(None, ge=1, strict=True, description="position in the conversation, from 1; assigned when absent")

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> Any:
        if value not in ("user", "assistant"):
            raise ValueError(f"role must be 'user' or 'assistant', got {value!r}")
        return value


class SummaryMetadata(BaseMetadata):
    type: Literal[DocType.SUMMARY] = Field(description="document type")
    conversation_id: ConversationId = Field(description="conversation id, conv-...")
    turn_range: str | None = Field(None, description="'<start>-<end>' turn indexes covered, start <= end")
    summary_index: int | None = Field(None, ge=1, strict=True, description="position among the conversation's summaries, from 1; assigned when absent")

    @field_validator("turn_range", mode="before")
    @classmethod
    def _turn_range(cls, value: Any) -> Any:
        if value is not None:
            parse_turn_range(value)
        return value


MODELS: dict[str, type[BaseMetadata]] = {
    DocType.PERSONA.value: PersonaMetadata,
    DocType.FAQ.value: FaqMetadata,
    DocType.MEMORY.value: MemoryMetadata,
    DocType.TURN.value: TurnMetadata,
    DocType.SUMMARY.value: SummaryMetadata,
}


def model_for(doc_type: Any) -> type[BaseMetadata]:
    key = doc_type.value if isinstance(doc_type, DocType) else doc_type
    try:
        return MODELS[key]
    except (KeyError, TypeError):
        raise ValidationError(
            f"unknown document type {doc_type!r}: expected one of {', '.join(DOC_TYPES)}",
            [Problem("type", "unknown document type")],
        ) from None


def _type_name(model: type[BaseMetadata]) -> str:
    return next(name for name, m in MODELS.items() if m is model)


def _problems(exc: pydantic.ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or (err.get("ctx") or {}).get("key") or "metadata"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = f"{field} is required"
        elif err["type"] in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            msg = f"{field}: {msg.lower()}, got {err.get('input')!r}"
        elif err["type"] == "extra_forbidden":
            msg = f"{field} is not a known field"
        elif not msg.startswith(field.split(".")[0]) and field not in msg:
            msg = f"{field}: {msg}"
        problems.append(Problem(field, msg))
    return problems


def validate_metadata(doc_type: Any, meta: dict[str, Any] | None = None) -> BaseMetadata:
    """Validate ``meta`` as metadata of ``doc_type``; raise :class:`ValidationError` naming the field."""
    model = model_for(doc_type)
    if not isinstance(meta, (dict, type(None))):
        raise ValidationError(
            f"metadata must be a mapping, got {type(meta).__name__}",
            [Problem("metadata", "not a mapping")],
        )
    data = dict(meta or {})
    expected = _type_name(model)
    given_type = data.pop("type", None)
    if given_type is not None and given_type not in (expected, DocType(expected)):
        raise ValidationError(
            f"type: metadata says {given_type!r} but the document type is {expected!r}",
            [Problem("type", "type mismatch")],
        )
    data["type"] = expected
    try:
        validated = model(**data)
    except pydantic.ValidationError as exc:
        problems = _problems(exc)
        raise ValidationError(joined(problems), problems) from None
    except TypeError as exc:  # e.g. non-string keyword names
        raise ValidationError(f"metadata: {exc}", [Problem("metadata", str(exc))]) from None
    too_big = bounds_problems(validated.to_chroma())
    if too_big:
        problems = [Problem(key, message) for key, message in too_big]
        raise ValidationError(joined(problems), problems)
    return validated


def check_extra_metadata(metadata: Any, arguments: tuple[str, ...] = (), *, call: str = "this call") -> dict[str, Any]:
    """``metadata`` as a dict of extra keys for ``call``, refusing the reserved keys (and the keys
    given as ``call``'s own ``arguments``) with :class:`ValidationError` naming each one."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be a mapping of keys to values, got {type(metadata).__name__}",
                              [Problem("metadata", "not a mapping")])
    problems = []
    for key in metadata:
        if key in RESERVED_KEYS:
            message = f"metadata.{key}: {key!r} cannot be set through metadata in {call}: {RESERVED_HINTS[key]}"
        elif key in arguments:
            message = f"metadata.{key}: give {key!r} as an argument of {call}, not in metadata"
        else:
            continue
        problems.append(Problem(f"metadata.{key}", message))
    if problems:
        raise ValidationError(joined(problems) + " (nothing was written)", problems)
    return dict(metadata)


def read_stored(doc_type: Any, meta: Mapping[str, Any] | None) -> tuple[BaseMetadata | None, dict[str, str]]:
    """Metadata as Chroma holds it, validated again for a rewrite: ``(model, problems)``.

    A row written by an older version or directly through Chroma may hold values today's rules refuse.
    Such values are dropped (``problems`` says which and why) instead of failing the rewrite, so the
    rewrite repairs the row; a global memory that names an entity (older versions stored those) is read
    as global. ``model`` is None when the row cannot be read even so (no usable time, a bad scope)."""
    data = {k: v for k, v in from_chroma(dict(meta or {})).items() if k != "ts_epoch"}
    problems: dict[str, str] = {}
    if data.get("type") == DocType.MEMORY.value and data.get("scope", GLOBAL_SCOPE) == GLOBAL_SCOPE \
            and data.get("entity") is not None:
        problems["entity"] = f"a global memory names entity {data.pop('entity')!r}; read as global"
    try:
        parse_timestamp(data.get("timestamp"))
    except ValueError:
        epoch = (meta or {}).get("ts_epoch")
        problems["timestamp"] = f"timestamp {data.get('timestamp')!r} is not a time; ts_epoch used"
        data["timestamp"] = epoch
    fixed = {"type", "timestamp", "scope", "metadata"}
    for _ in range(len(data) + 1):
        try:
            return validate_metadata(doc_type, data), problems
        except ValidationError as exc:
            fields = [p.field or "metadata" for p in exc.problems]
            bad = {f if f in data else f.split(".")[0] for f in fields}
            droppable = (bad - fixed) & set(data)
            if not droppable:
                problems["metadata"] = str(exc)
                return None, problems
            for key in droppable:
                problems[key] = f"{key} {data.pop(key)!r} is not valid any more; dropped"
    return None, problems  # pragma: no cover - every pass drops a key


def from_chroma(meta: dict[str, Any]) -> dict[str, Any]:
    """Stored metadata as callers see it: lists restored (``tags`` absent -> [])."""
    out = dict(meta or {})
    if out.get("type") == DocType.MEMORY.value:
        out.setdefault("tags", [])
    return out


def get_all_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every document type's metadata, keyed by type."""
    return {name: model.model_json_schema(by_alias=True) for name, model in MODELS.items()}


def schema_info(doc_type: Any) -> dict[str, Any]:
    """``{"document_type", "schema", "fields", "required_fields"}`` for one type."""
    model = model_for(doc_type)
    name = _type_name(model)
    schema = model.model_json_schema(by_alias=True)
    fields: dict[str, dict[str, Any]] = {}
    for key, prop in schema.get("properties", {}).items():
        fields[key] = {
            "type": prop.get("type") or [p.get("type") for p in prop.get("anyOf", []) if p.get("type")],
            "description": prop.get("description", ""),
            "required": key in schema.get("required", []),
            **({"default": prop["default"]} if "default" in prop else {}),
        }
    return {
        "document_type": name,
        "schema": schema,
        "fields": fields,
        "required_fields": list(schema.get("required", [])),
    }
