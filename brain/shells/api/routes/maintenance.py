"""The store as a whole, for the operator (the admin token): an export and an import of Portable AI Memory,
consolidation, the mirror's check and catch-up, and the persona as the prompt shows it. With these, every
command of ``brain`` works beside the server that holds the data directory (:mod:`brain.ops.served`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from tempfile import TemporaryDirectory

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from brain.model.schemas import MAX_K
from brain.shells.api.models import EntityQuery, _Body, documented_responses
from brain.shells.api.read_your_writes import with_sequence
from brain.shells.api.request_context import caller_of, ops_of
from brain.shells.web.error_responses import error_response

#: bytes of an export archive per chunk of the response
CHUNK = 1 << 20
#: the route an import archive is sent to; its body has its own bound, BRAIN_IMPORT_MAX_BYTES
IMPORT_PATH = "/v1/import"


def import_too_large(limit: int) -> str:
    """Why an import archive over ``limit`` bytes is refused, and what to do instead."""
    return (
        f"the import archive is larger than {limit:,} bytes (BRAIN_IMPORT_MAX_BYTES); raise BRAIN_IMPORT_MAX_BYTES "
        "where the server runs and restart it, or stop the server and run `brain import` on its data directory"
    )


class ConsolidateBody(_Body):
    dry_run: bool = Field(False, description="find the merges, change nothing")
    threshold: float | None = Field(None, gt=0.0, le=1.0, description="default BRAIN_CONSOLIDATE_THRESHOLD")


class SyncBody(_Body):
    force: bool = Field(False, description="sync even though the mirror's model differs (rows re-embedded)")


class BlockOut(BaseModel):
    block: str


class PersonaText(_Body):
    markdown: str = Field(min_length=1, description="the persona file's text (Markdown, at most 32 KiB)")
    source: str = Field("persona.md", max_length=4096, description="where the text comes from, for the report")


def add_routes(router: APIRouter) -> None:
    @router.get(
        "/v1/export",
        tags=["maintenance"],
        operation_id="export",
        responses={
            **documented_responses(403, 422, 503),
            200: {"content": {"application/x-tar": {}}, "description": "the export's files as one tar"},
        },
    )
    def export(
        request: Request,
        entity: EntityQuery = None,
        embeddings: bool = Query(True, description="with embeddings.json"),
        conversations: bool = Query(True, description="with conversations/ (turns and summaries)"),
        owner_id: str | None = Query(None, description="owner.id of the export (default: BRAIN_OWNER_ID or derived)"),
    ) -> object:
        """A Portable AI Memory export, streamed as an uncompressed tar: memory-store.json, embeddings.json,
        conversations/<id>.json and brain-export.json (what it holds). `brain export` beside the server writes
        it into its folder under the same rules as an export of an open store."""
        data = ops_of(request).maintenance.export_archive(
            entity=entity, embeddings=embeddings, conversations=conversations, owner_id=owner_id
        )

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(data), CHUNK):
                yield data[start : start + CHUNK]

        return StreamingResponse(chunks(), media_type="application/x-tar")

    @router.post(
        IMPORT_PATH,
        tags=["maintenance"],
        operation_id="import",
        responses=documented_responses(400, 403, 413, 422, 503),
        openapi_extra={
            "requestBody": {
                "required": True,
                # an uncompressed tar of the export's files (sent as application/x-tar or application/octet-stream)
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    )
    async def import_pam(
        request: Request,
        include_forgotten: bool = Query(
            False, description="also import the documents of entities forgotten here (they are skipped otherwise)"
        ),
    ) -> object:
        """Import a Portable AI Memory export sent as an uncompressed tar of its files (memory-store.json,
        embeddings.json, conversations/*.json); validated whole before anything is stored. The body may be up
        to BRAIN_IMPORT_MAX_BYTES (not BRAIN_API_MAX_BODY_BYTES): it is written to a temporary file as it
        comes, never held in memory."""
        # before a byte is read: whoever may not import cannot make the server write their body to disk
        caller_of(request).require_admin("an import")
        limit = request.app.state.settings.import_max_bytes
        with TemporaryDirectory(prefix="brain-import-") as folder:
            archive = Path(folder) / "import.tar"
            size = 0
            with open(archive, "wb") as out:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        return error_response(413, "too_large", import_too_large(limit))
                    await run_in_threadpool(out.write, chunk)
            report = await run_in_threadpool(
                ops_of(request).maintenance.import_archive, archive, include_forgotten=include_forgotten
            )
        return with_sequence(request, report.to_dict())

    @router.post(
        "/v1/consolidate",
        tags=["maintenance"],
        operation_id="consolidate",
        responses=documented_responses(400, 403, 413, 422, 503),
    )
    def consolidate(body: ConsolidateBody, request: Request) -> object:
        """Merge near-duplicate memories within each scope (with dry_run, only report the merges)."""
        report = ops_of(request).maintenance.consolidate(dry_run=body.dry_run, threshold=body.threshold)
        return with_sequence(request, report.to_dict())

    @router.get(
        "/v1/mirror/verify",
        tags=["maintenance"],
        operation_id="verify_mirror",
        responses=documented_responses(403, 503),
    )
    def verify_mirror(request: Request) -> object:
        """Compare the Engram mirror with the store, document by document; nothing is changed."""
        return ops_of(request).maintenance.verify_mirror().to_dict()

    @router.post(
        "/v1/mirror/sync",
        tags=["maintenance"],
        operation_id="sync_mirror",
        responses=documented_responses(400, 403, 413, 422, 503),
    )
    def sync_mirror(body: SyncBody, request: Request) -> object:
        """Bring the Engram mirror in line with the store."""
        return ops_of(request).maintenance.sync_mirror(force=body.force).to_dict()

    @router.post(
        "/v1/mirror/backfill",
        tags=["maintenance"],
        operation_id="backfill_mirror",
        responses=documented_responses(403, 503),
    )
    def backfill_mirror(request: Request) -> object:
        """Embed the mirrored documents that have no vector of the store's model (resumable)."""
        return ops_of(request).maintenance.backfill_mirror().to_dict()

    @router.get(
        "/v1/knowledge/search",
        tags=["knowledge"],
        operation_id="search_knowledge",
        responses=documented_responses(400, 403, 422, 503),
    )
    def search_knowledge(
        request: Request,
        q: str = Query(min_length=1),
        k: int | None = Query(None, ge=1, le=MAX_K),
        topic: str | None = Query(None, description="only entries of this topic"),
        entity: EntityQuery = None,
    ) -> object:
        """The knowledge-base entries closest in meaning to q: global ones and the entity's own."""
        hits = ops_of(request).knowledge.search(q, k=k, topic=topic, entity=entity)
        return {"query": q, "results": [h.to_dict() for h in hits]}

    @router.put(
        "/v1/persona",
        tags=["knowledge"],
        operation_id="load_persona",
        responses=documented_responses(400, 403, 413, 422, 503),
    )
    def load_persona(body: PersonaText, request: Request) -> object:
        """Bring the stored persona in line with a persona file's text (a changed one is embedded and becomes
        the current version; the same text writes nothing). `brain persona load` beside the server sends it."""
        return with_sequence(request, ops_of(request).knowledge.load_persona_text(body.markdown, body.source).to_dict())

    @router.get(
        "/v1/persona/block",
        tags=["knowledge"],
        operation_id="persona_block",
        responses=documented_responses(403, 422, 503, ok=(200, BlockOut)),
    )
    def persona_block(request: Request, max_chars: int | None = Query(None, ge=1)) -> object:
        """The current persona as the prompt shows it."""
        return {"block": ops_of(request).knowledge.persona_block(max_chars=max_chars)}
