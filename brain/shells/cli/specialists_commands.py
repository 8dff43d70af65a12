"""The specialists (tools): specialists list/find."""

from __future__ import annotations

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import (
    SPECIALIST_HEADER,
    State,
    TextType,
    emit,
    json_option,
    pass_state,
    short,
    specialist_line,
)

# ---- specialists --------------------------------------------------------------------------------


@cli.group()
def specialists() -> None:
    """The assistant's specialists (tools), found by meaning (BRAIN_SPECIALISTS_PATH)."""


@specialists.command("list")
@json_option
@pass_state
def specialists_list(state: State) -> None:
    """Register the specialists file (if changed) and list the specialists."""
    found = state.ops().specialists.list()
    emit(
        state,
        [s.to_dict() for s in found],
        lambda: "\n".join(f"{s.id}  {short(s.description, 90)}" for s in found) if found else "no specialists",
    )


@specialists.command("find")
@click.argument("request", type=TextType())
@click.option("--k", type=click.IntRange(1, 50), default=3, show_default=True, help="How many specialists.")
@json_option
@pass_state
def specialists_find(state: State, request: str, k: int) -> None:
    """The specialists best suited to REQUEST, best first: ordered by confidence (how likely each is the
    right one), which gives the band (strong, good, possible, weak); the score it is learned from is shown too."""
    matches = state.ops().specialists.find(request, k=k)
    emit(
        state,
        {"request": request, "order": "confidence", "results": [m.to_dict() for m in matches]},
        lambda: "\n".join([SPECIALIST_HEADER] + [specialist_line(m) for m in matches]),
    )
