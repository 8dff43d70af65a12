"""The settings' sources (arguments, the environment, the env files) with their path settings made
absolute against the right directory, and a record of where each path setting came from."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path

from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from brain.config.project import ProjectLayout
from brain.config.sections import PATH_FIELDS


@dataclass
class Loading:
    """What one ``Settings(...)`` call is resolving against, and where each path setting came from."""

    layout: ProjectLayout
    cwd: Path
    origins: dict[str, str] = dataclass_field(default_factory=dict)


LOADING: ContextVar[Loading | None] = ContextVar("brain_settings_loading", default=None)


def _path_aliases(model: type[BaseSettings]) -> dict[str, str]:
    """lower-cased alias -> field name, for the path settings."""
    out = {}
    for name in PATH_FIELDS:
        alias = model.model_fields[name].validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else []
        for choice in (*choices, name):
            out[str(choice).lower()] = name
    return out


def anchored(
    source: Callable[[], dict[str, object]], kind: str, model: type[BaseSettings]
) -> Callable[[], dict[str, object]]:
    """``source`` with its path settings made absolute: against the working directory for arguments
    and the environment, against the project root for env files; an empty value means unset."""

    def read() -> dict[str, object]:
        values = source()
        loading = LOADING.get()
        if loading is None:
            return values
        aliases = _path_aliases(model)
        for key in list(values):
            name = aliases.get(str(key).lower())
            if name is None:
                continue
            value = values[key]
            if value is None or (isinstance(value, str) and not value.strip()):
                del values[key]
                continue
            if not isinstance(value, (str, os.PathLike)):
                continue  # not a path: validation names the problem
            base = loading.layout.base if kind == "file" else loading.cwd
            values[key] = base / Path(value).expanduser()
            if name not in loading.origins:  # sources are read highest priority first
                loading.origins[name] = _origin(kind, str(key), loading.layout)
        return values

    return read


def _origin(kind: str, key: str, layout: ProjectLayout) -> str:
    if kind == "argument":
        return "an explicit argument or option (such as --data-dir)"
    if kind == "environment":
        return f"{key.upper()} in the environment"
    from dotenv import dotenv_values

    for path in reversed(layout.env_files):
        if path.is_file() and key.lower() in {k.lower() for k in dotenv_values(path)}:
            return f"{key.upper()} in {path}"
    return f"{key.upper()} in {', '.join(map(str, layout.env_files))}"
