"""What a route works with: the app's open :class:`~brain.app.core.Brain`, the authenticated caller, and
the caller's :class:`~brain.access.policy.Access` to memories and conversations."""

from __future__ import annotations

from fastapi import Request

from brain.access.policy import Access, Caller
from brain.app.core import Brain
from brain.model.errors import StoreUnavailable


def brain_of(request: Request) -> Brain:
    opened = getattr(request.app.state, "brain", None)
    if opened is None:
        raise StoreUnavailable("the store is not open (the server is starting or shutting down)")
    return opened


def caller_of(request: Request) -> Caller:
    return request.scope["brain.caller"]


def access_of(request: Request, entity: str | None = None) -> Access:
    """The request's view of memories and conversations: its caller, acting for ``entity``."""
    opened = brain_of(request)
    return Access(opened.store, opened.chat, caller_of(request), entity)
