"""The specialists (tools), found by meaning; registered when the server starts, so reading never writes."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from brain.shells.api.models import documented_responses
from brain.shells.api.request_context import ops_of


def add_routes(router: APIRouter) -> None:
    @router.get(
        "/v1/specialists",
        tags=["specialists"],
        operation_id="specialists",
        responses=documented_responses(400, 422, 503),
    )
    def find_specialists(
        request: Request, q: str | None = Query(None, min_length=1), k: int = Query(3, ge=1, le=50)
    ) -> object:
        specialists = ops_of(request).specialists
        if q is None:
            return {"specialists": [s.to_dict() for s in specialists.list()]}
        return {"request": q, "results": [m.to_dict() for m in specialists.find(q, k=k)]}
