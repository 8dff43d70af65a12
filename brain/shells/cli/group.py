"""The ``brain`` group: its options, its help (where settings come from), and the console script."""

from __future__ import annotations

from pathlib import Path

import click

from brain.model.version import __version__
from brain.shells.cli.shell import BrainGroup, State

# ---- the group -----------------------------------------------------------------------------------


@click.group(name="brain", cls=BrainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout instead of text.")
@click.option("--debug", is_flag=True, help="Show the traceback of a failure instead of one line.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the embedded store lives (overrides BRAIN_DATA_DIR).",
)
@click.option(
    "--project",
    "project_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The project folder whose config/defaults.env and .env are read (overrides BRAIN_PROJECT_DIR "
    "and the search upward from the working directory).",
)
@click.version_option(__version__, prog_name="brain")
@click.pass_context
def cli(ctx: click.Context, as_json: bool, debug: bool, data_dir: Path | None, project_dir: Path | None) -> None:
    """The memory layer of a chat assistant: one Chroma collection of typed documents.

    \b
    Settings, highest first:
      1. options: --data-dir, --project, init --persona
      2. the environment: BRAIN_DATA_DIR, BRAIN_PERSONA_PATH, RAG_*, ...
      3. the project's .env, then its config/defaults.env
      4. built-in defaults: the project's data/, persona.md and
         config/specialists.yaml

    The project is --project or BRAIN_PROJECT_DIR, else the nearest folder at or above the
    working directory that holds config/defaults.env. Without one: ~/.config/brain (.env,
    persona.md, specialists.yaml and its specialists_examples.jsonl) and ~/.local/share/brain
    (the data), or the XDG_CONFIG_HOME
    and XDG_DATA_HOME equivalents. Relative paths in options and the environment are relative
    to the working directory; in env files, to the project. `brain paths` shows what was found.

    Read-only commands (stats, search, memory list/show, turns, persona show, export, mirror
    recall/verify) never create a store: `brain init` or `brain ingest` does. Exit codes: 0
    success, 1 failure, 2 usage error.
    """
    state = ctx.ensure_object(State)
    state.json = state.json or as_json
    state.debug = debug
    state.data_dir = data_dir
    state.project_dir = project_dir
    ctx.call_on_close(state.close)


def main() -> None:
    """The console script: run the group, exit with its code."""
    cli.main(prog_name="brain")
