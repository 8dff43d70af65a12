"""Portable AI Memory: export and import."""

from __future__ import annotations

from pathlib import Path

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import EntityType, State, emit, json_option, pass_state

# ---- Portable AI Memory --------------------------------------------------------------------------


@cli.command("export")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["pam"]), default="pam", show_default=True, help="Portable AI Memory 1.0."
)
@click.option("--no-embeddings", is_flag=True, help="Write no embeddings.json (every embedding_ref is null).")
@click.option("--no-conversations", is_flag=True, help="Write no conversations/ (turns and summaries).")
@click.option("--owner", help="owner.id of the export (default: BRAIN_OWNER_ID, else derived from the store).")
@click.option(
    "--force",
    is_flag=True,
    help="Export into a non-empty directory that holds no brain export (files of the same name are "
    "overwritten; nothing is deleted).",
)
@click.option(
    "--entity",
    type=EntityType(),
    help="Export for entity NAME only: global memories and its own, and its own conversations.",
)
@json_option
@pass_state
def export_cmd(
    state: State,
    out_dir: Path,
    fmt: str,
    no_embeddings: bool,
    no_conversations: bool,
    owner: str | None,
    force: bool,
    entity: str | None,
) -> None:
    """Export the store to OUT_DIR: memory-store.json, embeddings.json and conversations/<id>.json.

    OUT_DIR must be new, empty or a previous brain export (replaced file for file; the files it no
    longer needs are removed and listed), unless --force."""
    from brain.shells.cli.reports import export_text

    report = state.ops(create=False).maintenance.export(
        out_dir,
        embeddings=not no_embeddings,
        conversations=not no_conversations,
        owner_id=owner,
        force=force,
        entity=entity,
    )
    emit(state, report.to_dict(), lambda: export_text(report))


@cli.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--include-forgotten",
    is_flag=True,
    help="Also import the documents of entities forgotten here (`brain forget`); without it they are skipped "
    "and counted. Those entities are then no longer recorded as forgotten.",
)
@json_option
@pass_state
def import_cmd(state: State, path: Path, include_forgotten: bool) -> None:
    """Import a PAM export (its directory or memory-store.json); validated whole first. The documents of a
    person forgotten here since the export was made are not brought back unless --include-forgotten."""
    from brain.shells.cli.reports import import_text

    report = state.ops().maintenance.import_pam(path, include_forgotten=include_forgotten)
    emit(state, report.to_dict(), lambda: import_text(report))
