"""What an operator reads through a running server: documents of any type by id and filter, and a search
of any type (admin only; the store's figures are health's ``?stats=true``). The CLI run beside ``brain serve`` on
the same data directory sends its reads here (:mod:`brain.ops.served`); each route is one operation, so the
answers are the CLI's own."""

from __future__ import annotations

import json

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from brain.model.errors import ValidationError
from brain.model.schemas import MAX_K
from brain.shells.api.models import MAX_OFFSET, DocTypeName, DocumentOut, EntityQuery, documented_responses
from brain.shells.api.request_context import ops_of


class DocsOut(BaseModel):
    docs: list[DocumentOut]


class SearchOut(BaseModel):
    query: str
    type: str | None
    results: list[dict[str, object]]


def _where(value: str | None) -> dict[str, object] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValidationError.of(
            "where", f'where is not JSON ({exc.msg}); send a JSON object such as {{"scope": "global"}}'
        ) from None
    if not isinstance(parsed, dict):
        raise ValidationError.of("where", f"where must be a JSON object, not {type(parsed).__name__}")
    return parsed


def add_routes(router: APIRouter) -> None:
    @router.get(
        "/v1/docs",
        tags=["documents"],
        operation_id="get_docs",
        responses=documented_responses(400, 403, 422, 503, ok=(200, DocsOut)),
    )
    def get_docs(
        request: Request,
        ids: list[str] = Query([], description="these documents (repeatable)"),
        type: DocTypeName | None = Query(None, description="only this type"),
        where: str | None = Query(
            None, description='a metadata filter as a JSON object, e.g. {"scope": "global", "tags": ["food"]}'
        ),
        limit: int | None = Query(None, ge=1, le=MAX_OFFSET),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
        entity: EntityQuery = None,
    ) -> object:
        docs = ops_of(request).documents.get(
            ids or None, where=_where(where), type=type, limit=limit, offset=offset or None, entity=entity
        )
        return {"docs": [d.to_dict() for d in docs]}

    @router.get(
        "/v1/search",
        tags=["documents"],
        operation_id="search",
        responses=documented_responses(400, 403, 422, 503, ok=(200, SearchOut)),
    )
    def search(
        request: Request,
        q: str = Query(min_length=1),
        type: DocTypeName | None = Query(None),
        k: int | None = Query(None, ge=1, le=MAX_K),
        entity: EntityQuery = None,
    ) -> object:
        hits = ops_of(request).documents.search(q, type=type, k=k, entity=entity)
        return {"query": q, "type": type, "results": [h.to_dict() for h in hits]}
