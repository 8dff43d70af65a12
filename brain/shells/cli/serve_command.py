"""brain serve: the HTTP API."""

from __future__ import annotations

import logging

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import State, pass_state

# ---- the HTTP API --------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--host",
    help="Address to listen on (default BRAIN_API_HOST, 127.0.0.1). A non-loopback address needs BRAIN_API_TOKEN.",
)
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default BRAIN_API_PORT, 5000).")
@click.option(
    "--mcp",
    "with_mcp",
    is_flag=True,
    help="Also serve MCP (streamable HTTP) at /mcp, behind the same tokens (or set BRAIN_API_MCP=true).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    help="Worker processes on one port (default BRAIN_API_WORKERS, "
    "1). More than 1 needs a Chroma server (BRAIN_CHROMA_URL).",
)
@pass_state
def serve(state: State, host: str | None, port: int | None, with_mcp: bool, workers: int | None) -> None:
    """Serve the HTTP API: one process (threads), or --workers N processes on a Chroma server."""
    from brain.shells.api import serve as run_server

    _log_to_stderr()
    settings = state.settings()
    if with_mcp:
        settings = settings.model_copy(update={"api_mcp": True})
    run_server(settings, host=host, port=port, workers=workers)


def _log_to_stderr() -> None:
    """brain's own start-up lines (the persona loaded, the mirror caught up) on stderr, as uvicorn shows its."""
    logger = logging.getLogger("brain")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
