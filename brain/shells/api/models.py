"""The API's request and response bodies, and the field types they share: each field is checked by the
library's own rule and documented with the constraint it enforces, so the OpenAPI schema says what the
server refuses."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, WithJsonSchema

from brain.model.errors import Problem
from brain.model.ids import IDEMPOTENCY_KEY_MAX, check_idempotency_key
from brain.model.schemas import (
    CONVERSATION_ID_MAX_LENGTH,
    CONVERSATION_ID_PATTERN,
    DOC_TYPES,
    ENTITY_MAX_LENGTH,
    PUBLISHED_ENTITY_PATTERN,
    SPEAKER_NAME_MAX_LENGTH,
    Status,
    check_conversation_id,
    check_scope,
    check_speaker_name,
    valid_name,
)
from brain.shells.web.error_responses import DOC_BATCH, ONE_DOC  # union tags (see _field_of there)

#: the largest ``offset`` a listing takes (Chroma counts in 32 bits)
MAX_OFFSET = 2**31 - 1

# ---- field types: each checked by the library's rule, documented with the constraint it enforces ----


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("is empty or only spaces" if value else "is empty")
    return value


def _entity(value: str) -> str:
    return valid_name(value)  # wrapped: pydantic would pass its ValidationInfo as the field name


Text = Annotated[str, AfterValidator(_non_blank), WithJsonSchema({"type": "string", "minLength": 1, "pattern": r"\S"})]
Entity = Annotated[
    str,
    AfterValidator(_entity),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": ENTITY_MAX_LENGTH,
            "pattern": PUBLISHED_ENTITY_PATTERN,
            "description": "an entity name: 1 to 128 characters, no control or formatting characters "
            "(Unicode Cc, Cf, Zl, Zp), no space at either end",
        }
    ),
]
ConversationId = Annotated[
    str,
    AfterValidator(check_conversation_id),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": CONVERSATION_ID_PATTERN,
            "maxLength": CONVERSATION_ID_MAX_LENGTH,
            "description": "conv-<id>",
        }
    ),
]
Scope = Annotated[
    str,
    AfterValidator(check_scope),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^(global|entity:" + PUBLISHED_ENTITY_PATTERN[1:-1] + ")$",
            "description": "'global' or 'entity:<name>'",
        }
    ),
]
SpeakerName = Annotated[
    str,
    AfterValidator(lambda value: check_speaker_name(value, "the name")),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": SPEAKER_NAME_MAX_LENGTH,
            "pattern": PUBLISHED_ENTITY_PATTERN,
            "description": "a display name: 1 to 128 characters, no control characters, no space at either end",
        }
    ),
]
IdempotencyKey = Annotated[
    str,
    AfterValidator(check_idempotency_key),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": IDEMPOTENCY_KEY_MAX,
            "pattern": r"^[ -~]*[!-~][ -~]*$",
            "description": "1 to 255 printable ASCII characters, e.g. a UUID the client made for this exchange",
        }
    ),
]
DocTypeName = Literal[DOC_TYPES]  # type: ignore[valid-type]
Importance = Annotated[int, Field(ge=1, le=5, description="1 (trivia) .. 5 (essential)")]
#: an ISO 8601 time with a timezone (checked by the library, which names the field when it is not one)
Time = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
Metadata = dict[str, object]


# ---- request bodies ------------------------------------------------------------------------------


class _Body(BaseModel):
    # strict: "importance": true or "5" is refused, not read as 1 or 5
    model_config = ConfigDict(extra="forbid", strict=True)

    def arguments(self) -> dict[str, Any]:
        """The body as the keyword arguments of the operation it calls: its fields are named as that
        operation's parameters (``tests/http/test_api_bodies.py`` holds each body to its operation)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


class ContextRequest(_Body):
    user_message: Text = Field(description="the user's new message")
    conversation_id: ConversationId | None = Field(None, description="the caller's conversation; none: a new one")
    entity: Entity | None = Field(None, description="whose memories may be used (and global ones); a bound token's own")


