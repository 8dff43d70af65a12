"""The ``brain`` command: a thin shell over the library.

Every command parses its options, calls one library function and prints the result, as text
for people or, with ``--json`` (on the group or on the command), as exactly one JSON document
on stdout. Exit codes: 0 success, 1 a reported failure (any :class:`~brain.errors.BrainError`,
an ingest report with errors, an unknown memory id), 2 a usage error (an option or argument
missing, of the wrong type or out of range: ``--k 0``, ``--importance 9``, a malformed
``--scope`` or ``--entity``, an unknown document type), 130 an ``ingest`` stopped with Ctrl-C.
Each command works on one :class:`~brain.core.Brain` (:func:`brain.open`), closed when it ends.
Read-only commands open the store with ``create=False``: where there is none they say so and exit 1 instead of creating one. Errors
are one line on stderr starting with ``error:`` and leave stdout empty, except that ``ingest``
and ``memory rm`` print their report before failing; ``brain --debug ...`` shows the traceback
of a failure instead.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from brain import __version__
from brain.config import Settings, load_settings
from brain.core import Brain
from brain.core import open as open_brain
from brain.errors import BrainError, NotFound, StoreNotFound
from brain.schemas import DOC_TYPES, DocType, check_scope, entity_scope, get_all_schemas, schema_info
from brain.store import RagStore

#: the largest --k of a search (the store's own bound)
MAX_K = 1000


class CommandFailed(click.ClickException):
    """A reported failure: one ``error: ...`` line on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class Interrupted(CommandFailed):
    """Ctrl-C during a command whose work a re-run completes: exit code 130, as a shell reports SIGINT."""

    exit_code = 130


def _one_line(message: str) -> str:
    return " ".join(message.split())


