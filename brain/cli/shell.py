"""What every command shares: the error contract (:class:`CommandFailed`, :class:`BrainGroup`), the
options' state and the Brain it opens (:class:`State`), the parameter types checked by the library's
rules, and printing (:func:`emit`, one JSON document or text for people)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from brain.config import Settings, load_settings
from brain.core import Brain
from brain.core import open as open_brain
from brain.errors import BrainError
from brain.store import RagStore
from brain.schemas import check_name, check_scope, entity_scope


class CommandFailed(click.ClickException):
    """A reported failure: one ``error: ...`` line on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class Interrupted(CommandFailed):
    """Ctrl-C during a command whose work a re-run completes: exit code 130, as a shell reports SIGINT."""

    exit_code = 130


def one_line(message: str) -> str:
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
            raise CommandFailed(one_line(str(exc))) from exc

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
            click.echo(f"error: {one_line(exc.format_message())}{hint}", err=True)
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

    def brain(self, *, create: bool = True, serving: bool = False) -> Brain:
        """The Brain; with ``create=False`` (read-only commands) a missing store is an error, not made.
        Only a server (``serving``) keeps a chat layer running, with its summary worker."""
        if self._brain is None:
            self._brain = open_brain(self.settings(), create=create, start_worker=serving)
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
            return check_name(value, "--entity")
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def scope_of(entity: str | None, scope: str | None) -> str | None:
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


def short(text: str, width: int = 100) -> str:
    line = one_line(text)
    return line if len(line) <= width else line[: width - 1] + "…"


def memory_line(doc: Any) -> str:
    m = doc.metadata
    tags = ",".join(m.get("tags") or []) or "-"
    return (f"{doc.id}  imp {m.get('importance')}  {m.get('scope')}  tags {tags}  {m.get('timestamp')}"
            f"  {short(doc.text)}")


def hit_line(hit: Any) -> str:
    m = hit.metadata
    label = m.get("topic") or m.get("conversation_id") or m.get("scope") or ""
    return f"{hit.similarity:.3f}  {m.get('type')}  [{label}]  {hit.id}  {short(hit.text)}"


def memory_hit_line(hit: Any) -> str:
    m = hit.metadata
    return (
        f"{hit.score:.3f} = {hit.similarity_part:.3f} + {hit.importance_part:.3f} + {hit.recency_part:.3f}"
        f"  imp {m.get('importance')}  {m.get('scope')}  {hit.id}  {short(hit.text)}"
    )