class ExchangeRequest(_Body):
    user_text: Text
    assistant_text: Text
    conversation_id: ConversationId | None = Field(None, description="generated when absent")
    entity: Entity | None = Field(None, description="whose conversation it is; a bound token's own")
    timestamp: str | None = Field(None, description="ISO 8601 time of the exchange; now when absent")
    metadata: Metadata | None = None
    user_name: SpeakerName | None = Field(None, description="who wrote the user turn; the entity's name when absent")
    assistant_name: SpeakerName | None = Field(
        None, description="who wrote the assistant turn; the persona's name (persona.md) when absent"
    )
    idempotency_key: IdempotencyKey | None = Field(
        None,
        description="makes a retry safe: the same exchange sent again with this key returns the first "
        "answer and writes nothing (also the Idempotency-Key header)",
    )


class MemoryCreate(_Body):
    text: Text
    importance: Importance = 3
    tags: list[str] | None = None
    entity: Entity | None = Field(None, description="whose memory it is (scope entity:<name>); a bound token's own")
    scope: Scope | None = Field(None, description="'global' or 'entity:<name>' (admin; must agree with entity)")
    conversation_id: ConversationId | None = Field(None, description="the conversation the memory came from")
    timestamp: str | None = Field(None, description="ISO 8601 time of the memory; now when absent")
    expires_at: str | None = Field(
        None, description="ISO 8601 time at which the memory stops being ranked (kept afterwards); never when absent"
    )
    metadata: Metadata | None = None
    source: Literal["system", "chat", "import"] = Field(
        "system", description="where the memory comes from: system (default), chat (a model), import"
    )


class MemorySupersede(_Body):
    text: Text = Field(description="what holds now, replacing the memory's text")
    kind: Literal["update", "contradict"] = Field(
        "update", description="update: the fact changed; contradict: the old memory was wrong"
    )
    at: Time | None = Field(
        None,
        description="ISO 8601 time of the change (the old memory's valid_until, the new "
        "one's valid_from); now when absent",
    )
    importance: Importance | None = Field(None, description="the old memory's when absent")
    tags: list[str] | None = Field(None, description="the old memory's when absent")
    expires_at: Time | None = Field(None, description="ISO 8601 time at which the new memory stops being ranked")
    conversation_id: ConversationId | None = Field(None, description="the conversation the change came from")
    metadata: Metadata | None = None
    source: Literal["system", "chat", "import"] = Field(
        "system", description="where the memory comes from: system (default), chat (a model), import"
    )


class MemoryPatch(_Body):
    text: Text | None = None
    importance: Importance | None = None
    tags: list[str] | None = None
    metadata: Metadata | None = Field(None, description="extra keys to add or change (not brain's own keys)")
    replace_metadata: bool = False
    status: Status | None = Field(
        None,
        description="retire the memory (retracted, superseded, archived: kept, never ranked) or bring it back (active)",
    )


class DocCreate(_Body):
    text: Text
    type: DocTypeName = Field(description="the document type")
    id: Text | None = None
    metadata: Metadata = Field(default_factory=dict)


class DocsCreate(_Body):
    docs: list[DocCreate] = Field(min_length=1)


def _doc_body_kind(value: object) -> str:
    return DOC_BATCH if isinstance(value, dict) and "docs" in value else ONE_DOC


DocsBody = Annotated[
    Annotated[DocCreate, Tag(ONE_DOC)] | Annotated[DocsCreate, Tag(DOC_BATCH)], Discriminator(_doc_body_kind)
]


# ---- response bodies (documentation: the routes return plain dicts) ------------------------------


class ErrorBody(BaseModel):
    error: str = Field(description="validation_error, unauthorized, forbidden, not_found, too_large, ...")
    message: str
    problems: list[Problem] | None = None


class DocumentOut(BaseModel):
    id: str
    text: str
    metadata: dict[str, object]


def sequence_field() -> Any:
    return Field(
        description="the change feed's sequence of this request's write: send it as X-Brain-Min-Sequence "
        "to read the write through any worker (also in the X-Brain-Sequence header); null "
        "without a Chroma server, where there is one process and no feed"
    )


def mirror_status_field() -> Any:
    return Field(
        description="where the write stands in the mirror: `ok` (mirrored), `degraded` (stored in Chroma; "
        "the mirror cannot be written now and catches up by itself once it can), `broken` "
        "(stored in Chroma; the mirror is damaged: `brain mirror rebuild`) or `off`"
    )


class DocumentWritten(DocumentOut):
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


class SupersessionOut(BaseModel):
    kind: str = Field(description="update or contradict")
    old: DocumentOut = Field(description="the memory replaced, now status superseded")
    new: DocumentOut = Field(description="the memory that replaced it (current)")
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


