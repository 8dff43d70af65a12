"""What every command shares: the error contract (:class:`CommandFailed`, :class:`BrainGroup`), the
options' state and the Brain it opens (:class:`State`), the parameter types checked by the library's
rules, and printing (:func:`emit`, one JSON document or text for people).

The library is imported where a command uses it, never when the commands are defined: ``brain --help``
lists every command without loading Chroma, pydantic or a model."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from brain.config import Settings
    from brain.ops import Operations


class CommandFailed(click.ClickException):
    """A reported failure: one ``error: ...`` line on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: object = None) -> None:
        from brain.text.printable import printable

        click.echo(printable(f"error: {self.format_message()}"), err=True)


class Interrupted(CommandFailed):
    """Ctrl-C during a command whose work a re-run completes: exit code 130, as a shell reports SIGINT."""

    exit_code = 130


def one_line(message: str) -> str:
    return " ".join(message.split())


class BrainGroup(click.Group):
    """Turns library errors into one-line messages (unless ``--debug``) and formats usage errors
    as one line too, keeping click's exit codes (2 for usage errors)."""

    def invoke(self, ctx: click.Context) -> object:
        from brain.model.errors import BrainError

        try:
            return super().invoke(ctx)
        except BrainError as exc:
            if ctx.params.get("debug"):
                raise
            raise CommandFailed(one_line(str(exc))) from exc

    def _own_options(self) -> set[str]:
        return {name for param in self.params if isinstance(param, click.Option) for name in param.opts}

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: object,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `brain`: the help text, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            message = one_line(exc.format_message())
            option = exc.option_name if isinstance(exc, click.NoSuchOption) else None
            if option and exc.ctx is not None and exc.ctx.command is not self and option in self._own_options():
                message = (
                    f"{option} is an option of brain itself, given before the command: "
                    f"'brain {option} ... {exc.ctx.info_name}', not '{exc.ctx.command_path} {option}'"
                )
                hint = ""
            click.echo(f"error: {message}{hint}", err=True)
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
    """What the group's options decide, and the settings and operations opened on first use (closed when
    the command ends)."""

    json: bool = False
    debug: bool = False
    data_dir: Path | None = None
    project_dir: Path | None = None
    _settings: Settings | None = None
    _ops: Operations | None = None

    def settings(self) -> Settings:
        if self._settings is None:
            from brain.config import load_settings

            overrides = {"data_dir": self.data_dir} if self.data_dir is not None else {}
            self._settings = load_settings(self.project_dir, **overrides)
        return self._settings

    def ops(self, *, create: bool = True, worker: bool = False, through_server: bool = True) -> Operations:
        """The operations on the store: opened by this process, or, while ``brain serve`` holds the data
        directory, that server's (:mod:`brain.ops.served`). ``create=False`` (read-only commands): a missing
        store is an error, not made. ``worker``: a long-running command, whose chat layer summarises in the
        background. ``through_server=False``: a server itself."""
        if self._ops is None:
            from brain.ops import open_operations

            self._ops = open_operations(
                self.settings(), create=create, start_worker=worker, through_server=through_server
            )
        return self._ops

    def close(self) -> None:
        if self._ops is not None:
            self._ops.close()
            self._ops = None


