"""The knowledge base and search: ingest, search, turns."""

from __future__ import annotations

from pathlib import Path

import click

from brain.shells.cli.group import cli
from brain.shells.cli.shell import (
    CommandFailed,
    CountType,
    DocTypeChoice,
    EntityType,
    Interrupted,
    State,
    TextType,
    emit,
    hit_line,
    json_option,
    memory_hit_line,
    pass_state,
)
from brain.text.wording import counted

# ---- ingest --------------------------------------------------------------------------------------


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--prune", is_flag=True, help="Remove documents of files that no longer exist under PATHS.")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@json_option
@pass_state
def ingest(state: State, paths: tuple[Path, ...], prune: bool, dry_run: bool) -> None:
    """Add or update knowledge-base files in the store (creating it if needed).

    PATHS are files or directories of them; an unchanged file writes nothing. A file is named by
    its folder's path inside the project (or the folder's own name outside any project) and its
    path in that folder, so the same folder reached from anywhere, by any path, is the same
    knowledge base; documents named by older versions are re-keyed without re-embedding.
    Progress goes to stderr: a bar on a terminal, a line every few seconds otherwise; Ctrl-C stops
    it (exit 130) and running the same command again completes the work without duplicates."""
    from brain.ops.offline import ingest as ingest_files
    from brain.shells.cli.reports import ingest_text

    try:
        report = ingest_files(state.settings(), list(paths), prune=prune, dry_run=dry_run, progress=True)
    except KeyboardInterrupt:
        raise Interrupted("interrupted; run the same command again to complete (nothing is duplicated)") from None
    emit(state, report.to_dict(), lambda: ingest_text(report))
    if not report.ok:  # the report (stdout) lists each error; stderr gets the one line every failure gets
        count = len(report.errors)
        raise CommandFailed(f"ingest found {counted(count, 'error')}; the report lists them")


# ---- search --------------------------------------------------------------------------------------

#: the parts of a memory's score, in the order a search line prints them
MEMORY_SCORE_HEADER = "score = similarity + words in common + importance + recency"


@cli.command()
@click.argument("query", type=TextType())
@click.option(
    "--type",
    "doc_type",
    type=DocTypeChoice(),
    help="memory: ranked as the chat context ranks them (relevance first, the same floor), with score "
    "parts; faq, persona, summary: by similarity; turn or none: any document.",
)
@click.option(
    "--k", type=CountType(), help="How many results (default: the RAG_*_TOP_K setting of the type, 5 otherwise)."
)
@click.option(
    "--entity",
    type=EntityType(),
    help="The documents in scope entity:NAME, and global ones; never another entity's. Bob and bob are one entity.",
)
@click.option(
    "--as-of", help="ISO 8601 time (memories only): rank what was held true then, memories superseded since included."
)
@json_option
@pass_state
def search(
    state: State, query: str, doc_type: str | None, k: int | None, entity: str | None, as_of: str | None
) -> None:
    """Search the store for QUERY."""
    from brain.model.schemas import DocType

    if as_of is not None and doc_type != DocType.MEMORY.value:
        raise click.UsageError("--as-of ranks memories: give --type memory with it")
    hits = state.ops(create=False).documents.search(query, type=doc_type, k=k, entity=entity, as_of=as_of)
    ranked = doc_type == DocType.MEMORY.value
    line = memory_hit_line if ranked else hit_line
    header = MEMORY_SCORE_HEADER if ranked else "similarity"
    empty = "no memory relevant enough (the context's floor)" if ranked else "no results"
    emit(
        state,
        {"query": query, "type": doc_type, "results": [h.to_dict() for h in hits]},
        lambda: "\n".join([header] + [line(h) for h in hits]) if hits else empty,
    )


# ---- turns, schema, stats ------------------------------------------------------------------------


@cli.command()
@click.argument("conversation_id")
@click.option("--k", type=CountType(), help="How many of the last turns (default: RAG_TURN_TOP_K).")
@json_option
@pass_state
def turns(state: State, conversation_id: str, k: int | None) -> None:
    """Show the last turns of CONVERSATION_ID (conv-...), oldest first."""
    from brain.model.errors import NotFound

    try:
        docs = state.ops(create=False).conversations.turns(conversation_id, k=k or state.settings().turn_top_k)
    except NotFound:  # the admin sees every conversation: not found is none recorded
        docs = []
    emit(
        state,
        [d.to_dict() for d in docs],
        lambda: (
            "\n".join(
                f"#{d.metadata.get('turn_index')} {d.metadata.get('role')} {d.metadata.get('timestamp')}  {d.text}"
                for d in docs
            )
            if docs
            else f"no turns in {conversation_id}"
        ),
    )
