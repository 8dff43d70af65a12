"""The in-process indexes: index snapshot."""

from __future__ import annotations

from brain.shells.cli.group import cli
from brain.shells.cli.shell import CommandFailed, State, emit, json_option, pass_state


@cli.group()
def index() -> None:
    """The in-process ranking indexes (BRAIN_INDEX_TYPES) and their snapshot (BRAIN_INDEX_SNAPSHOT_PATH)."""


@index.command("snapshot")
@json_option
@pass_state
def index_snapshot(state: State) -> None:
    """Save the indexes to the index snapshot, which the next start loads instead of reading the
    whole collection (stores also save it when they close)."""
    from brain.ops.offline import save_index_snapshot

    path, sizes = save_index_snapshot(state.settings())
    if path is None:
        raise CommandFailed("index snapshots are off (BRAIN_INDEX_SNAPSHOT=false); set it to true to save one")
    emit(
        state,
        {"path": str(path), "indexes": sizes},
        lambda: f"saved {sum(sizes.values()):,} indexed documents to {path}",
    )
