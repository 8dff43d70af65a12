"""Long-term memories: memory add/list/show/rm, and consolidate."""

from __future__ import annotations

from typing import Any

import click

from brain.cli.group import cli
from brain.cli.shell import EntityType, ScopeType, State, emit, json_option, memory_line, pass_state, scope_of
from brain.errors import NotFound
from brain.schemas import DocType

# ---- memory --------------------------------------------------------------------------------------

@cli.group()
def memory() -> None:
    """Add, list, show and remove long-term memories."""


@memory.command("add")
@click.argument("text")
@click.option("--importance", type=click.IntRange(1, 5), help="1 (trivia) .. 5 (essential); default 3.")
@click.option("--tag", "tags", multiple=True, help="A label; repeat for several.")
@click.option("--entity", type=EntityType(),
              help="Whose memory it is: stored in scope entity:NAME (the same as --scope entity:NAME).")
@click.option("--scope", type=ScopeType(),
              help="'global' (default: every entity sees it) or 'entity:<name>' (only that entity).")
@json_option
@pass_state
def memory_add(state: State, text: str, importance: int | None, tags: tuple[str, ...], entity: str | None,
               scope: str | None) -> None:
    """Store TEXT as a memory; the same text in the same scope updates the existing one
    (higher importance, all tags, later time)."""
    scope = scope_of(entity, scope)
    store = state.store()
    given = {key: value for key, value in {"scope": scope, "importance": importance}.items() if value is not None}
    doc_id = store.upsert_memory(text, tags=list(tags), **given)
    doc = store.get_one(doc_id)
    emit(state, doc.to_dict(), lambda: f"stored {memory_line(doc)}")


@memory.command("list")
@click.option("--entity", type=EntityType(),
              help="Only the memories in scope entity:NAME (global ones are not included; see --scope global).")
@click.option("--scope", type=ScopeType(), help="Only the memories in this scope: 'global' or 'entity:<name>'.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag; repeat for several (all must match).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many.")
@json_option
@pass_state
def memory_list(state: State, entity: str | None, scope: str | None, tags: tuple[str, ...], limit: int | None) -> None:
    """List stored memories: all of them, or those of one scope (--entity NAME is --scope entity:NAME)."""
    scope = scope_of(entity, scope)
    where: dict[str, Any] = {}
    if scope is not None:
        where["scope"] = scope
    if tags:
        where["tags"] = list(tags)
    docs = state.store(create=False).get(type=DocType.MEMORY, where=where or None, limit=limit)
    emit(state, [d.to_dict() for d in docs],
         lambda: "\n".join(memory_line(d) for d in docs) if docs else "no memories")


@memory.command("show")
@click.argument("doc_id", metavar="ID")
@json_option
@pass_state
def memory_show(state: State, doc_id: str) -> None:
    """Show one memory with all its metadata."""
    docs = state.store(create=False).get([doc_id], type=DocType.MEMORY)
    if not docs:
        raise NotFound(f"no memory with id {doc_id!r}; `brain memory list` shows the ids")
    doc = docs[0]
    emit(state, doc.to_dict(), lambda: "\n".join(
        [f"id: {doc.id}", f"text: {doc.text}"] + [f"{key}: {value}" for key, value in sorted(doc.metadata.items())]
    ))


@memory.command("rm")
@click.argument("doc_ids", nargs=-1, required=True, metavar="ID...")
@json_option
@pass_state
def memory_rm(state: State, doc_ids: tuple[str, ...]) -> None:
    """Remove memories by id; ids that are not memories are reported (exit 1) and left alone."""
    store = state.store(create=False)
    found = [d.id for d in store.get(list(doc_ids), type=DocType.MEMORY)]
    if found:
        store.delete(found, type=DocType.MEMORY)
    missing = [i for i in dict.fromkeys(doc_ids) if i not in set(found)]
    emit(state, {"removed": found, "not_found": missing},
         lambda: "\n".join(f"removed {i}" for i in found))
    if missing:
        raise NotFound(f"no memory with id {', '.join(repr(i) for i in missing)}")


# ---- memory consolidation ------------------------------------------------------------------------

@cli.command()
@click.option("--dry-run", is_flag=True, help="Only report what would be merged.")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0, min_open=True),
              help="Cosine similarity above which two memories of one scope merge (default BRAIN_CONSOLIDATE_THRESHOLD).")
@json_option
@pass_state
def consolidate(state: State, dry_run: bool, threshold: float | None) -> None:
    """Merge near-duplicate memories of the same scope; lists every merge."""
    report = state.brain(create=False).consolidate(dry_run=dry_run, threshold=threshold)
    emit(state, report.to_dict(), report.summary)
