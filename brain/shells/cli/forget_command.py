"""Forgetting a person: ``brain forget --entity NAME``."""

from __future__ import annotations

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import EntityType, State, confirm, emit, json_option, pass_state


@cli.command()
@click.option(
    "--entity",
    required=True,
    type=EntityType(),
    help="The entity to forget (scope entity:NAME; Bob and bob are one entity).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_state
def forget(state: State, entity: str, yes: bool) -> None:
    """Forget a person for good: every memory, conversation turn and summary in scope entity:NAME is
    removed from the store and the mirror, and the data directory's files are compacted so that
    none of their text remains. Global memories stay. Asks first (naming what goes), unless --yes;
    an entity with nothing stored is an error before any question. Bob and bob are one entity."""
    from brain.shells.cli.reports import documents_in_words, forget_text

    entities = state.ops(create=False).entities
    going = entities.forget_preview(entity)  # nothing stored: the error comes before the question
    if not yes:
        confirm(f"Forget entity {entity!r}: delete {documents_in_words(going)} in scope entity:{entity} for good?")
    report = entities.forget(entity)
    emit(state, report.to_dict(), lambda: forget_text(report))
