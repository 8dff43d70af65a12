"""The metadata model of each document type, and how a model becomes the flat dict Chroma stores."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from brain.model.schemas.limits import (
    _CHROMA_RESERVED_PREFIXES,
    CHANGES,
    FORMATION_ERROR_LENGTH,
    FORMATION_OUTCOMES,
    FORMATION_STATES,
    LEGACY_STATUS_KEY,
    MAX_KEY_LENGTH,
    MAX_LIST_ITEMS,
    MAX_METADATA_KEYS,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    RESERVED_HINTS,
    RESERVED_KEYS,
    STATUSES,
    Change,
    FormationState,
    Status,
    check_tags,
    key_error,
    storable_extra,
)
from brain.model.schemas.values import (
    GLOBAL_SCOPE,
    ConversationId,
    DocType,
    Source,
    SpeakerName,
    check_importance,
    check_last_used,
    check_scope,
    entity_of,
    format_timestamp,
    memory_scope,
    parse_timestamp,
    parse_turn_range,
)


def _one_of(field: str, value: object, choices: Sequence[str]) -> object:
    """``value`` when it is None or one of ``choices``."""
    if value is not None and value not in choices:
        raise ValueError(f"{field} must be one of {', '.join(choices)}, got {value!r}")
    return value


class BaseMetadata(BaseModel):
    """Fields every document has."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, use_enum_values=True)

    type: DocType = Field(description="document type")
    timestamp: datetime = Field(description="ISO 8601 time with a timezone, stored normalised to UTC (+00:00)")
    source: Source = Field(Source.SYSTEM, description="where the document came from: chat, kb, system or import")
    scope: str = Field(GLOBAL_SCOPE, description="'global' or 'entity:<name>'")

    @field_validator("timestamp", mode="before")
    @classmethod
    def _timestamp(cls, value: object) -> datetime:
        return parse_timestamp(value)

    @field_validator("scope", mode="before")
    @classmethod
    def _scope(cls, value: object) -> str:
        return check_scope(value)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: object) -> object:
        allowed = [s.value for s in Source]
        if isinstance(value, Source) or value in allowed:
            return value
        raise ValueError(f"source must be one of {', '.join(allowed)}, got {value!r}")

    @model_validator(mode="after")
    def _extras(self) -> BaseMetadata:
        extras = self.model_extra or {}
        if len(extras) > MAX_METADATA_KEYS:  # before looking at each one
            raise ValueError(
                f"metadata has {len(extras)} extra fields; at most {MAX_METADATA_KEYS} "
                f"(MAX_METADATA_KEYS) are stored per document"
            )
        for key, value in extras.items():
            if not isinstance(key, str) or not key:
                raise ValueError("metadata keys must be non-empty strings")
            if len(key) > MAX_KEY_LENGTH:
                raise key_error(
                    key[:MAX_KEY_LENGTH],
                    f"metadata key {key[:40]!r}... has {len(key)} characters; "
                    f"at most {MAX_KEY_LENGTH} (MAX_KEY_LENGTH)",
                )
            if key in RESERVED_KEYS:
                raise key_error(key, f"metadata field {key!r} is reserved: {RESERVED_HINTS[key]}")
            if key.startswith(_CHROMA_RESERVED_PREFIXES):
                raise key_error(
                    key, f"metadata field {key!r} cannot start with '$', '#' or 'chroma:' (Chroma reserves them)"
                )
            if key in type(self).model_fields:
                raise key_error(key, f"metadata field {key!r} was given twice (as {key!r} and by its stored name)")
            storable_extra(key, value)
        return self

    @property
    def ts_epoch(self) -> float:
        return self.timestamp.timestamp()

    def to_chroma(self) -> dict[str, object]:
        """The flat metadata dict stored in Chroma."""
        data = self.model_dump(by_alias=True, exclude_none=True, mode="python")
        data["timestamp"] = format_timestamp(self.timestamp)
        data["ts_epoch"] = self.ts_epoch
        out: dict[str, object] = {}
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


def _whole_number(field: str, minimum: int) -> object:
    """A validator of an optional integer field >= ``minimum`` (no booleans, strings or fractions)."""

    def check(value: object) -> object:
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (isinstance(value, float) and not value.is_integer())
        ):
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
        None, description="the section's place in the persona, from 0"
    )
    sections: Annotated[int | None, _whole_number("sections", 1)] = Field(
        None, description="how many sections this persona version has"
    )
    content_hash: str | None = Field(None, description="hash of the persona file this version was loaded from")

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("version must be a non-empty string")
        return value


class FAQMetadata(BaseMetadata):
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
        None, description="which piece of a long section or entry this is, from 1"
    )
    kb_parts: Annotated[int | None, _whole_number("kb_parts", 1)] = Field(
        None, description="how many pieces the section or entry was split into"
    )
    kb_docs: Annotated[int | None, _whole_number("kb_docs", 1)] = Field(
        None, description="how many documents the file was ingested as"
    )


