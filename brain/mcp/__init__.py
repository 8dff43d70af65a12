"""``brain mcp``: brain's memory over the Model Context Protocol, a thin shell over a :class:`~brain.core.Brain`.

:func:`create_server` builds the server (:mod:`brain.mcp.server`: the tools, the resources and the entity
rule). :func:`serve_stdio` runs it on stdin/stdout, where stdout carries only the protocol and logs go to
stderr; :func:`serve_http` on streamable HTTP behind brain's token rule (:mod:`brain.mcp.http`).
"""

from __future__ import annotations

import logging

from brain.core import Brain
from brain.errors import BrainError
from brain.mcp.http import MCP_PATH, MountedMcp, http_app, listen_tokens, serve_http
from brain.mcp.server import create_server
from brain.startup import catch_up_mirror

log = logging.getLogger(__name__)


def prepare(brain: Brain) -> None:
    """What a server does before its first message: repair writes the mirror missed, register the
    specialists (so that reading them never writes)."""
    caught_up = catch_up_mirror(brain.store)
    if caught_up is not None:
        log.info("%s", caught_up.summary())
    try:
        brain.register_specialists()
    except BrainError as exc:  # kept by the Brain: find_specialists answers with it
        log.warning("specialists unavailable: %s", exc)


def serve_stdio(brain: Brain, *, entity: str | None = None) -> None:
    """Serve ``brain`` over stdio until the client closes stdin."""
    server = create_server(brain, entity=entity)
    prepare(brain)
    server.run("stdio")


__all__ = ["MCP_PATH", "MountedMcp", "create_server", "http_app", "listen_tokens", "prepare", "serve_http",
           "serve_stdio"]
