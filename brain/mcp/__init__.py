"""``brain mcp``: brain's memory over the Model Context Protocol, a thin shell over a :class:`~brain.core.Brain`.

:func:`create_server` builds the server (:mod:`brain.mcp.server`: the tools and the entity rule);
:func:`serve_stdio` runs it on stdin/stdout, where stdout carries only the protocol and logs go to stderr.
"""

from __future__ import annotations

import logging

from brain.core import Brain
from brain.mcp.server import create_server
from brain.startup import catch_up_mirror

log = logging.getLogger(__name__)


def serve_stdio(brain: Brain, *, entity: str | None = None) -> None:
    """Serve ``brain`` over stdio until the client closes stdin."""
    server = create_server(brain, entity=entity)
    caught_up = catch_up_mirror(brain.store)  # a write the mirror missed is repaired before serving
    if caught_up is not None:
        log.info("%s", caught_up.summary())
    server.run("stdio")


__all__ = ["create_server", "serve_stdio"]
