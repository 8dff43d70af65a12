"""The HTTP API: a thin FastAPI shell over one :class:`~brain.app.core.Brain` (its store, chat layer and
specialists) and :class:`~brain.access.policy.Access` (memories and conversations under the caller's identity).

``brain serve`` runs :func:`create_app` under uvicorn in one process: the embedded Chroma store is
single-process (threads are fine, and FastAPI runs the handlers below in its thread pool). More
processes need a Chroma server (``BRAIN_CHROMA_URL``). For uvicorn itself,
``uvicorn --factory brain.shells.api:create_app`` (or ``brain.shells.api:app``, built from the settings when first
asked for, so that importing this module never reads them). The specialists are registered when the
server starts, so a request never writes them.

Every request passes :class:`Authenticate` first (bearer token -> :class:`~brain.access.policy.Caller`, see
:mod:`brain.shells.web.tokens`), then :class:`BodyLimit`, then routing and body parsing, so an unauthenticated
caller gets 401 and learns nothing else. Errors are JSON ``{"error": kind, "message": text,
"problems": [...]}``: invalid input 422 naming the field (malformed JSON too, with line and column),
missing or wrong token 401, a token bound to another entity 403, unknown id 404, body over
``BRAIN_API_MAX_BODY_BYTES`` 413, store or embedder unavailable 503 with the reason. Bad input never
gives a 500. The OpenAPI schema documents each of them and the constraints the server enforces.

Modules: :mod:`~brain.shells.api.factory` (``create_app``), :mod:`~brain.shells.api.routes` (one module per area),
:mod:`~brain.shells.api.models` (bodies and field types), :mod:`~brain.shells.web.error_responses`,
:mod:`~brain.shells.api.json_bodies`, :mod:`~brain.shells.web.middleware`, :mod:`~brain.shells.api.serving` (``serve``).
"""

from __future__ import annotations

from brain.shells.api.factory import create_app
from brain.shells.api.json_bodies import MAX_JSON_DEPTH, parse_json_body
from brain.shells.api.models import MAX_OFFSET
from brain.shells.api.serving import serve
from brain.shells.web.middleware import Authenticate, BodyLimit
from brain.shells.web.tokens import is_loopback

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_OFFSET",
    "Authenticate",
    "BodyLimit",
    "create_app",
    "is_loopback",
    "parse_json_body",
    "serve",
]


def __getattr__(name: str) -> object:
    """``app``: the API over the settings of the environment, built on first access (uvicorn's
    ``brain.shells.api:app``), so that a bad setting fails there and not at ``import brain.shells.api``."""
    if name == "app":
        built = globals().get("_app")
        if built is None:
            built = globals()["_app"] = create_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
