"""Any operation by name: the route the served client (:mod:`brain.ops.served`) calls.

``POST /v1/ops/{noun}/{name}`` with ``{"args": {...}, "caller": ...}`` runs the method ``name`` of the noun's class
in :mod:`brain.ops.local`, its arguments read by its own signature (:mod:`brain.ops.calls`), and answers
``{"result": ...}``, the method's return value as JSON. ``caller`` narrows the token's caller, never widens it:
the admin's token may act as a caller bound to one entity (a CLI or an MCP server started with ``--entity``
beside the server); a bound token may name only its own entity.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from brain.model.errors import Forbidden, NotFound
from brain.ops import Caller
from brain.ops.calls import decode_arguments, encode_result, operations_of
from brain.ops.local import NOUNS, LocalOperations
from brain.ops.served import OPERATION_PATH
from brain.shells.api.models import Entity, documented_responses
from brain.shells.api.request_context import brain_of, caller_of


class CallerSent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entity: Entity
    bound_by: str = Field("token", min_length=1, max_length=200, description="what binds it, for the messages")


class OperationCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: dict[str, object] = Field(default_factory=dict, description="the method's arguments, by name")
    caller: CallerSent | None = Field(None, description="a caller bound to one entity (none: the token's own)")


class OperationResult(BaseModel):
    result: object = Field(description="the method's return value")


def narrowed(token: Caller, sent: CallerSent | None) -> Caller:
    """The caller a call runs as: the token's, or the narrower one it sent."""
    if sent is None:
        return token
    if token.is_admin:
        return Caller(sent.entity, sent.bound_by)
    if token.acting_as(sent.entity) == token.entity:
        return token
    raise Forbidden(f"this {token.bound_by} is bound to entity {token.entity!r}; it cannot call as {sent.entity!r}")


def add_routes(router: APIRouter) -> None:
    @router.post(
        OPERATION_PATH,
        tags=["operations"],
        operation_id="call_operation",
        responses=documented_responses(400, 403, 404, 409, 413, 422, 502, 503, 504, ok=(200, OperationResult)),
    )
    def call_operation(noun: str, name: str, body: OperationCall, request: Request) -> object:
        method = operations_of(NOUNS[noun]).get(name) if noun in NOUNS else None
        if method is None:
            nouns = ", ".join(NOUNS)
            raise NotFound(f"no operation {noun}.{name}: the nouns are {nouns}, each with its own operations")
        ops = LocalOperations(brain_of(request), narrowed(caller_of(request), body.caller))
        result = getattr(getattr(ops, noun), name)(**decode_arguments(method, body.args))
        return {"result": encode_result(method, result)}
