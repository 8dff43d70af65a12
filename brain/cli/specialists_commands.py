"""The specialists (tools): specialists list/find."""

from __future__ import annotations

import click

from brain.cli.group import cli
from brain.cli.shell import State, emit, json_option, pass_state, short

# ---- specialists --------------------------------------------------------------------------------

@cli.group()
def specialists() -> None:
    """The assistant's specialists (tools), found by meaning (BRAIN_SPECIALISTS_PATH)."""


@specialists.command("list")
@json_option
@pass_state
def specialists_list(state: State) -> None:
    """Register the specialists file (if changed) and list the specialists."""
    found = state.brain().specialists.list_specialists()
    emit(state, [s.to_dict() for s in found],
         lambda: "\n".join(f"{s.id}  {short(s.description, 90)}" for s in found) if found else "no specialists")


@specialists.command("find")
@click.argument("request")
@click.option("--k", type=click.IntRange(1, 50), default=3, show_default=True, help="How many specialists.")
@json_option
@pass_state
def specialists_find(state: State, request: str, k: int) -> None:
    """The specialists best suited to REQUEST, with score and band (strong, good, possible, weak)."""
    matches = state.brain().specialists.find_specialists(request, k)
    emit(state, {"request": request, "results": [m.to_dict() for m in matches]},
         lambda: "\n".join(f"{m.score:.3f}  {m.band:<8}  {m.id}  {short(m.description, 80)}" for m in matches))
