"""brain reindex: switch the store to another embedding model (blue/green), roll back, drop old collections."""

from __future__ import annotations

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import State, emit, json_option, pass_state


@cli.command()
@click.option(
    "--embedder",
    "embedder_name",
    metavar="PROVIDER/MODEL",
    help="The model to re-index for, e.g. ollama/nomic-embed-text (default: BRAIN_EMBEDDER).",
)
@click.option(
    "--dry-run", is_flag=True, help="Say how many documents would be embedded and vectors reused; write nothing."
)
@click.option("--rollback", is_flag=True, help="Make the collection served before the last re-index live again.")
@click.option("--drop-old", is_flag=True, help="Delete every collection but the live one (no roll-back after).")
@click.option("--keep", type=click.IntRange(min=0), help="Delete the old collections but the KEEP newest.")
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=256,
    show_default=True,
    help="Documents embedded and written per step.",
)
@json_option
@pass_state
def reindex(
    state: State, embedder_name: str | None, dry_run: bool, rollback: bool, drop_old: bool, keep: int | None, batch: int
) -> None:
    """Re-embed every document with another model in a new collection, then swap to it.

    The live collection keeps serving meanwhile and is kept after the swap (--rollback goes back;
    --drop-old or --keep N deletes it). An interrupted run (Ctrl-C, kill, the embedder down) is
    resumed by running the same command again: nothing done is embedded twice."""
    from brain.ops.offline import reindex as run_reindex
    from brain.ops.values import DropReport, ReindexPlan
    from brain.shells.cli.reports import drop_text, plan_text, reindex_text

    if sum(map(bool, (rollback, drop_old, keep is not None))) > 1:
        raise click.UsageError("give one of --rollback, --drop-old and --keep")
    if (rollback or drop_old or keep is not None) and (embedder_name or dry_run):
        raise click.UsageError("--embedder and --dry-run go with a re-index, not with --rollback, --drop-old or --keep")
    report = run_reindex(
        state.settings(),
        embedder_name=embedder_name,
        dry_run=dry_run,
        rollback=rollback,
        drop_old=drop_old,
        keep=keep,
        batch=batch,
    )
    if isinstance(report, DropReport):
        emit(state, report.to_dict(), lambda: drop_text(report))
    elif isinstance(report, ReindexPlan):
        emit(state, report.to_dict(), lambda: plan_text(report))
    else:
        emit(state, report.to_dict(), lambda: reindex_text(report))
