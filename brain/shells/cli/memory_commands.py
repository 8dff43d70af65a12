"""Long-term memories: memory add/list/count/show/supersede/history/extract/rm, and consolidate."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from brain.model.errors import NotFound, ValidationError
from brain.shells.cli.group import cli
from brain.shells.cli.shell import (
    CommandFailed,
    EntityType,
    ScopeType,
    State,
    TextType,
    emit,
    json_option,
    memory_line,
    pass_state,
    scope_of,
)

if TYPE_CHECKING:
    from brain.model.results import Document

# ---- memory --------------------------------------------------------------------------------------


@cli.group()
def memory() -> None:
    """Add, list, show and remove long-term memories."""


@memory.command("add")
@click.argument("text", type=TextType())
@click.option("--importance", type=click.IntRange(1, 5), help="1 (trivia) .. 5 (essential); default 3.")
@click.option("--tag", "tags", multiple=True, help="A label; repeat for several.")
@click.option(
    "--entity",
    type=EntityType(),
    help="Whose memory it is: stored in scope entity:NAME (the same as --scope entity:NAME). Names are "
    "case-insensitive: Bob and bob are one entity.",
)
@click.option(
    "--scope", type=ScopeType(), help="'global' (default: every entity sees it) or 'entity:<name>' (only that entity)."
)
@click.option("--expires-at", help="ISO 8601 time at which the memory stops being ranked (it is kept).")
@json_option
@pass_state
def memory_add(
    state: State,
    text: str,
    importance: int | None,
    tags: tuple[str, ...],
    entity: str | None,
    scope: str | None,
    expires_at: str | None,
) -> None:
    """Store TEXT as a memory; the same text in the same scope updates the existing one
    (higher importance, all tags, later time)."""
    scope = scope_of(entity, scope)  # a usage error before the store is opened (or created)
    try:
        doc = state.ops().memories.add(
            text, scope=scope, importance=importance or 3, tags=list(tags), expires_at=expires_at
        )
    except ValidationError as exc:  # the text or the tags break a limit: the arguments are wrong
        raise click.UsageError(str(exc)) from None
    emit(state, doc.to_dict(), lambda: f"stored {memory_line(doc)}")


@memory.command("list")
@click.option(
    "--entity",
    type=EntityType(),
    help="The memories for entity NAME: its own (scope entity:NAME) and the global ones, which every "
    "entity shares (their scope column says global). Bob and bob are one entity.",
)
@click.option("--scope", type=ScopeType(), help="Only the memories in exactly this scope: 'global' or 'entity:<name>'.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag; repeat for several (all must match).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many.")
@click.option(
    "--history", is_flag=True, help="Also the memories no longer current: superseded, retracted and archived ones."
)
@json_option
@pass_state
def memory_list(
    state: State, entity: str | None, scope: str | None, tags: tuple[str, ...], limit: int | None, history: bool
) -> None:
    """List the current memories with their scope and status: all of them, those for one entity (--entity: its
    own and the global ones), or those of exactly one scope (--scope); --history adds the replaced ones."""
    if entity is not None and scope is not None:
        raise click.UsageError(
            f"--entity {entity} lists {entity}'s memories and the global ones, --scope {scope} "
            "exactly that scope: give one of them"
        )
    docs = state.ops(create=False).memories.list(
        entity=entity, scope=scope, tags=list(tags), limit=limit, history=history
    )
    emit(state, [d.to_dict() for d in docs], lambda: "\n".join(memory_line(d) for d in docs) if docs else "no memories")


@memory.command("count")
@click.option(
    "--entity",
    type=EntityType(),
    help="The memories for entity NAME: its own and the global ones, as `memory list --entity` lists them.",
)
@click.option("--scope", type=ScopeType(), help="Only the memories in exactly this scope: 'global' or 'entity:<name>'.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag; repeat for several (all must match).")
@click.option(
    "--history", is_flag=True, help="Also the memories no longer current: superseded, retracted and archived ones."
)
@json_option
@pass_state
def memory_count(state: State, entity: str | None, scope: str | None, tags: tuple[str, ...], history: bool) -> None:
    """How many memories `memory list` would list with the same options, without listing them."""
    if entity is not None and scope is not None:
        raise click.UsageError(f"--entity {entity} and --scope {scope} count different memories: give one of them")
    count = state.ops(create=False).memories.count(entity=entity, scope=scope, tags=list(tags), history=history)
    emit(state, {"count": count}, lambda: f"{count} {'memory' if count == 1 else 'memories'}")


@memory.command("show")
@click.argument("doc_id", metavar="ID")
@json_option
@pass_state
def memory_show(state: State, doc_id: str) -> None:
    """Show one memory with all its metadata."""
    try:
        doc = state.ops(create=False).memories.get(doc_id)
    except NotFound:
        raise NotFound(f"no memory with id {doc_id!r}; `brain memory list` shows the ids") from None
    emit(
        state,
        doc.to_dict(),
        lambda: "\n".join(
            [f"id: {doc.id}", f"text: {doc.text}"] + [f"{key}: {value}" for key, value in sorted(doc.metadata.items())]
        ),
    )


@memory.command("supersede")
@click.argument("doc_id", metavar="ID")
@click.argument("text", type=TextType())
@click.option(
    "--kind",
    type=click.Choice(["update", "contradict"]),
    default="update",
    show_default=True,
    help="update: the fact changed (moved to Berlin); contradict: the old memory was wrong.",
)
@click.option(
    "--at", help="ISO 8601 time of the change (the old memory's valid_until, the new one's valid_from); now by default."
)
@click.option(
    "--importance", type=click.IntRange(1, 5), help="1 (trivia) .. 5 (essential); the old memory's by default."
)
@click.option("--tag", "tags", multiple=True, help="A label; repeat for several (the old memory's by default).")
@click.option("--expires-at", help="ISO 8601 time at which the new memory stops being ranked.")
@click.option(
    "--entity",
    type=EntityType(),
    help="Supersede only entity NAME's own memory: another entity's is not found, a global one refused.",
)
@json_option
@pass_state
def memory_supersede(
    state: State,
    doc_id: str,
    text: str,
    kind: str,
    at: str | None,
    importance: int | None,
    tags: tuple[str, ...],
    expires_at: str | None,
    entity: str | None,
) -> None:
    """Replace memory ID with TEXT, keeping ID as history: ID becomes superseded (kept, no longer ranked,
    still answered for a time before the change) and the new memory, in the same scope, points back to it."""
    done = state.ops(create=False).memories.supersede(
        doc_id,
        text,
        kind=kind,
        at=at,
        importance=importance,
        tags=list(tags) or None,
        expires_at=expires_at,
        entity=entity,
    )
    emit(state, done.to_dict(), lambda: f"superseded {done.old.id} ({kind})\nnow {memory_line(done.new)}")


@memory.command("history")
@click.argument("doc_id", metavar="ID")
@click.option("--entity", type=EntityType(), help="Only when entity NAME may see the memory (its own or a global one).")
@json_option
@pass_state
def memory_history(state: State, doc_id: str, entity: str | None) -> None:
    """Show the history of memory ID: every memory of its chain of changes, oldest first, with the time each
    held from and until; the last one without an end is current."""
    chain = state.ops(create=False).memories.history(doc_id, entity=entity)
    emit(state, [d.to_dict() for d in chain], lambda: "\n".join(history_line(d) for d in chain))


def history_line(doc: Document) -> str:
    m = doc.metadata
    since = m.get("valid_from") or m.get("created_at") or m.get("timestamp")
    until = m.get("valid_until") or ("now" if m.get("status") != "superseded" else "?")
    change = f"  ({m['change']})" if m.get("change") else ""
    return f"{since} .. {until}{change}  {memory_line(doc)}"


@memory.command("extract")
@click.option(
    "--conversation",
    "conversation_id",
    metavar="ID",
    help="Only this conversation (conv-...); without it, every conversation.",
)
@click.option("--again", is_flag=True, help="Also re-run the windows whose memories were formed already.")
@json_option
@pass_state
def memory_extract(state: State, conversation_id: str | None, again: bool) -> None:
    """Form memories from conversations now: every window whose formation is pending or failed (with
    --again, every window) goes to the formation model (BRAIN_FORMATION_MODEL) and its facts are stored,
    changed or merged. Prints what each batch did, its tokens and time; exits 1 when a batch failed again
    (the report says why; the batch stays failed, to be re-run)."""
    from brain.shells.cli.reports import formation_text
    from brain.text.wording import counted

    if conversation_id is not None:
        from brain.model.schemas import check_conversation_id

        try:
            conversation_id = check_conversation_id(conversation_id)
        except ValueError as exc:
            raise click.UsageError(f"--conversation: {exc}") from None
    ops = state.ops(create=False)
    if conversation_id is not None:
        try:
            ops.conversations.turns(conversation_id, k=1)
        except NotFound:
            raise NotFound(
                f"no conversation {conversation_id!r} is stored (`brain turns {conversation_id}` shows its "
                f"turns when there is one)"
            ) from None
    report = ops.conversations.extract(conversation_id, again=again)
    emit(state, report.to_dict(), lambda: formation_text(report))
    if report.failed or report.waiting:
        raise CommandFailed(
            f"{counted(report.failed + report.waiting, 'batch')} not formed; re-run `brain memory extract"
            f"{f' --conversation {conversation_id}' if conversation_id else ''}` once the model "
            f"answers"
        )


@memory.command("rm")
@click.argument("doc_ids", nargs=-1, required=True, metavar="ID...")
@click.option(
    "--entity",
    type=EntityType(),
    help="Remove only entity NAME's own memories: a global id is refused (nothing is removed) and "
    "another entity's is not found.",
)
@json_option
@pass_state
def memory_rm(state: State, doc_ids: tuple[str, ...], entity: str | None) -> None:
    """Remove memories by id; ids that are not memories are reported (exit 1) and left alone."""
    from brain.shells.cli.reports import MemoryRemoval, removal_text

    memories = state.ops(create=False).memories
    report = MemoryRemoval()
    found = []
    for doc_id in dict.fromkeys(doc_ids):
        try:
            found.append(memories.get(doc_id, entity=entity).id)
        except NotFound:  # not a memory, or another entity's: reported, left alone
            report.not_found.append(doc_id)
    if found:  # all or none: a global id with --entity refuses the lot before anything is deleted
        report.removed = memories.delete(found, entity=entity)
    emit(state, report.to_dict(), lambda: removal_text(report))
    if not report.ok:  # the report (stdout) lists what was removed; stderr names the ids that were not
        raise report.error()


# ---- memory consolidation ------------------------------------------------------------------------


@cli.command()
@click.option("--dry-run", is_flag=True, help="Only report what would be merged.")
@click.option(
    "--threshold",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="Cosine similarity above which two memories of one scope merge (default BRAIN_CONSOLIDATE_THRESHOLD).",
)
@json_option
@pass_state
def consolidate(state: State, dry_run: bool, threshold: float | None) -> None:
    """Merge near-duplicate memories of the same scope; lists every merge."""
    from brain.shells.cli.reports import consolidation_text

    report = state.ops(create=False).maintenance.consolidate(dry_run=dry_run, threshold=threshold)
    emit(state, report.to_dict(), lambda: consolidation_text(report))
