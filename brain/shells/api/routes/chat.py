"""Chat: the context for a new message, recording an exchange, and a conversation's turns and summaries."""

from __future__ import annotations

from fastapi import APIRouter, Header, Query, Request

from brain.model.errors import ValidationError
from brain.shells.api.models import (
    ContextRequest,
    ConversationPath,
    EntityQuery,
    ExchangeOut,
    ExchangeRequest,
    FormationReportOut,
    IdempotencyKey,
    SummariesOut,
    TurnsOut,
    documented_responses,
    link,
)
from brain.shells.api.read_your_writes import with_sequence
from brain.shells.api.request_context import ops_of


def add_routes(router: APIRouter) -> None:
    conversation_links = {
        "turns": link("conversation_turns", conversation_id="$response.body#/conversation_id"),
        "summaries": link("conversation_summaries", conversation_id="$response.body#/conversation_id"),
        "extract": link("extract_memories", conversation_id="$response.body#/conversation_id"),
    }

    @router.post(
        "/v1/context",
        tags=["chat"],
        operation_id="context",
        responses=documented_responses(400, 403, 404, 413, 422, 503),
    )
    def context(body: ContextRequest, request: Request) -> object:
        built = ops_of(request).conversations.context(body.conversation_id, body.user_message, entity=body.entity)
        return built.to_dict()

    @router.post(
        "/v1/exchanges",
        tags=["chat"],
        status_code=201,
        operation_id="record_exchange",
        responses=documented_responses(400, 403, 404, 413, 422, 503, ok=(201, ExchangeOut), links=conversation_links),
    )
    def exchanges(
        body: ExchangeRequest,
        request: Request,
        idempotency_key: IdempotencyKey | None = Header(
            None, alias="Idempotency-Key", description="as the body's idempotency_key (give one, or both equal)"
        ),
    ) -> object:
        if idempotency_key is not None and body.idempotency_key not in (None, idempotency_key):
            raise ValidationError.of(
                "idempotency_key",
                "the Idempotency-Key header and the body's idempotency_key "
                "differ; send one of them, or the same key in both",
            )
        exchange = ops_of(request).conversations.record(
            **{**body.arguments(), "idempotency_key": idempotency_key or body.idempotency_key}
        )
        return with_sequence(request, exchange.to_dict())

    @router.get(
        "/v1/conversations/{conversation_id}/turns",
        tags=["chat"],
        operation_id="conversation_turns",
        responses=documented_responses(400, 403, 404, 422, 503, ok=(200, TurnsOut)),
    )
    def conversation_turns(
        conversation_id: ConversationPath,
        request: Request,
        entity: EntityQuery = None,
        k: int | None = Query(None, ge=1, le=1000, description="only the last k turns"),
    ) -> object:
        docs = ops_of(request).conversations.turns(conversation_id, k=k, entity=entity)
        return {"conversation_id": conversation_id, "turns": [d.to_dict() for d in docs]}

    @router.get(
        "/v1/conversations/{conversation_id}/summaries",
        tags=["chat"],
        operation_id="conversation_summaries",
        responses=documented_responses(400, 403, 404, 422, 503, ok=(200, SummariesOut)),
    )
    def conversation_summaries(
        conversation_id: ConversationPath, request: Request, entity: EntityQuery = None
    ) -> object:
        docs = ops_of(request).conversations.summaries(conversation_id, entity=entity)
        return {"conversation_id": conversation_id, "summaries": [d.to_dict() for d in docs]}

    @router.post(
        "/v1/conversations/{conversation_id}/extract",
        tags=["chat"],
        operation_id="extract_memories",
        responses=documented_responses(400, 403, 404, 422, 503, ok=(200, FormationReportOut)),
    )
    def extract_memories(
        conversation_id: ConversationPath,
        request: Request,
        entity: EntityQuery = None,
        again: bool = Query(False, description="also re-run the windows whose memories were formed already"),
    ) -> object:
        """Form memories from a conversation now, in this request: each of its windows whose formation is
        pending or failed (with `again`, every window) is sent to the formation model and its facts are
        stored. The report counts the batches and the facts, and a batch that failed again says why.
        503 when memory formation is off (BRAIN_FORMATION, BRAIN_SUMMARIZER)."""
        report = ops_of(request).conversations.extract(conversation_id, again=again, entity=entity)
        return with_sequence(request, report.to_dict())
