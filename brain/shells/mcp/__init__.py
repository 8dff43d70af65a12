"""``brain mcp``: brain's memory over the Model Context Protocol, a thin shell over a :class:`~brain.app.core.Brain`.

:func:`create_server` builds the server (:mod:`brain.shells.mcp.server`: the tools, the resources and the entity
rule). :func:`serve_stdio` runs it on stdin/stdout, where stdout carries only the protocol and logs go to
stderr; :func:`serve_http` on streamable HTTP behind brain's token rule (:mod:`brain.shells.mcp.http`).
"""

from __future__ import annotations

from brain.ops import LocalOperations, Operations
from brain.ops.serving import Brain, prepare
from brain.shells.mcp.http import MCP_PATH, MountedMcp, http_app, listen_tokens, serve_http
from brain.shells.mcp.server import create_server


def serve_stdio(target: Operations | Brain, *, entity: str | None = None) -> None:
    """Serve ``target``'s operations over stdio until the client closes stdin: on a store this process opened,
    or through the ``brain serve`` that holds it."""
    ops = LocalOperations(target) if isinstance(target, Brain) else target
    server = create_server(ops, entity=entity)
    prepare(ops)
    server.run("stdio")


__all__ = ["MCP_PATH", "MountedMcp", "create_server", "http_app", "listen_tokens", "serve_http", "serve_stdio"]
