"""Reads for looking inside the store: conversations by last activity, the knowledge base, the persona;
and forgetting an entity."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from brain.shells.api.browse_models import (
    ConversationList,
    EntityPath,
    ForgetOut,
    ForgetPreviewOut,
    KnowledgeOut,
    PersonaOut,
)
from brain.shells.api.models import MAX_OFFSET, EntityQuery, documented_responses
from brain.shells.api.read_your_writes import with_sequence
from brain.shells.api.request_context import ops_of


def add_routes(router: APIRouter) -> None:
    @router.get(
        "/v1/conversations",
        tags=["chat"],
        operation_id="list_conversations",
        responses=documented_responses(400, 403, 422, 503, ok=(200, ConversationList)),
    )
    def list_conversations(
        request: Request,
        entity: EntityQuery = None,
        limit: int = Query(50, ge=1, le=1000),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
    ) -> object:
        found = ops_of(request).conversations.list(entity=entity, limit=limit, offset=offset)
        return {"conversations": [c.to_dict() for c in found], "limit": limit, "offset": offset}

    @router.get(
        "/v1/knowledge",
        tags=["knowledge"],
        operation_id="knowledge",
        responses=documented_responses(403, 422, 503, ok=(200, KnowledgeOut)),
    )
    def knowledge(request: Request, entity: EntityQuery = None) -> object:
        return {"files": ops_of(request).knowledge.by_file(entity=entity)}

    @router.get(
        "/v1/persona",
        tags=["knowledge"],
        operation_id="persona",
        responses=documented_responses(403, 422, 503, ok=(200, PersonaOut)),
    )
    def persona(request: Request, entity: EntityQuery = None) -> object:
        return ops_of(request).knowledge.persona(entity=entity)

    @router.delete(
        "/v1/entities/{name:path}",
        tags=["memories"],
        operation_id="forget_entity",
        responses=documented_responses(403, 404, 422, 503, ok=(200, ForgetOut)),
    )
    def forget_entity(name: EntityPath, request: Request) -> object:
        """Forget a person: every document in scope entity:<name> (memories, conversation turns and
        summaries) is removed from the store and the mirror, and the data directory's files are compacted
        so that none of their text remains. The admin token, or a token bound to that entity."""
        return with_sequence(request, ops_of(request).entities.forget(name).to_dict())

    @router.get(
        "/v1/entities/{name:path}",
        tags=["memories"],
        operation_id="forget_preview",
        responses=documented_responses(403, 404, 422, 503, ok=(200, ForgetPreviewOut)),
    )
    def forget_preview(name: EntityPath, request: Request) -> object:
        """What is stored in a person's scope, by document type: what forgetting them (DELETE) would remove.
        404 when nothing is stored for them. Nothing is changed."""
        return {"entity": name, "documents": ops_of(request).entities.forget_preview(name)}
