"""Forgetting a person: ``brain forget --entity NAME``."""

from __future__ import annotations

import click

from brain.cli.group import cli
from brain.cli.shell import EntityType, State, emit, json_option, pass_state


@cli.command()
@click.option("--entity", required=True, type=EntityType(), help="The entity to forget (scope entity:NAME).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_state
def forget(state: State, entity: str, yes: bool) -> None:
    """Forget a person for good: every memory, conversation turn and summary in scope entity:NAME is
    removed from the store and the mirror, and the data directory's files are compacted so that
    none of their text remains. Global memories stay. Asks first, unless --yes."""
    if not yes:  # the question goes to stderr: with --json, stdout holds the report alone
        click.confirm(f"Forget entity {entity!r}: delete every document in scope entity:{entity} for good?",
                      abort=True, err=True)
    report = state.brain(create=False).forget_entity(entity)
    emit(state, report.to_dict(), report.summary)
