"""What a route works with: the operations of the authenticated caller (:mod:`brain.ops`), on the Brain the
app opened."""

from __future__ import annotations

from fastapi import Request

from brain.model.errors import StoreUnavailable
from brain.ops import Caller, LocalOperations
from brain.ops.serving import Brain


def brain_of(request: Request) -> Brain:
    opened: Brain | None = getattr(request.app.state, "brain", None)
    if opened is None:
        raise StoreUnavailable("the store is not open (the server is starting or shutting down)")
    return opened


def caller_of(request: Request) -> Caller:
    caller: Caller = request.scope["brain.caller"]  # set by the auth middleware on every request
    return caller


def ops_of(request: Request) -> LocalOperations:
    """The request's operations: its caller's, on the app's Brain."""
    return LocalOperations(brain_of(request), caller_of(request))


def acting_of(request: Request, entity: str | None) -> str | None:
    """The entity a request naming ``entity`` acts for (None: unrestricted); a bound caller naming another: 403."""
    return caller_of(request).acting_as(entity)
