"""Serving the API under uvicorn, in one process (see :mod:`brain.api`)."""

from __future__ import annotations

import logging

from brain.api.factory import create_app
from brain.auth import TokenTable, check_listen_address
from brain.config import Settings
from brain.core import open as open_brain
from brain.startup import prepare_to_serve

log = logging.getLogger(__name__)


def serve(settings: Settings | None = None, *, host: str | None = None, port: int | None = None) -> None:
    """Run the API under uvicorn in this process (one process: see the module docstring)."""
    import uvicorn

    settings = settings or Settings()
    host = host or settings.api_host
    port = port or settings.api_port
    tokens = TokenTable.from_settings(settings)  # a malformed tokens file stops here, before the store opens
    check_listen_address(host, tokens)
    if not settings.chroma_url:
        log.warning("embedded Chroma store: serving from this one process (threads); for several processes "
                    "run a Chroma server and set BRAIN_CHROMA_URL")
    # opened here, before uvicorn starts, so that a locked or unreachable store is a clear error
    with open_brain(settings) as opened:
        prepare_to_serve(opened)  # a write the mirror missed is repaired before serving
        uvicorn.run(create_app(settings, brain=opened, tokens=tokens, host=host), host=host, port=port, workers=1,
                    log_level="info")
