"""Memories under the caller's identity: create, list, search, read, change and delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from brain.model.schemas import Status
from brain.ops.values import MemoryOrder, status_of
from brain.shells.api.models import (
    MAX_OFFSET,
    Deleted,
    DeletedMany,
    DocumentOut,
    DocumentWritten,
    EntityQuery,
    Importance,
    MemoryCount,
    MemoryCreate,
    MemoryHistory,
    MemoryList,
    MemoryPatch,
    MemorySearch,
    MemorySupersede,
    SupersessionOut,
    documented_responses,
    link,
)
from brain.shells.api.read_your_writes import with_sequence
from brain.shells.api.request_context import acting_of, ops_of


class MemoryFilters:
    """Which memories a listing or a count takes, as query parameters."""

    def __init__(
        self,
        entity: EntityQuery = None,
        scope: str | None = Query(
            None, description="only this scope (global or entity:<name>), one of those the request reads"
        ),
        tags: list[str] = Query([]),
        importance: list[Importance] = Query([], description="any of these importances, 1-5 (repeatable)"),
        status: list[Status] = Query(
            [],
            description="any of these statuses (repeatable); active includes memories without a status; none: "
            "the current ones (not superseded, retracted or archived)",
        ),
        history: bool = Query(
            False, description="with no status: every memory, the superseded, retracted and archived ones too"
        ),
    ):
        self.entity = entity
        self.scope = scope
        self.tags = tags
        self.importance = importance
        self.status = status
        self.history = history


def add_routes(router: APIRouter) -> None:
    memory_links = {
        "get": link("get_memory", doc_id="$response.body#/id"),
        "patch": link("patch_memory", doc_id="$response.body#/id"),
        "delete": link("delete_memory", doc_id="$response.body#/id"),
        "supersede": link("supersede_memory", doc_id="$response.body#/id"),
        "history": link("memory_history", doc_id="$response.body#/id"),
    }

    @router.post(
        "/v1/memories",
        tags=["memories"],
        status_code=201,
        operation_id="create_memory",
        responses=documented_responses(400, 403, 413, 422, 503, ok=(201, DocumentWritten), links=memory_links),
    )
    def create_memory(body: MemoryCreate, request: Request) -> object:
        created = ops_of(request).memories.add(**body.arguments())
        return with_sequence(request, created.to_dict())

    @router.get(
        "/v1/memories",
        tags=["memories"],
        operation_id="list_memories",
        responses=documented_responses(400, 403, 422, 503, ok=(200, MemoryList)),
    )
    def list_memories(
        request: Request,
        filters: Annotated[MemoryFilters, Depends()],
        order: MemoryOrder = Query("stored", description="stored (storage order) or newest (latest timestamp first)"),
        limit: int = Query(100, ge=1, le=1000),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
    ) -> object:
        docs = ops_of(request).memories.list(**vars(filters), order=order, limit=limit, offset=offset)
        return {
            "memories": [{**d.to_dict(), "status": status_of(d.metadata)} for d in docs],
            "limit": limit,
            "offset": offset,
        }

    # declared before /v1/memories/{doc_id} so that "count" is not taken for an id
    @router.get(
        "/v1/memories/count",
        tags=["memories"],
        operation_id="count_memories",
        responses=documented_responses(400, 403, 422, 503, ok=(200, MemoryCount)),
    )
    def count_memories(request: Request, filters: Annotated[MemoryFilters, Depends()]) -> object:
        return {"count": ops_of(request).memories.count(**vars(filters))}

    # declared before /v1/memories/{doc_id} so that "search" is not taken for an id
    @router.get(
        "/v1/memories/search",
        tags=["memories"],
        operation_id="search_memories",
        responses=documented_responses(400, 403, 422, 503, ok=(200, MemorySearch)),
    )
    def search_memories(
        request: Request,
        q: str = Query(min_length=1),
        k: int | None = Query(None, ge=1, le=100),
        entity: EntityQuery = None,
        tags: list[str] = Query([]),
        as_of: str | None = Query(
            None, description="ISO 8601 time: rank what was held true then (memories superseded since included)"
        ),
    ) -> object:
        hits = ops_of(request).memories.search(q, k=k, entity=entity, tags=tags, as_of=as_of)
        return {"query": q, "entity": acting_of(request, entity), "results": [h.to_dict() for h in hits]}

    @router.get(
        "/v1/memories/{doc_id}",
        tags=["memories"],
        operation_id="get_memory",
        responses=documented_responses(400, 403, 404, 422, 503, ok=(200, DocumentOut)),
    )
    def get_memory(doc_id: str, request: Request, entity: EntityQuery = None) -> object:
        return ops_of(request).memories.get(doc_id, entity=entity).to_dict()

    @router.patch(
        "/v1/memories/{doc_id}",
        tags=["memories"],
        operation_id="patch_memory",
        responses=documented_responses(400, 403, 404, 413, 422, 503, ok=(200, DocumentWritten)),
    )
    def patch_memory(doc_id: str, body: MemoryPatch, request: Request, entity: EntityQuery = None) -> object:
        updated = ops_of(request).memories.update(doc_id, entity=entity, **body.arguments())
        return with_sequence(request, updated.to_dict())

    @router.post(
        "/v1/memories/{doc_id}/supersede",
        tags=["memories"],
        status_code=201,
        operation_id="supersede_memory",
        responses=documented_responses(400, 403, 404, 409, 413, 422, 503, ok=(201, SupersessionOut)),
    )
    def supersede_memory(doc_id: str, body: MemorySupersede, request: Request, entity: EntityQuery = None) -> object:
        done = ops_of(request).memories.supersede(doc_id, entity=entity, **body.arguments())
        return with_sequence(request, done.to_dict())

    @router.get(
        "/v1/memories/{doc_id}/history",
        tags=["memories"],
        operation_id="memory_history",
        responses=documented_responses(400, 403, 404, 422, 503, ok=(200, MemoryHistory)),
    )
    def memory_history(doc_id: str, request: Request, entity: EntityQuery = None) -> object:
        chain = ops_of(request).memories.history(doc_id, entity=entity)
        return {"id": doc_id, "history": [d.to_dict() for d in chain]}

    @router.delete(
        "/v1/memories/{doc_id}",
        tags=["memories"],
        operation_id="delete_memory",
        responses=documented_responses(400, 403, 404, 422, 503, ok=(200, Deleted)),
    )
    def delete_memory(doc_id: str, request: Request, entity: EntityQuery = None) -> object:
        ops_of(request).memories.delete([doc_id], entity=entity)
        return with_sequence(request, {"deleted": doc_id})

    @router.delete(
        "/v1/memories",
        tags=["memories"],
        operation_id="delete_memories",
        responses=documented_responses(400, 403, 404, 422, 503, ok=(200, DeletedMany)),
    )
    def delete_memories(
        request: Request,
        ids: list[str] = Query(description="the memories to delete (repeatable); all or none are deleted"),
        entity: EntityQuery = None,
    ) -> object:
        """Delete several memories at once: every id is checked before one is deleted, so a refusal (404, 403)
        deletes nothing."""
        deleted = ops_of(request).memories.delete(ids, entity=entity)
        return with_sequence(request, {"deleted": deleted})
