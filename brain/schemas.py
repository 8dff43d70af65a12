"""Document types and their metadata models.

Every document in the ``conversations`` collection carries a ``type`` and the metadata of that type,
validated here before anything is written. ``to_chroma`` turns a model into the flat dict Chroma
stores: ISO ``timestamp`` normalised to UTC plus a numeric ``ts_epoch`` (Chroma's range operators
take numbers only), underscore keys for the FAQ's specialist fields, no empty lists (Chroma
rejects them).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from brain.errors import ValidationError


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
_SCOPE_RE = re.compile(r"^entity:(?P<name>\S(?:[^\x00-\x1f]{0,126}\S)?)$")
_CONV_RE = re.compile(r"^conv-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_RANGE_RE = re.compile(r"^(\d+)-(\d+)$")
# keys that brain itself writes; extra metadata may not shadow them
RESERVED_KEYS = frozenset({"type", "timestamp", "ts_epoch", "source", "scope"})
# key prefixes Chroma refuses or reserves for itself
_CHROMA_RESERVED_PREFIXES = ("$", "#", "chroma:")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def parse_timestamp(value: Any, field: str = "timestamp") -> datetime:
    """ISO 8601 string, datetime or epoch seconds -> aware UTC datetime; naive times are refused."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be an ISO 8601 time with a timezone, got {value!r}")
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
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
    return value.astimezone(timezone.utc)


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
    return check_scope(f"entity:{entity}")


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
        raise ValidationError(str(exc), [{"item": None, "field": "conversation_id", "message": str(exc)}]) from None


#: a conversation id, ``conv-<id>``, checked with a message that says what it must look like
ConversationId = Annotated[str, BeforeValidator(check_conversation_id)]


_INT64 = (-(2**63), 2**63 - 1)


def metadata_value_problem(value: Any) -> str | None:
    """Why Chroma cannot store ``value`` as a metadata value, or None when it can."""
    if value is None:
        return "null values cannot be stored"
    if isinstance(value, (str, bool)):
        return None
    if isinstance(value, int):
        return None if _INT64[0] <= value <= _INT64[1] else "integer out of the 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else "NaN and infinite numbers cannot be stored"
    if isinstance(value, (list, tuple)):
        if not value:
            return "empty lists cannot be stored"
        kinds = {type(v) for v in value}
        if len(kinds) > 1 or not kinds <= {str, int, float, bool}:
            return "lists must hold strings, numbers or booleans, all of one type"
        problems = [p for p in map(metadata_value_problem, value) if p]
        return problems[0] if problems else None
    if isinstance(value, dict):
        return "nested objects cannot be stored"
    return f"values of type {type(value).__name__} cannot be stored"


def _storable_extra(key: str, value: Any) -> None:
    problem = metadata_value_problem(value)
    if problem:
        raise ValueError(
            f"metadata field {key!r} must be a string, number, boolean or a non-empty list of one of those, "
            f"got {value!r} ({problem})"
        )


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
        for key, value in (self.model_extra or {}).items():
            if not isinstance(key, str) or not key:
                raise ValueError("metadata keys must be non-empty strings")
            if key in RESERVED_KEYS:
                raise ValueError(f"metadata field {key!r} is reserved")
            if key.startswith(_CHROMA_RESERVED_PREFIXES):
                raise ValueError(f"metadata field {key!r} cannot start with '$', '#' or 'chroma:' (Chroma reserves them)")
            if key in type(self).model_fields:
                raise ValueError(f"metadata field {key!r} was given twice (as {key!r} and by its stored name)")
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
            if isinstance(value, tuple):
                value = list(value)
            if isinstance(value, list):
                if not value:
                    continue  # Chroma refuses empty lists; absence reads back as []
                value = list(value)
            out[key] = value
        return out


class PersonaMetadata(BaseMetadata):
    type: Literal[DocType.PERSONA] = Field(description="document type")
    version: str = Field(description="version of the persona this section belongs to")
    topic: str | None = Field(None, description="section topic, e.g. 'tone'")

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


class MemoryMetadata(BaseMetadata):
    type: Literal[DocType.MEMORY] = Field(description="document type")
    importance: int = Field(3, description="1 (trivia) .. 5 (essential)")
    tags: list[str] = Field(default_factory=list, description="free-form labels")
    entity: str | None = Field(None, description="who or what the memory is about; derived from an entity: scope")
    conversation_id: ConversationId | None = Field(None, description="conversation the memory came from (conv-...)")

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"importance must be an integer between 1 and 5, got {value!r}")
        if isinstance(value, str):
            if not value.strip().isdigit():
                raise ValueError(f"importance must be an integer between 1 and 5, got {value!r}")
            value = int(value.strip())
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"importance must be an integer between 1 and 5, got {value!r}")
            value = int(value)
        if not 1 <= value <= 5:
            raise ValueError(f"importance must be between 1 and 5, got {value}")
        return value

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
            if tag:
                seen.setdefault(tag, None)
        return list(seen)

    @model_validator(mode="after")
    def _entity_from_scope(self) -> "MemoryMetadata":
        scoped = self.scope.removeprefix("entity:") if self.scope != GLOBAL_SCOPE else None
        if self.entity is None:
            self.entity = scoped
        elif scoped is not None and self.entity != scoped:
            raise ValueError(f"entity {self.entity!r} does not match scope {self.scope!r}")
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
        if value is None:
            return None
        match = _RANGE_RE.fullmatch(value) if isinstance(value, str) else None
        if not match:
            raise ValueError(f"turn_range must look like '<start>-<end>' e.g. '1-8', got {value!r}")
        start, end = int(match.group(1)), int(match.group(2))
        if start < 1 or start > end:
            raise ValueError(f"turn_range must have 1 <= start <= end, got {value!r}")
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
            [{"item": None, "field": "type", "message": "unknown document type"}],
        ) from None


def _type_name(model: type[BaseMetadata]) -> str:
    return next(name for name, m in MODELS.items() if m is model)


def _problems(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "metadata"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = f"{field} is required"
        elif err["type"] in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            msg = f"{field}: {msg.lower()}, got {err.get('input')!r}"
        elif err["type"] == "extra_forbidden":
            msg = f"{field} is not a known field"
        elif not msg.startswith(field.split(".")[0]) and field not in msg:
            msg = f"{field}: {msg}"
        problems.append({"item": None, "field": field, "message": msg})
    return problems


def validate_metadata(doc_type: Any, meta: dict[str, Any] | None = None) -> BaseMetadata:
    """Validate ``meta`` as metadata of ``doc_type``; raise :class:`ValidationError` naming the field."""
    model = model_for(doc_type)
    if not isinstance(meta, (dict, type(None))):
        raise ValidationError(
            f"metadata must be a mapping, got {type(meta).__name__}",
            [{"item": None, "field": "metadata", "message": "not a mapping"}],
        )
    data = dict(meta or {})
    expected = _type_name(model)
    given_type = data.pop("type", None)
    if given_type is not None and given_type not in (expected, DocType(expected)):
        raise ValidationError(
            f"type: metadata says {given_type!r} but the document type is {expected!r}",
            [{"item": None, "field": "type", "message": "type mismatch"}],
        )
    data["type"] = expected
    try:
        return model(**data)
    except pydantic.ValidationError as exc:
        problems = _problems(exc)
        raise ValidationError("; ".join(p["message"] for p in problems), problems) from None
    except TypeError as exc:  # e.g. non-string keyword names
        raise ValidationError(f"metadata: {exc}", [{"item": None, "field": "metadata", "message": str(exc)}]) from None


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
