"""Setting up and looking around: init, persona, stats, health, paths, schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import CommandFailed, DocTypeChoice, State, emit, json_option, pass_state


@cli.command()
@click.option(
    "--persona",
    "persona_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The persona file (default: BRAIN_PERSONA_PATH, persona.md).",
)
@json_option
@pass_state
def init(state: State, persona_path: Path | None) -> None:
    """Create the store (or open it) and load the persona."""
    from brain.ops.offline import initialise
    from brain.shells.cli.reports import startup_text

    report = initialise(state.settings(), persona_path=persona_path)
    emit(state, report.to_dict(), lambda: startup_text(report))


# ---- persona -------------------------------------------------------------------------------------


@cli.group()
def persona() -> None:
    """Load and show the assistant's persona."""


@persona.command("load")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@json_option
@pass_state
def persona_load(state: State, path: Path | None) -> None:
    """Load PATH (default: BRAIN_PERSONA_PATH) as the persona; an unchanged file writes nothing."""
    path = path or state.settings().persona_path
    loaded = state.ops().knowledge.load_persona(path)
    emit(state, loaded.to_dict(), loaded.summary)


@persona.command("show")
@click.option("--max-chars", type=click.IntRange(min=1), help="Cut the block to this many characters.")
@json_option
@pass_state
def persona_show(state: State, max_chars: int | None) -> None:
    """Print the persona block a prompt gets."""
    block = state.ops(create=False).knowledge.persona_block(max_chars=max_chars)
    if not block and not state.json:
        click.echo("no persona loaded; run `brain persona load`", err=True)
    emit(state, {"text": block}, lambda: block)


@cli.command()
@click.argument("doc_type", required=False, metavar="[DOC_TYPE]", type=DocTypeChoice())
@json_option
@pass_state
def schema(state: State, doc_type: str | None) -> None:
    """Describe the metadata of a document type.

    DOC_TYPE is persona, faq, memory, turn or summary; without it, every type."""
    from brain.model.schemas import DOC_TYPES, get_all_schemas, schema_info

    if doc_type is not None:
        info = schema_info(doc_type)
        emit(state, info, lambda: _schema_text(info))
    else:
        emit(state, get_all_schemas(), lambda: "\n\n".join(_schema_text(schema_info(t)) for t in DOC_TYPES))


def _schema_text(info: dict[str, Any]) -> str:
    lines = [f"{info['document_type']}:"]
    for name, field in info["fields"].items():
        kind = field["type"] if isinstance(field["type"], str) else "|".join(field["type"]) or "-"
        flag = (
            "required"
            if field["required"]
            else (f"default {json.dumps(field['default'])}" if "default" in field else "optional")
        )
        lines.append(f"  {name:<18} {kind:<16} {flag:<20} {field['description']}")
    return "\n".join(lines)


@cli.command()
@json_option
@pass_state
def stats(state: State) -> None:
    """Documents per type, the embedder, the size on disk, and memory formation's batches (pending,
    failed, done) with the model's tokens and seconds summed over them.

    The size on disk is reported for the embedded store only (null with BRAIN_CHROMA_URL)."""
    from brain.shells.cli.reports import formation_totals_line, index_line

    data = state.ops(create=False).maintenance.stats()
    emit(
        state,
        data,
        lambda: "\n".join(
            [
                f"collection  {data['collection']} ({data['backend']})"
                + (f", served by {data['live_collection']}" if data["live_collection"] != data["collection"] else ""),
                f"embedder    {data['embedder']} ({data['dimension']}-d)",
                f"documents   {data['documents']}",
            ]
            + [f"  {t:<9} {n}" for t, n in data["by_type"].items()]
            + ([f"on disk     {_human_bytes(data['disk_bytes'])}"] if data["disk_bytes"] is not None else [])
            + [f"formation   {formation_totals_line(data['formation'])}"]
            + [f"index       {index_line(data.get('index'))}"]
        ),
    )


@cli.command()
@click.option("--verify", is_flag=True, help="Also compare the mirror with the store (reads both whole).")
@json_option
@pass_state
def health(state: State, verify: bool) -> None:
    """Whether each part works: the store, the embedder, the summariser, memory formation (on or off and
    why, its pending and failed batches), the persona, the mirror and the disk, and the overall status
    (ok, degraded or unavailable, as GET /v1/health says it). Exits 1 when the store is unavailable."""
    from brain.shells.cli.reports import health_text

    report = state.ops(create=False).maintenance.health(detail=True, verify=verify)
    emit(state, report, lambda: health_text(report))
    if report["status"] == "unavailable":
        raise CommandFailed(f"the store is unavailable: {report['store'].get('error', 'no answer')}")


@cli.command()
@json_option
@pass_state
def paths(state: State) -> None:
    """Where brain looks: the project, the env files, the data directory, the persona and the
    specialists file, each with where its value came from, and whether a store is there."""
    data = state.settings().describe_paths()
    emit(
        state,
        data,
        lambda: "\n".join(
            [
                f"project      {data['found']}",
                "env files    "
                + (", ".join(f"{f['path']}{'' if f['exists'] else ' (absent)'}" for f in data["env_files"]) or "none"),
            ]
            + [
                f"{label:<12} {data[key]['path']}{'' if data[key]['exists'] else ' (absent)'}  from {data[key]['from']}"
                for key, label in (
                    ("data_dir", "data dir"),
                    ("persona_path", "persona"),
                    ("specialists_path", "specialists"),
                    ("mirror_file", "mirror"),
                )
            ]
            + [f"store        {_store_line(data)}"]
        ),
    )


def _store_line(data: dict[str, object]) -> str:
    if data["chroma_url"]:
        return f"a Chroma server: {data['chroma_url']}"
    return "yes" if data["store"] else "none yet (brain init creates it)"


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