class BrainGroup(click.Group):
    """Turns library errors into one-line messages (unless ``--debug``) and formats usage errors
    as one line too, keeping click's exit codes (2 for usage errors)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrainError as exc:
            if ctx.params.get("debug"):
                raise
            raise CommandFailed(_one_line(str(exc))) from exc

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `brain`: the help text, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            click.echo(f"error: {_one_line(exc.format_message())}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@dataclass
class State:
    """What the group's options decide, and the settings and Brain opened on first use (closed when
    the command ends)."""

    json: bool = False
    debug: bool = False
    data_dir: Path | None = None
    project_dir: Path | None = None
    _settings: Settings | None = None
    _brain: Brain | None = None

    def settings(self) -> Settings:
        if self._settings is None:
            overrides = {"data_dir": self.data_dir} if self.data_dir is not None else {}
            self._settings = load_settings(self.project_dir, **overrides)
        return self._settings

    def brain(self, *, create: bool = True) -> Brain:
        """The Brain; with ``create=False`` (read-only commands) a missing store is an error, not made.
        No command keeps a chat layer running: no summary worker is started."""
        if self._brain is None:
            self._brain = open_brain(self.settings(), create=create, start_worker=False)
        return self._brain

    def store(self, *, create: bool = True) -> RagStore:
        return self.brain(create=create).store

    def close(self) -> None:
        if self._brain is not None:
            self._brain.close()
            self._brain = None


class ScopeType(click.ParamType):
    """A memory scope, 'global' or 'entity:<name>', checked by the library's rule."""

    name = "scope"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_scope(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class EntityType(click.ParamType):
    """An entity name; ``--entity NAME`` means the scope ``entity:NAME`` in every command."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            entity_scope(value)
        except ValueError as exc:
            self.fail(f"{exc} (an entity name must be non-empty, without leading or trailing spaces)", param, ctx)
        return value


def _scope_of(entity: str | None, scope: str | None) -> str | None:
    """The one scope ``--entity`` and ``--scope`` ask for (None: neither); both, disagreeing, is a usage error."""
    if entity is None:
        return scope
    wanted = entity_scope(entity)
    if scope is not None and scope != wanted:
        raise click.UsageError(f"--entity {entity} means --scope {wanted}, not --scope {scope}; give one of them")
    return wanted


pass_state = click.make_pass_decorator(State, ensure=True)


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).json = True


def json_option(command: Callable) -> Callable:
    """``--json`` on a command, the same as ``brain --json <command>``."""
    return click.option(
        "--json", is_flag=True, expose_value=False, callback=_set_json,
        help="Print one JSON document on stdout instead of text.",
    )(command)


def emit(state: State, data: Any, text: Callable[[], str]) -> None:
    """One JSON document, or the text for people."""
    if state.json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        out = text()
        if out:
            click.echo(out)


def _short(text: str, width: int = 100) -> str:
    line = _one_line(text)
    return line if len(line) <= width else line[: width - 1] + "…"


def _memory_line(doc: Any) -> str:
    m = doc.metadata
    tags = ",".join(m.get("tags") or []) or "-"
    return (f"{doc.id}  imp {m.get('importance')}  {m.get('scope')}  tags {tags}  {m.get('timestamp')}"
            f"  {_short(doc.text)}")


def _hit_line(hit: Any) -> str:
    m = hit.metadata
    label = m.get("topic") or m.get("conversation_id") or m.get("scope") or ""
    return f"{hit.similarity:.3f}  {m.get('type')}  [{label}]  {hit.id}  {_short(hit.text)}"


def _memory_hit_line(hit: Any) -> str:
    m = hit.metadata
    return (
        f"{hit.score:.3f} = {hit.similarity_part:.3f} + {hit.importance_part:.3f} + {hit.recency_part:.3f}"
        f"  imp {m.get('importance')}  {m.get('scope')}  {hit.id}  {_short(hit.text)}"
    )


# ---- the group -----------------------------------------------------------------------------------

@click.group(name="brain", cls=BrainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout instead of text.")
@click.option("--debug", is_flag=True, help="Show the traceback of a failure instead of one line.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the embedded store lives (overrides BRAIN_DATA_DIR).")
@click.option("--project", "project_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The project folder whose config/defaults.env and .env are read (overrides BRAIN_PROJECT_DIR "
                   "and the search upward from the working directory).")
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
    persona.md, specialists.yaml) and ~/.local/share/brain (the data), or the XDG_CONFIG_HOME
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


@cli.command()
@click.option("--persona", "persona_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The persona file (default: BRAIN_PERSONA_PATH, persona.md).")
@json_option
@pass_state
def init(state: State, persona_path: Path | None) -> None:
    """Create the store (or open it) and load the persona."""
    from brain.startup import startup

    report = startup(state.settings(), persona_path=persona_path)
    emit(state, report.to_dict(), report.summary)


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
    from brain.persona import load_persona

    path = path or state.settings().persona_path
    loaded = load_persona(state.store(), path)
    emit(state, loaded.to_dict(), loaded.summary)


@persona.command("show")
@click.option("--max-chars", type=click.IntRange(min=1), help="Cut the block to this many characters.")
@json_option
@pass_state
def persona_show(state: State, max_chars: int | None) -> None:
    """Print the persona block a prompt gets."""
    from brain.persona import persona_block

    block = persona_block(state.store(create=False), max_chars=max_chars)
    if not block and not state.json:
        click.echo("no persona loaded; run `brain persona load`", err=True)
    emit(state, {"text": block}, lambda: block)


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
    from brain.ingest import ingest_paths

    try:
        report = ingest_paths(state.store(), list(paths), prune=prune, dry_run=dry_run, progress=True)
    except KeyboardInterrupt:
        raise Interrupted("interrupted; run the same command again to complete (nothing is duplicated)") from None
    emit(state, report.to_dict(), report.summary)
    if not report.ok:  # the report (stdout) lists each error; stderr gets the one line every failure gets
        count = len(report.errors)
        raise CommandFailed(f"ingest found {count} error{'' if count == 1 else 's'}; the report lists them")


# ---- search --------------------------------------------------------------------------------------

@cli.command()
@click.argument("query")
@click.option("--type", "doc_type", type=click.Choice(DOC_TYPES),
              help="memory: ranked with score parts; faq, persona, summary: by similarity; turn or none: any document.")
@click.option("--k", type=click.IntRange(1, MAX_K),
              help="How many results (default: the RAG_*_TOP_K setting of the type, 5 otherwise).")
@click.option("--entity", type=EntityType(),
              help="With --type memory: the memories in scope entity:NAME, and global ones; never another entity's.")
@json_option
@pass_state
def search(state: State, query: str, doc_type: str | None, k: int | None, entity: str | None) -> None:
    """Search the store for QUERY."""
    if entity is not None and doc_type != DocType.MEMORY.value:
        raise click.UsageError("--entity needs --type memory")
    hits = state.brain(create=False).search(query, type=doc_type, k=k, entity=entity)
    ranked = doc_type == DocType.MEMORY.value
    line = _memory_hit_line if ranked else _hit_line
    header = "score = similarity + importance + recency" if ranked else "similarity"
    emit(state, {"query": query, "type": doc_type, "results": [h.to_dict() for h in hits]},
         lambda: "\n".join([header] + [line(h) for h in hits]) if hits else "no results")


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
    scope = _scope_of(entity, scope)
    store = state.store()
    given = {key: value for key, value in {"scope": scope, "importance": importance}.items() if value is not None}
    doc_id = store.upsert_memory(text, tags=list(tags), **given)
    doc = store.get_one(doc_id)
    emit(state, doc.to_dict(), lambda: f"stored {_memory_line(doc)}")


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
    scope = _scope_of(entity, scope)
    where: dict[str, Any] = {}
    if scope is not None:
        where["scope"] = scope
    if tags:
        where["tags"] = list(tags)
    docs = state.store(create=False).get(type=DocType.MEMORY, where=where or None, limit=limit)
    emit(state, [d.to_dict() for d in docs],
         lambda: "\n".join(_memory_line(d) for d in docs) if docs else "no memories")


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


# ---- turns, schema, stats ------------------------------------------------------------------------

@cli.command()
@click.argument("conversation_id")
@click.option("--k", type=click.IntRange(1, MAX_K), help="How many of the last turns (default: RAG_TURN_TOP_K).")
@json_option
@pass_state
def turns(state: State, conversation_id: str, k: int | None) -> None:
    """Show the last turns of CONVERSATION_ID (conv-...), oldest first."""
    docs = state.store(create=False).recent_turns(conversation_id, **({"k": k} if k is not None else {}))
    emit(state, [d.to_dict() for d in docs], lambda: "\n".join(
        f"#{d.metadata.get('turn_index')} {d.metadata.get('role')} {d.metadata.get('timestamp')}  {d.text}"
        for d in docs
    ) if docs else f"no turns in {conversation_id}")


@cli.command()
@click.argument("doc_type", required=False, metavar="[DOC_TYPE]", type=click.Choice(DOC_TYPES))
@json_option
@pass_state
def schema(state: State, doc_type: str | None) -> None:
    """Describe the metadata of a document type.

    DOC_TYPE is persona, faq, memory, turn or summary; without it, every type."""
    if doc_type is not None:
        info = schema_info(doc_type)
        emit(state, info, lambda: _schema_text(info))
    else:
        emit(state, get_all_schemas(), lambda: "\n\n".join(_schema_text(schema_info(t)) for t in DOC_TYPES))


def _schema_text(info: dict[str, Any]) -> str:
    lines = [f"{info['document_type']}:"]
    for name, field in info["fields"].items():
        kind = field["type"] if isinstance(field["type"], str) else "|".join(field["type"]) or "-"
        flag = "required" if field["required"] else (
            f"default {json.dumps(field['default'])}" if "default" in field else "optional")
        lines.append(f"  {name:<18} {kind:<16} {flag:<20} {field['description']}")
    return "\n".join(lines)


@cli.command()
@json_option
@pass_state
def stats(state: State) -> None:
    """Documents per type, the embedder, the size on disk.

    The size on disk is reported for the embedded store only (null with BRAIN_CHROMA_URL)."""
    store = state.store(create=False)
    data = store.stats()
    emit(state, data, lambda: "\n".join(
        [f"collection  {data['collection']} ({data['backend']})",
         f"embedder    {data['embedder']} ({data['dimension']}-d)",
         f"documents   {data['documents']}"]
        + [f"  {t:<9} {n}" for t, n in data["by_type"].items()]
        + ([f"on disk     {_human_bytes(data['disk_bytes'])}"] if data["disk_bytes"] is not None else [])
    ))


@cli.command()
@json_option
@pass_state
def paths(state: State) -> None:
    """Where brain looks: the project, the env files, the data directory, the persona and the
    specialists file, each with where its value came from, and whether a store is there."""
    data = state.settings().describe_paths()
    emit(state, data, lambda: "\n".join(
        [f"project      {data['found']}",
         "env files    " + (", ".join(f"{f['path']}{'' if f['exists'] else ' (absent)'}" for f in data["env_files"])
                            or "none")]
        + [f"{label:<12} {data[key]['path']}{'' if data[key]['exists'] else ' (absent)'}  from {data[key]['from']}"
           for key, label in (("data_dir", "data dir"), ("persona_path", "persona"),
                              ("specialists_path", "specialists"), ("mirror_file", "mirror"))]
        + [f"store        {'a Chroma server: ' + data['chroma_url'] if data['chroma_url'] else ('yes' if data['store'] else 'none yet (brain init creates it)')}"]
    ))


# ---- the Engram mirror ---------------------------------------------------------------------------

@cli.group()
def mirror() -> None:
    """The Engram-compatible SQLite mirror of memories and conversations (BRAIN_MIRROR_PATH, BRAIN_MIRROR_TYPES)."""


@mirror.command("sync")
@json_option
@pass_state
def mirror_sync(state: State) -> None:
    """Make the mirror match the store in full (safe to repeat)."""
    from brain.mirror.sync import sync_mirror

    brain = state.brain()
    report = sync_mirror(brain.store, brain.require_mirror(), types=brain.settings.mirrored_types)
    emit(state, report.to_dict(), report.summary)


@mirror.command("verify")
@json_option
@pass_state
def mirror_verify(state: State) -> None:
    """Report every difference between the store and the mirror (exit 1 if any)."""
    from brain.mirror.sync import verify_mirror

    brain = state.brain(create=False)
    report = verify_mirror(brain.store, brain.require_mirror(), types=brain.settings.mirrored_types)
    emit(state, report.to_dict(), report.summary)
    if not report.ok:
        raise CommandFailed("the mirror differs from the store; `brain mirror sync` reconciles them")


@mirror.command("recall")
@click.argument("query")
@click.option("--k", type=click.IntRange(1, 1000), default=5, show_default=True, help="How many results.")
@click.option("--keyword", is_flag=True,
              help="Full-text search (FTS5, stemmed words, ranked by BM25) instead of the stored vectors.")
@json_option
@pass_state
def mirror_recall(state: State, query: str, k: int, keyword: bool) -> None:
    """Search the mirror alone (Chroma is not opened)."""
    from brain.embeddings import get_embedder
    from brain.mirror import EngramMirror

    settings = state.settings()
    if not settings.mirror_file.is_file():
        raise StoreNotFound(f"there is no mirror at {settings.mirror_file}; `brain init` creates the store and its "
                            f"mirror, `brain mirror sync` fills it from an existing store")
    embedder = get_embedder(settings)
    with EngramMirror(settings.mirror_file, embedder.name, batch_size=settings.mirror_batch_size) as mirror:
        hits = mirror.keyword_recall(query, k) if keyword else mirror.recall(embedder.embed_query(query), k)
    emit(state, {"query": query, "keyword": keyword, "results": [h.to_dict() for h in hits]},
         lambda: "\n".join(_mirror_hit_line(h) for h in hits) if hits else "no results")


def _mirror_hit_line(hit: Any) -> str:
    """A keyword hit shows its BM25 relevance, a vector hit its cosine similarity: two different scales."""
    from brain.mirror import KeywordHit

    value = f"bm25 {hit.bm25:.3f}" if isinstance(hit, KeywordHit) else f"cosine {hit.similarity:.3f}"
    m = hit.metadata
    label = m.get("conversation_id") or m.get("scope") or ""
    return f"{value}  {m.get('type')}  [{label}]  {hit.id}  {_short(hit.text)}"


@mirror.command("rebuild")
@click.option("--force", is_flag=True, help="Rebuild even when the store holds none of the mirrored types.")
@json_option
@pass_state
def mirror_rebuild(state: State, force: bool) -> None:
    """Move the mirror file aside (kept, timestamped) and rebuild it from the store, with the store's vectors.

    The repair for a damaged mirror; nothing is embedded. Rows engram wrote itself are copied over
    from the old file when it can still be read."""
    from brain.mirror.recovery import rebuild_mirror

    report = rebuild_mirror(state.store(), force=force)
    emit(state, report.to_dict(), report.summary)


@mirror.command("backfill")
@json_option
@pass_state
def mirror_backfill(state: State) -> None:
    """Embed the mirrored documents that have no vector of the configured model (resumable)."""
    brain = state.brain()
    mirror, embedder = brain.require_mirror(), brain.store.embedder
    done = mirror.backfill(embedder.embed_documents, progress=True)
    coverage = mirror.coverage()
    emit(state, {"embedded": done, "coverage": asdict(coverage)},
         lambda: f"embedded {done} documents; {coverage.with_vectors} of {coverage.memories} have "
                 f"{embedder.name} vectors")


@cli.command()
@click.option("--from-mirror", "from_mirror", is_flag=True, required=True,
              help="Rebuild the Chroma collection from the mirror (the only source for now).")
@click.option("--persona", "persona_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The persona file to reload (default BRAIN_PERSONA_PATH).")
@click.option("--kb", "kb_paths", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="A knowledge-base file or folder to ingest again (the FAQ is not in the mirror); repeatable.")
@json_option
@pass_state
def restore(state: State, from_mirror: bool, persona_path: Path | None, kb_paths: tuple[Path, ...]) -> None:
    """Rebuild the store from the mirror (memories, turns, summaries: every mirrored document, with
    its stored vector) and from the files (the persona; the FAQ with --kb).

    For a lost or broken Chroma store: move the broken BRAIN_DATA_DIR/chroma aside first. The report
    lists what could not be restored and what to do about it."""
    from brain.mirror.recovery import recover_store

    report = recover_store(state.store(), persona_path=persona_path, kb_paths=kb_paths)
    emit(state, report.to_dict(), report.summary)


# ---- Portable AI Memory --------------------------------------------------------------------------

@cli.command("export")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["pam"]), default="pam", show_default=True,
              help="Portable AI Memory 1.0.")
@click.option("--no-embeddings", is_flag=True, help="Write no embeddings.json (every embedding_ref is null).")
@click.option("--no-conversations", is_flag=True, help="Write no conversations/ (turns and summaries).")
@click.option("--owner", help="owner.id of the export (default: BRAIN_OWNER_ID, else derived from the store).")
@click.option("--force", is_flag=True,
              help="Export into a non-empty directory that holds no brain export (files of the same name are "
                   "overwritten; nothing is deleted).")
@json_option
@pass_state
def export_cmd(state: State, out_dir: Path, fmt: str, no_embeddings: bool, no_conversations: bool,
               owner: str | None, force: bool) -> None:
    """Export the store to OUT_DIR: memory-store.json, embeddings.json and conversations/<id>.json.

    OUT_DIR must be new, empty or a previous brain export (replaced file for file; the files it no
    longer needs are removed and listed), unless --force."""
    from brain.pam import export_pam

    report = export_pam(state.store(create=False), out_dir, embeddings=not no_embeddings,
                        conversations=not no_conversations, owner_id=owner, force=force)
    emit(state, report.to_dict(), report.summary)


@cli.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@json_option
@pass_state
def import_cmd(state: State, path: Path) -> None:
    """Import a PAM export (its directory or memory-store.json); validated whole first."""
    from brain.pam import import_pam

    report = import_pam(state.store(), path)
    emit(state, report.to_dict(), report.summary)


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


# ---- specialists --------------------------------------------------------------------------------

@cli.group()
def specialists() -> None:
    """The assistant's specialists (tools), found by meaning (BRAIN_SPECIALISTS_PATH)."""


@specialists.command("list")
@json_option
@pass_state
def specialists_list(state: State) -> None:
    """Register the specialists file (if changed) and list the specialists."""
    found = state.brain().specialists.list_specialists()
    emit(state, [s.to_dict() for s in found],
         lambda: "\n".join(f"{s.id}  {_short(s.description, 90)}" for s in found) if found else "no specialists")


@specialists.command("find")
@click.argument("request")
@click.option("--k", type=click.IntRange(1, 50), default=3, show_default=True, help="How many specialists.")
@json_option
@pass_state
def specialists_find(state: State, request: str, k: int) -> None:
    """The specialists best suited to REQUEST, with score and band (strong, good, possible, weak)."""
    matches = state.brain().specialists.find_specialists(request, k)
    emit(state, {"request": request, "results": [m.to_dict() for m in matches]},
         lambda: "\n".join(f"{m.score:.3f}  {m.band:<8}  {m.id}  {_short(m.description, 80)}" for m in matches))


# ---- the HTTP API --------------------------------------------------------------------------------

@cli.command()
@click.option("--host", help="Address to listen on (default BRAIN_API_HOST, 127.0.0.1). A non-loopback "
                             "address needs BRAIN_API_TOKEN.")
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default BRAIN_API_PORT, 5000).")
@pass_state
def serve(state: State, host: str | None, port: int | None) -> None:
    """Serve the HTTP API (one process; see the README for several)."""
    from brain.api import serve as run_server

    run_server(state.settings(), host=host, port=port)


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def main() -> None:
    """The console script: run the group, exit with its code."""
    cli.main(prog_name="brain")


if __name__ == "__main__":
    main()
