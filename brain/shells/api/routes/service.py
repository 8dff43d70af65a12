"""The service itself: the document schemas, and health (how much the store holds only for an admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from brain.model.schemas import get_all_schemas, schema_info
from brain.model.version import __version__
from brain.shells.api.models import DocTypeName, documented_responses
from brain.shells.api.request_context import caller_of, ops_of


def add_routes(router: APIRouter) -> None:
    # -- schema ----------------------------------------------------------------------------------
    def schema(
        doc_type: Annotated[DocTypeName | None, Query(description="one type; all when absent")] = None,
    ) -> object:
        if doc_type is None:
            return {name: schema_info(name) for name in get_all_schemas()}
        return schema_info(doc_type)

    for path, operation_id in (("/v1/schema", "schema"), ("/api/schema", "schema_legacy")):
        router.get(path, tags=["schema"], responses=documented_responses(422), operation_id=operation_id)(schema)

    # -- health ----------------------------------------------------------------------------------
    @router.get(
        "/v1/health",
        tags=["health"],
        responses={
            **documented_responses(422),
            503: {
                "description": "the store is down (the report says why)",
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
        },
    )
    def health(
        request: Request,
        verify: bool = Query(
            False, description="admin only: also compare the mirror with the store (reads both whole)"
        ),
        stats: bool = Query(
            False,
            description="admin only: also the store's figures, as `brain stats` shows them (walks the data directory)",
        ),
    ) -> JSONResponse:
        # how much the store holds, and where, is the operator's business
        admin = caller_of(request).is_admin
        ops = ops_of(request)
        report = ops.maintenance.health(detail=admin, verify=verify)
        if not admin and isinstance(report.get("formation"), dict):
            # which conversations' formation failed, and the model's complaints (names of entities among
            # them), are the operator's business: others learn whether it is on
            report["formation"] = {key: report["formation"].get(key) for key in ("enabled", "model", "off_reason")}
        if stats and admin and report["status"] != "unavailable":
            report["stats"] = ops.maintenance.stats()
        status = 503 if report["status"] == "unavailable" else 200
        return JSONResponse(status_code=status, content={"version": __version__, **report})
