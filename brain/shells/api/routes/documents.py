"""Documents of any type (admin only)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from brain.shells.api.models import DocsBody, DocsCreate, IdsOut, documented_responses
from brain.shells.api.read_your_writes import with_sequence
from brain.shells.api.request_context import ops_of


def add_routes(router: APIRouter) -> None:
    @router.post(
        "/v1/docs",
        tags=["documents"],
        status_code=201,
        operation_id="create_docs",
        responses=documented_responses(400, 403, 413, 422, 503, ok=(201, IdsOut)),
    )
    def create_docs(body: DocsBody, request: Request) -> object:
        docs = body.docs if isinstance(body, DocsCreate) else [body]
        ids = ops_of(request).documents.write(
            [{**d.metadata, "text": d.text, "type": d.type, "id": d.id} for d in docs]
        )
        return with_sequence(request, {"ids": ids})
