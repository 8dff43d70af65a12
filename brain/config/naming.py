"""Facts about a setting that messages and the generated documentation need: its environment names,
its range, and a validation error as one readable sentence naming the variables."""

from __future__ import annotations

import typing
from urllib.parse import urlsplit, urlunsplit

import annotated_types
import pydantic
from pydantic import AliasChoices

from brain.config.fields import all_fields


def env_name(field_name: str) -> str:
    """The environment variable that sets ``field_name``."""
    return env_names(field_name)[0]


def bounds(field_name: str) -> tuple[object, bool, object, bool] | None:
    """``(low, low_excluded, high, high_excluded)`` of a numeric setting, or None when it has none."""
    lo: object = None
    hi: object = None
    lo_open = hi_open = False
    for meta in all_fields()[field_name].metadata:
        if isinstance(meta, annotated_types.Ge):
            lo, lo_open = meta.ge, False
        elif isinstance(meta, annotated_types.Gt):
            lo, lo_open = meta.gt, True
        elif isinstance(meta, annotated_types.Le):
            hi, hi_open = meta.le, False
        elif isinstance(meta, annotated_types.Lt):
            hi, hi_open = meta.lt, True
    return None if lo is None and hi is None else (lo, lo_open, hi, hi_open)


def allowed_range(field_name: str) -> str | None:
    """The range of ``field_name`` as error messages show it (``1..20``), or None."""
    found = bounds(field_name)
    if found is None:
        return None
    lo, lo_open, hi, hi_open = found
    if lo_open or hi_open:
        return f"{'more than ' if lo_open else ''}{lo} and {'less than ' if hi_open else ''}{hi}"
    return f"{lo}..{hi}"


def env_names(field_name: str) -> tuple[str, ...]:
    """Every environment variable that sets ``field_name``: its name, then older names kept working."""
    alias = all_fields()[field_name].validation_alias
    # every setting declares its names as AliasChoices (brain.config.sections)
    return tuple(str(c) for c in alias.choices) if isinstance(alias, AliasChoices) else (field_name.upper(),)


def _field_for(loc_name: str) -> str | None:
    for name in all_fields():
        if loc_name.lower() in {c.lower() for c in env_names(name)} | {name}:
            return name
    return None


#: settings whose values never appear in an error message (they end up in logs): every one typed as a secret
_SECRET_FIELDS = frozenset(
    name
    for name, info in all_fields().items()
    if pydantic.SecretStr in (info.annotation, *typing.get_args(info.annotation))
)


def _without_credentials(value: object) -> object:
    """``value``, a URL's user and password replaced by ``***`` when it carries them (a refused URL with a
    password in it would otherwise print the password)."""
    if not isinstance(value, str) or "@" not in value:
        return value
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return "<hidden>"
    if not parts.netloc or "@" not in parts.netloc:
        return value
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def describe_settings_error(exc: pydantic.ValidationError) -> str:
    lines = []
    for err in exc.errors():
        if not err["loc"]:  # a rule across several settings: its message names them
            lines.append(err["msg"].removeprefix("Value error, "))
            continue
        loc = str(err["loc"][0])
        field = _field_for(loc)
        var = " or ".join(env_names(field)) if field else loc
        value = "<hidden>" if field in _SECRET_FIELDS else _without_credentials(err.get("input"))
        allowed = allowed_range(field) if field else None
        msg = err["msg"].removeprefix("Value error, ")
        if allowed is not None:
            lines.append(f"{var}={value!r} is not allowed: must be in {allowed} ({msg})")
        else:
            lines.append(f"{var}={value!r} is not allowed: {msg}")
    return "invalid settings: " + "; ".join(lines)