class ScopeType(click.ParamType):  # type: ignore[type-arg]  # click < 8.5 is not generic at run time
    """A memory scope, 'global' or 'entity:<name>', checked by the library's rule."""

    name = "scope"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from brain.model.schemas import check_scope

        try:
            return check_scope(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class TextType(click.ParamType):  # type: ignore[type-arg]  # click < 8.5 is not generic at run time
    """A text argument (a memory, a query, a request): empty or only spaces is a usage error."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail('is empty: give the text in quotes, e.g. "Alice is vegetarian"', param, ctx)
        return value


class EntityType(click.ParamType):  # type: ignore[type-arg]  # click < 8.5 is not generic at run time
    """An entity name; ``--entity NAME`` means the scope ``entity:NAME`` in every command. A name is
    taken in its canonical form (``Bob`` is ``bob``), as everywhere in brain."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from brain.model.schemas import check_name

        try:
            return check_name(value, "--entity")
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def scope_of(entity: str | None, scope: str | None) -> str | None:
    """The one scope ``--entity`` and ``--scope`` ask for (None: neither); both, disagreeing, is a usage error."""
    from brain.model.schemas import entity_scope

    if entity is None:
        return scope
    wanted = entity_scope(entity)
    if scope is not None and scope != wanted:
        raise click.UsageError(f"--entity {entity} means --scope {wanted}, not --scope {scope}; give one of them")
    return wanted


class DocTypeChoice(click.Choice):  # type: ignore[type-arg]  # click < 8.5 is not generic at run time
    """One of the document types, as the library's schemas name them (read when first needed)."""

    def __init__(self) -> None:
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        from brain.model.schemas import DOC_TYPES

        return DOC_TYPES


class CountType(click.ParamType):  # type: ignore[type-arg]  # click < 8.5 is not generic at run time
    """A result count: an integer from 1 to the library's ``MAX_K``."""

    name = "integer"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "INTEGER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from brain.model.schemas import MAX_K

        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not an integer", param, ctx)
        if not 1 <= number <= MAX_K:
            self.fail(f"{number} is not in the range 1<=x<={MAX_K}", param, ctx)
        return number


def confirm(question: str) -> None:
    """Ask ``question`` on stderr (stdout keeps the report alone) and go on only on a yes. A no stops the
    command; so does no answer at all (stdin closed or empty, as in a script), saying to pass --yes."""
    click.echo(f"{question} [y/N]: ", err=True, nl=False)
    stdin = sys.stdin if sys.stdin is not None and not sys.stdin.closed else None
    line = stdin.readline() if stdin is not None else ""
    if not line:  # end of input: nobody can answer
        click.echo(err=True)
        raise click.UsageError(
            "no answer to the question (stdin is closed or empty): pass --yes to go ahead without being asked"
        )
    if line.strip().lower() not in ("y", "yes"):
        raise CommandFailed("nothing was done (the answer was not yes)")


pass_state = click.make_pass_decorator(State, ensure=True)


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).json = True


def json_option(command: Callable[..., object]) -> Callable[..., object]:
    """``--json`` on a command, the same as ``brain --json <command>``."""
    return click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print one JSON document on stdout instead of text.",
    )(command)


def emit(state: State, data: Any, text: Callable[[], str]) -> None:
    """One JSON document, or the text for people; either printed with every control and format
    character escaped (:func:`brain.text.printable.printable`), the layout's line breaks kept."""
    from brain.text.printable import printable

    if state.json:
        click.echo(printable(json.dumps(data, indent=2, ensure_ascii=False, default=str), keep="\n"))
    else:
        out = text()
        if out:
            click.echo(printable(out, keep="\n"))


def short(text: str, width: int = 100) -> str:
    """``text`` on one line: its line breaks and other unprintable characters escaped, at most ``width`` long."""
    from brain.text.printable import printable

    line = printable(text)
    return line if len(line) <= width else line[: width - 1] + "…"


def memory_line(doc: Any) -> str:
    from brain.ops.values import status_of
    from brain.text.printable import printable

    m = doc.metadata
    tags = printable(",".join(m.get("tags") or [])) or "-"
    return (
        f"{doc.id}  imp {m.get('importance')}  {m.get('scope')}  {status_of(m)}  tags {tags}  {m.get('timestamp')}"
        f"  {short(doc.text)}"
    )


def hit_line(hit: Any) -> str:
    m = hit.metadata
    label = m.get("topic") or m.get("conversation_id") or m.get("scope") or ""
    return f"{hit.similarity:.3f}  {m.get('type')}  [{label}]  {hit.id}  {short(hit.text)}"


#: the columns of a specialist match, in the order they are sorted by (best first by confidence)
SPECIALIST_HEADER = "confidence  band      score   specialist"


def specialist_line(match: Any) -> str:
    return f"{match.confidence:>10.3f}  {match.band:<8}  {match.score:6.3f}  {match.id}  {short(match.description, 70)}"


def memory_hit_line(hit: Any) -> str:
    m = hit.metadata
    return (
        f"{hit.score:.3f} = {hit.similarity_part:.3f} + {getattr(hit, 'lexical_part', 0.0):.3f} + "
        f"{hit.importance_part:.3f} + {hit.recency_part:.3f}"
        f"  imp {m.get('importance')}  {m.get('scope')}  {hit.id}  {short(hit.text)}"
    )