class MemoryHistory(BaseModel):
    id: str = Field(description="the memory asked about")
    history: list[DocumentOut] = Field(
        description="its supersession chain, oldest first; the current memory is the one without superseded_by"
    )


class ListedMemory(DocumentOut):
    status: str = Field(
        description="active (current; also when no status is stored), deprecated, superseded, retracted or archived"
    )


class MemoryList(BaseModel):
    memories: list[ListedMemory]
    limit: int
    offset: int


class MemoryCount(BaseModel):
    count: int = Field(description="how many memories the same filters list, every page together")


class MemoryHitOut(DocumentOut):
    score: float
    similarity: float
    similarity_part: float
    importance_part: float
    recency_part: float
    lexical_part: float = 0.0


class MemorySearch(BaseModel):
    query: str
    entity: str | None
    results: list[MemoryHitOut]


class Deleted(BaseModel):
    deleted: str
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


class DeletedMany(BaseModel):
    deleted: list[str]
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


class ExchangeOut(BaseModel):
    conversation_id: str
    user_turn_id: str
    assistant_turn_id: str
    user_turn_index: int
    assistant_turn_index: int
    summaries_scheduled: list[str]
    replayed: bool = Field(description="true when an earlier request with this idempotency key stored the exchange")
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


class TurnsOut(BaseModel):
    conversation_id: str
    turns: list[DocumentOut]


class SummariesOut(BaseModel):
    conversation_id: str
    summaries: list[DocumentOut]


class FormationBatchOut(BaseModel):
    conversation_id: str
    turn_range: str = Field(description="the window's turns, '<first>-<last>'")
    summary_id: str = Field(description="the summary document that records the window's formation state")
    status: str = Field(description="pending, done or failed")
    attempts: int
    error: str | None = Field(description="the last failure, when the batch failed")
    facts: int = Field(description="facts applied")
    prompt_tokens: int
    eval_tokens: int
    seconds: float = Field(description="model time of the batch")
    at: str | None = Field(description="ISO 8601 time of the last attempt")


class FormationReportOut(BaseModel):
    batches: list[FormationBatchOut] = Field(description="the windows run, each as it stands afterwards")
    done: int
    failed: int
    waiting: int = Field(
        description="batches still pending because the model could not be reached (they run again once it answers)"
    )
    added: int = Field(description="new memories")
    merged: int = Field(description="facts a current memory already held (its importance, tags and sources grew)")
    updated: int = Field(description="memories superseded because the fact changed")
    contradicted: int = Field(description="memories superseded because they were wrong")
    prompt_tokens: int
    eval_tokens: int
    seconds: float
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


class IdsOut(BaseModel):
    ids: list[str]
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


_ERROR_TEXT = {
    400: "a request the store refused for another reason",
    401: "missing or wrong bearer token",
    403: "a token bound to one entity asked for another's data, or for an admin-only route",
    404: "no such id (or not the caller's)",
    409: "the document's current state refuses the request (e.g. a memory superseded already)",
    413: "body over BRAIN_API_MAX_BODY_BYTES",
    422: "invalid input, naming the field",
    502: "the chat model (BRAIN_CHAT_UPSTREAM) could not be reached",
    503: "the store or the embedder is unavailable",
    504: "the chat model (BRAIN_CHAT_UPSTREAM) did not answer within BRAIN_CHAT_UPSTREAM_TIMEOUT",
}


def documented_responses(
    *codes: int, ok: tuple[int, type[BaseModel]] | None = None, links: dict[str, Any] | None = None
) -> dict[int | str, dict[str, object]]:
    """A route's ``responses=``: 401 and the error ``codes`` it can answer, and its success body."""
    out: dict[int | str, dict[str, object]] = {
        code: {"model": ErrorBody, "description": _ERROR_TEXT[code]} for code in (401, *codes)
    }
    if ok is not None:
        out[ok[0]] = {"model": ok[1], "description": "success"}
        if links:
            out[ok[0]]["links"] = links
    return out


def link(operation_id: str, **parameters: str) -> dict[str, object]:
    """An OpenAPI link: where a response's values can be sent next."""
    return {"operationId": operation_id, "parameters": parameters}


ConversationPath = Annotated[ConversationId, Path(description="conv-<id>")]
EntityQuery = Annotated[Entity | None, Query(description="act for this entity (a bound token: its own only)")]
