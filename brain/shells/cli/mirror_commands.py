"""The Engram mirror (mirror sync/verify/recall/rebuild/backfill) and restoring the store from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import CommandFailed, State, emit, json_option, pass_state, short

# ---- the Engram mirror ---------------------------------------------------------------------------


@cli.group()
def mirror() -> None:
    """The Engram-compatible SQLite mirror of memories and conversations (BRAIN_MIRROR_PATH, BRAIN_MIRROR_TYPES)."""


@mirror.command("sync")
@click.option(
    "--force",
    is_flag=True,
    help="The store is right even though it looks lost, much smaller than the mirror, created again or "
    "half restored: delete the mirror's rows it lacks.",
)
@json_option
@pass_state
def mirror_sync(state: State, force: bool) -> None:
    """Make the mirror match the store in full (safe to repeat).

    A store that looks lost (empty, much smaller than the mirror, created again, or a restore into it
    unfinished) is refused: nothing is deleted, and `brain restore --from-mirror` brings it back."""
    report = state.ops().maintenance.sync_mirror(force=force)
    emit(state, report.to_dict(), report.summary)


@mirror.command("verify")
@json_option
@pass_state
def mirror_verify(state: State) -> None:
    """Report every difference between the store and the mirror (exit 1 if any)."""
    from brain.shells.cli.reports import verify_text

    report = state.ops(create=False).maintenance.verify_mirror()
    emit(state, report.to_dict(), lambda: verify_text(report))
    if not report.ok:
        raise CommandFailed("the mirror differs from the store; `brain mirror sync` reconciles them")


@mirror.command("recall")
@click.argument("query")
@click.option("--k", type=click.IntRange(1, 1000), default=5, show_default=True, help="How many results.")
@click.option(
    "--keyword",
    is_flag=True,
    help="Full-text search (FTS5, stemmed words, ranked by BM25) instead of the stored vectors.",
)
@json_option
@pass_state
def mirror_recall(state: State, query: str, k: int, keyword: bool) -> None:
    """Search the mirror alone (Chroma is not opened)."""
    from brain.ops.offline import recall_mirror

    hits = recall_mirror(state.settings(), query, k, keyword=keyword)
    emit(
        state,
        {"query": query, "keyword": keyword, "results": [h.to_dict() for h in hits]},
        lambda: "\n".join(_mirror_hit_line(h) for h in hits) if hits else "no results",
    )


def _mirror_hit_line(hit: Any) -> str:
    """A keyword hit shows its BM25 relevance, a vector hit its cosine similarity: two different scales."""
    from brain.ops.values import KeywordHit

    value = f"bm25 {hit.bm25:.3f}" if isinstance(hit, KeywordHit) else f"cosine {hit.similarity:.3f}"
    m = hit.metadata
    label = m.get("conversation_id") or m.get("scope") or ""
    return f"{value}  {m.get('type')}  [{label}]  {hit.id}  {short(hit.text)}"


@mirror.command("rebuild")
@click.option("--force", is_flag=True, help="Rebuild even when the store holds none of the mirrored types.")
@json_option
@pass_state
def mirror_rebuild(state: State, force: bool) -> None:
    """Move the mirror file aside (kept, timestamped) and rebuild it from the store, with the store's vectors.

    The repair for a damaged mirror; nothing is embedded. Rows engram wrote itself are copied over
    from the old file when it can still be read."""
    from brain.ops.offline import rebuild_mirror
    from brain.shells.cli.reports import rebuild_text

    report = rebuild_mirror(state.settings(), force=force)
    emit(state, report.to_dict(), lambda: rebuild_text(report))


@mirror.command("backfill")
@json_option
@pass_state
def mirror_backfill(state: State) -> None:
    """Embed the mirrored documents that have no vector of the configured model (resumable)."""
    from brain.shells.cli.reports import backfill_text

    report = state.ops().maintenance.backfill_mirror()
    emit(state, report.to_dict(), lambda: backfill_text(report))


@cli.command()
@click.option(
    "--from-mirror",
    "from_mirror",
    is_flag=True,
    required=True,
    help="Rebuild the Chroma collection from the mirror (the only source for now).",
)
@click.option(
    "--persona",
    "persona_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The persona file to reload (default BRAIN_PERSONA_PATH).",
)
@click.option(
    "--kb",
    "kb_paths",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A knowledge-base file or folder to ingest again (the FAQ is not in the mirror); repeatable.",
)
@json_option
@pass_state
def restore(state: State, from_mirror: bool, persona_path: Path | None, kb_paths: tuple[Path, ...]) -> None:
    """Rebuild the store from the mirror (memories, turns, summaries: every mirrored document, with
    its stored vector) and from the files (the persona; the FAQ with --kb).

    For a lost or broken Chroma store: move the broken BRAIN_DATA_DIR/chroma aside first. The report
    lists what could not be restored and what to do about it."""
    from brain.ops.offline import restore as restore_store
    from brain.shells.cli.reports import recovery_text

    report = restore_store(state.settings(), persona_path=persona_path, kb_paths=kb_paths)
    emit(state, report.to_dict(), lambda: recovery_text(report))
