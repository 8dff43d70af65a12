"""brain mcp: the MCP server (stdio)."""

from __future__ import annotations

import click

from brain.cli.group import cli
from brain.cli.shell import EntityType, State, pass_state


@cli.command()
@click.option("--entity", type=EntityType(), help="Bind the server to this entity: every tool acts in its scope "
                                                   "and a model cannot name another.")
@pass_state
def mcp(state: State, entity: str | None) -> None:
    """Serve brain's memory to an MCP client over stdio (stdout is the protocol; logs go to stderr)."""
    from brain.mcp import serve_stdio

    serve_stdio(state.brain(), entity=entity)
