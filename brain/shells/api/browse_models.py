"""Response bodies of the browsing reads (conversations, knowledge, persona) and of forgetting an entity
(documentation: the routes return plain dicts)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, Field

from brain.shells.api.models import DocumentOut, Entity, mirror_status_field, sequence_field


class FormationCounts(BaseModel):
    pending: int = Field(description="windows whose memories are still to be formed (queued or being retried)")
    failed: int = Field(
        description="windows whose formation spent its attempts: re-run with POST /v1/conversations/{id}/extract"
    )
    done: int = Field(description="windows whose memories were formed")


class ConversationOut(BaseModel):
    conversation_id: str
    entity: str | None = Field(description="the entity whose scope the conversation started in; null: global")
    turns: int
    summaries: int
    last_activity: str = Field(description="ISO 8601 time of its latest turn or summary")
    formation: FormationCounts = Field(
        description="its summary windows by memory-formation state (windows formation never ran for are not counted)"
    )


class ConversationList(BaseModel):
    conversations: list[ConversationOut]
    limit: int
    offset: int


class KnowledgeTopic(BaseModel):
    topic: str | None
    documents: list[DocumentOut]


class KnowledgeFile(BaseModel):
    kb_file: str | None = Field(description="the knowledge-base file; null for FAQ entries written without one")
    topics: list[KnowledgeTopic]


class KnowledgeOut(BaseModel):
    files: list[KnowledgeFile]


class PersonaSectionOut(BaseModel):
    id: str
    title: str
    heading: str | None = Field(None, description="the section's heading in the persona file; null for none")
    topic: str | None
    position: int | None
    text: str


class PersonaOut(BaseModel):
    version: str | None = Field(description="the current persona version; null when none is stored")
    source: str | None = Field(description="BRAIN_PERSONA_PATH when that file exists")
    sections: list[PersonaSectionOut]


class ForgetOut(BaseModel):
    entity: str
    deleted: dict[str, int] = Field(description="documents removed, by type (memory, turn, summary, ...)")
    mirror: dict[str, int] = Field(description="mirror rows removed: rows, vectors, access_log, content_hashes")
    scrubbed: dict[str, object] = Field(description="how each file was compacted; chroma null for a Chroma server")
    conversations: list[str] = Field(description="ids of the conversations whose turns or summaries were removed")
    sequence: int | None = sequence_field()
    mirror_status: str = mirror_status_field()


EntityPath = Annotated[Entity, Path(description="an entity name")]


class ForgetPreviewOut(BaseModel):
    entity: str
    documents: dict[str, int] = Field(description="documents a forget would remove, by type; nothing is changed")
