"""Problems found in PAM files, each naming its file and JSON path (``memory-store.json:
memories[3].tags[0]: ...``), and the official JSON Schema checks that produce most of them.

One place for turning PAM findings into :class:`~brain.model.errors.Problem` (``file`` set, ``field`` the JSON
path) and a list of them into a ValidationError, so reading, mapping and export report alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from itertools import islice
from typing import TYPE_CHECKING

import orjson

from brain.model.errors import Problem, ValidationError

if TYPE_CHECKING:
    import jsonschema_rs

_MAX_REPORTED = 20  # problems spelled out in an error message (all of them are in .problems)


def json_path(parts: Iterable[object]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{orjson.dumps(str(part)).decode()}]"
    return out or "(document root)"


def problem_at(file: str, path: str, message: str, item: int | None = None) -> Problem:
    if len(message) > 300:
        message = message[:300] + "..."
    return Problem(path, message, item, file)


def summarize(problems: list[Problem]) -> str:
    shown = "; ".join(f"{p.file}: {p.field}: {p.message}" for p in problems[:_MAX_REPORTED])
    more = len(problems) - _MAX_REPORTED
    return shown + (f"; and {more} more" if more > 0 else "")


def reject(problems: list[Problem]) -> None:
    if problems:
        raise ValidationError(f"{summarize(problems)} (nothing was written)", problems)


@cache
def _validator(name: str) -> jsonschema_rs.Draft202012Validator:
    import jsonschema_rs
    from portable_ai_memory.schemas import load_schema

    return jsonschema_rs.Draft202012Validator(load_schema(name), validate_formats=True)


def schema_problems(document: object, schema: str, file: str) -> list[Problem]:
    problems = []
    for error in islice(_validator(schema).iter_errors(document), 200):
        path = list(error.instance_path)
        listed = ("memories", "embeddings", "messages", "conversations_index")
        item = path[1] if len(path) > 1 and path[0] in listed and isinstance(path[1], int) else None
        problems.append(problem_at(file, json_path(path), error.message, item))
    return problems