class MemoryMetadata(BaseMetadata):
    type: Literal[DocType.MEMORY] = Field(description="document type")
    importance: int = Field(3, description="1 (trivia) .. 5 (essential)")
    tags: list[str] = Field(
        default_factory=list,
        description=f"free-form labels (at most {MAX_TAGS}, each at most {MAX_TAG_LENGTH} characters)",
    )
    entity: str | None = Field(
        None,
        description="who the memory is about: the name of its entity:<name> scope "
        "(given alone, it sets that scope); a global memory has none",
    )
    conversation_id: ConversationId | None = Field(None, description="conversation the memory came from (conv-...)")
    created_at: datetime | None = Field(
        None,
        description="when the memory was first written (ISO 8601 with a "
        "timezone, stored in UTC); the timestamp when absent",
    )
    last_used: float | None = Field(None, description="when the memory was last retrieved, epoch seconds >= 0")
    status: Status | None = Field(
        None,
        description="lifecycle status (PAM's): active (when absent), deprecated, superseded, retracted or "
        "archived; superseded, retracted and archived memories are kept but never ranked",
    )
    part_of: str | None = Field(
        None,
        max_length=MAX_KEY_LENGTH * 2,
        description="the id of what this row is a part of (the memory a continuation chunk belongs to, the index "
        "a vector row belongs to); parts are never ranked as memories",
    )
    merged_from: list[str] | None = Field(None, description="ids of the memories consolidation merged into this one")
    valid_from: datetime | None = Field(
        None,
        description="when what the memory says became true (ISO 8601 with a "
        "timezone, stored in UTC); its creation when absent",
    )
    valid_until: datetime | None = Field(
        None,
        description="when it stopped being true: set when another memory "
        "superseded it (ISO 8601, UTC); absent while it holds",
    )
    expires_at: datetime | None = Field(
        None,
        description="when the memory stops being ranked (ISO 8601, UTC), "
        "e.g. for 'the exam is tomorrow'; never when absent",
    )
    supersedes: str | None = Field(
        None,
        max_length=MAX_KEY_LENGTH * 2,
        description="the id of the memory this one replaced (see RagStore.supersede)",
    )
    superseded_by: str | None = Field(
        None,
        max_length=MAX_KEY_LENGTH * 2,
        description="the id of the memory that replaced this one (status superseded)",
    )
    change: Change | None = Field(
        None,
        description="how this memory replaced the one it supersedes: 'update' "
        "(the fact changed) or 'contradict' (the old one was wrong)",
    )
    source_turns: list[str] | None = Field(
        None,
        description="ids of the conversation turns the memory was formed from (memory formation), "
        f"the latest {MAX_LIST_ITEMS} at most",
    )

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, value: object) -> int:
        return check_importance(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: object) -> list[str]:
        return check_tags(value)

    @field_validator("created_at", "valid_from", "valid_until", "expires_at", mode="before")
    @classmethod
    def _iso_times(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(
                f"{info.field_name} must be an ISO 8601 time such as 2026-11-21T09:30:00+00:00, got {value!r}"
            )
        return parse_timestamp(value, str(info.field_name))  # always set in a field validator

    @field_validator("supersedes", "superseded_by", mode="before")
    @classmethod
    def _chain_ids(cls, value: object, info: ValidationInfo) -> object:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"{info.field_name} must be the id of a memory, got {value!r}")
        return value

    @field_validator("change", mode="before")
    @classmethod
    def _change(cls, value: object) -> object:
        return _one_of("change", value, CHANGES)

    @field_validator("last_used", mode="before")
    @classmethod
    def _last_used(cls, value: object) -> object:
        return None if value is None else check_last_used(value)

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: object) -> object:
        return _one_of("status", value, STATUSES)

    @field_validator("part_of", mode="before")
    @classmethod
    def _part_of(cls, value: object) -> object:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"part_of must be the id of what the row is a part of, got {value!r}")
        return value

    @field_validator("merged_from", "source_turns", mode="before")
    @classmethod
    def _id_lists(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        if (
            isinstance(value, str)
            or not isinstance(value, (list, tuple))
            or not all(isinstance(i, str) and i for i in value)
        ):
            raise ValueError(f"{info.field_name} must be a list of document ids, got {value!r}")
        return list(value)

    @model_validator(mode="before")
    @classmethod
    def _legacy_status(cls, data: object) -> object:
        """``pam_status``, the field's former name, given by a caller: its value is the status (it is the
        caller's newest word, so it replaces a status already stored)."""
        if isinstance(data, dict) and LEGACY_STATUS_KEY in data:
            data = dict(data)
            value = data.pop(LEGACY_STATUS_KEY)
            if value is not None and value not in STATUSES:
                raise key_error(
                    LEGACY_STATUS_KEY, f"{LEGACY_STATUS_KEY} must be one of {', '.join(STATUSES)}, got {value!r}"
                )
            data["status"] = value
        return data

    @model_validator(mode="before")
    @classmethod
    def _scope_from_entity(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("entity") is not None:
            if data.get("scope") is not None:
                try:
                    check_scope(data["scope"])
                except ValueError:
                    return data  # the scope field reports its own problem
            try:
                scope = memory_scope(data.get("scope"), data["entity"])
            except ValueError as exc:
                raise key_error("entity", str(exc) if str(exc).startswith("entity") else f"entity: {exc}") from None
            data = {**data, "scope": scope}
        return data

    @model_validator(mode="after")
    def _entity_from_scope(self) -> MemoryMetadata:
        self.entity = entity_of(self.scope)
        return self

    @model_validator(mode="after")
    def _validity_window(self) -> MemoryMetadata:
        if self.valid_from is not None and self.valid_until is not None and self.valid_until < self.valid_from:
            raise key_error(
                "valid_until",
                f"valid_until {format_timestamp(self.valid_until)} is before valid_from "
                f"{format_timestamp(self.valid_from)}; a memory holds from one to the other",
            )
        if self.superseded_by is not None and self.superseded_by == self.supersedes:
            raise key_error("superseded_by", "superseded_by and supersedes name the same memory")
        return self


class TurnMetadata(BaseMetadata):
    type: Literal[DocType.TURN] = Field(description="document type")
    conversation_id: ConversationId = Field(description="conversation id, conv-...")
    role: Literal["user", "assistant"] = Field(description="user or assistant")
    turn_index: int | None = Field(
        None, ge=1, strict=True, description="position in the conversation, from 1; assigned when absent"
    )
    speaker: SpeakerName | None = Field(
        None,
        description="who said it: a display name, 1 to 128 characters, no control "
        "characters, no space at either end; absent on turns written without one",
    )

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: object) -> object:
        if value not in ("user", "assistant"):
            raise ValueError(f"role must be 'user' or 'assistant', got {value!r}")
        return value


class SummaryMetadata(BaseMetadata):
    type: Literal[DocType.SUMMARY] = Field(description="document type")
    conversation_id: ConversationId = Field(description="conversation id, conv-...")
    turn_range: str | None = Field(None, description="'<start>-<end>' turn indexes covered, start <= end")
    summary_index: int | None = Field(
        None, ge=1, strict=True, description="position among the conversation's summaries, from 1; assigned when absent"
    )
    # memory formation of the summary's window (brain.features.chat.formation); absent: never scheduled
    formation: FormationState | None = Field(
        None, description="memory formation of the window: pending (to run), done or failed (attempts spent)"
    )
    formation_attempts: Annotated[int | None, _whole_number("formation_attempts", 0)] = Field(
        None, description="model attempts formation made for the window"
    )
    formation_error: str | None = Field(
        None, max_length=FORMATION_ERROR_LENGTH, description="the last failure of the window's formation"
    )
    formation_outcome: str | None = Field(
        None,
        description="how the window's last formation attempt ended: accepted, repaired, not_json, wrong_fields, "
        "too_long, foreign, unreachable, model_error or conflict",
    )
    formation_at: datetime | None = Field(None, description="when formation last ran for the window (ISO 8601, UTC)")
    formation_facts: Annotated[int | None, _whole_number("formation_facts", 0)] = Field(
        None, description="facts formation applied from the window"
    )
    formation_prompt_tokens: Annotated[int | None, _whole_number("formation_prompt_tokens", 0)] = Field(
        None, description="prompt tokens of the window's formation calls (Ollama's prompt_eval_count, summed)"
    )
    formation_eval_tokens: Annotated[int | None, _whole_number("formation_eval_tokens", 0)] = Field(
        None, description="answer tokens of the window's formation calls (Ollama's eval_count, summed)"
    )
    formation_seconds: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="seconds the window's formation calls took, summed"
    )

    @field_validator("turn_range", mode="before")
    @classmethod
    def _turn_range(cls, value: object) -> object:
        if value is not None:
            parse_turn_range(value)
        return value

    @field_validator("formation", mode="before")
    @classmethod
    def _formation(cls, value: object) -> object:
        return _one_of("formation", value, FORMATION_STATES)

    @field_validator("formation_outcome", mode="before")
    @classmethod
    def _formation_outcome(cls, value: object) -> object:
        return _one_of("formation_outcome", value, FORMATION_OUTCOMES)

    @field_validator("formation_at", mode="before")
    @classmethod
    def _formation_at(cls, value: object) -> object:
        return None if value is None else parse_timestamp(value, "formation_at")


MODELS: dict[str, type[BaseMetadata]] = {
    DocType.PERSONA.value: PersonaMetadata,
    DocType.FAQ.value: FAQMetadata,
    DocType.MEMORY.value: MemoryMetadata,
    DocType.TURN.value: TurnMetadata,
    DocType.SUMMARY.value: SummaryMetadata,
}
