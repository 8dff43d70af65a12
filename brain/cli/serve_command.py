"""brain serve: the HTTP API."""

from __future__ import annotations

import click

from brain.cli.group import cli
from brain.cli.shell import State, pass_state

# ---- the HTTP API --------------------------------------------------------------------------------

@cli.command()
@click.option("--host", help="Address to listen on (default BRAIN_API_HOST, 127.0.0.1). A non-loopback "
                             "address needs BRAIN_API_TOKEN.")
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default BRAIN_API_PORT, 5000).")
@pass_state
def serve(state: State, host: str | None, port: int | None) -> None:
    """Serve the HTTP API (one process; see the README for several)."""
    from brain.api import serve as run_server

    run_server(state.settings(), host=host, port=port)
