"""brain mcp: the MCP server (stdio, or streamable HTTP with --http)."""

from __future__ import annotations

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import EntityType, State, pass_state


@cli.command()
@click.option(
    "--entity",
    type=EntityType(),
    help="Bind the server to this entity: every tool acts in its scope and a model cannot name another.",
)
@click.option(
    "--http",
    "use_http",
    is_flag=True,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (same token rule as brain serve).",
)
@click.option(
    "--host",
    help="With --http: the address to listen on (default BRAIN_API_HOST, 127.0.0.1). A "
    "non-loopback address needs BRAIN_API_TOKEN or BRAIN_API_TOKENS_FILE.",
)
@click.option("--port", type=click.IntRange(1, 65535), help="With --http: the port (default 5001).")
@pass_state
def mcp(state: State, entity: str | None, use_http: bool, host: str | None, port: int | None) -> None:
    """Serve brain's memory to an MCP client: over stdio (stdout is the protocol; logs go to stderr), or
    over streamable HTTP with --http."""
    from brain.ops import LocalOperations
    from brain.shells.mcp import listen_tokens, serve_http, serve_stdio

    if not use_http:
        if host is not None or port is not None:
            raise click.UsageError("--host and --port go with --http (stdio needs neither)")
        # beside a running `brain serve`, the tools go through it
        serve_stdio(state.ops(worker=True), entity=entity)
        return
    settings = state.settings()
    host = host or settings.api_host
    tokens = listen_tokens(settings, host)  # refused before the store opens
    ops = state.ops(worker=True, through_server=False)
    assert isinstance(ops, LocalOperations)  # a server itself: the store is this process's
    serve_http(ops, tokens=tokens, host=host, port=port or 5001, entity=entity)
