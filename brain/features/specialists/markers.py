"""``SPECIALIST_REQUEST[name:{json}]`` markers: how model output asks for a specialist.

:func:`parse_specialist_requests` finds every marker in a text and checks each against the
specialists' declared params; every problem is reported at once, with its line and column.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from brain.features.specialists.model import Specialist
from brain.model.errors import Problem, ValidationError, joined

MARKER = "SPECIALIST_REQUEST["
_NAME = re.compile(r"[^\s:\]\[{]+")
_decoder = json.JSONDecoder()


class SpecialistRequest(NamedTuple):
    """A ``SPECIALIST_REQUEST[name:{json}]`` marker: unpacks as ``(name, params)``."""

    name: str
    params: dict[str, object]
    start: int  # where the marker starts in the text
    end: int  # one past its closing ``]``


def parse_specialist_requests(
    text: str, specialists: Mapping[str, Specialist] | Iterable[Specialist]
) -> list[SpecialistRequest]:
    """Find every ``SPECIALIST_REQUEST[name:{json}]`` in model output and check each against the
    specialists' declared params: the name must be registered, the JSON an object, every required
    param present, no undeclared param, and each value of its declared type. Raises one
    :class:`ValidationError` listing every problem (``item`` is the marker's number, from 0), with
    positions as line and column of ``text``; no markers gives ``[]``."""
    if not isinstance(text, str):
        raise ValidationError(
            f"text must be a string, got {type(text).__name__}",
            [Problem("text", "not a string")],
        )
    known = dict(specialists) if isinstance(specialists, Mapping) else {s.id: s for s in specialists}
    requests: list[SpecialistRequest] = []
    problems: list[Problem] = []
    pos = 0
    index = 0
    while True:
        start = text.find(MARKER, pos)
        if start < 0:
            break
        item = index
        index += 1
        cursor = start + len(MARKER)
        where = _where(text, start)

        def fail(field_name: str, message: str, item: int = item, where: str = where) -> None:
            problems.append(Problem(field_name, f"marker {item + 1} at {where}: {message}", item))

        name_match = _NAME.match(text, cursor)
        if not name_match:
            fail("name", "expected SPECIALIST_REQUEST[name:{...}] with a specialist name after the [")
            pos = cursor
            continue
        name = name_match.group(0)
        cursor = name_match.end()
        if cursor >= len(text) or text[cursor] != ":":
            fail("name", f"expected ':' and a JSON object after the name {name!r} at {_where(text, cursor)}")
            pos = cursor
            continue
        cursor = _skip_space(text, cursor + 1)
        try:
            params, cursor = _decoder.raw_decode(text, cursor)
        except json.JSONDecodeError as exc:
            fail("params", f"bad JSON for {name!r}: {exc.msg} at {_where(text, exc.pos)}")
            pos = cursor
            continue
        cursor = _skip_space(text, cursor)
        if cursor >= len(text) or text[cursor] != "]":
            fail("params", f"expected ']' to close the request for {name!r} at {_where(text, cursor)}")
            pos = cursor
            continue
        end = cursor + 1
        pos = end
        if not isinstance(params, dict):
            fail("params", f"the params of {name!r} must be a JSON object {{...}}, got {type(params).__name__}")
            continue
        spec = known.get(name)
        if spec is None:
            listed = ", ".join(sorted(known)) or "none are registered"
            fail("name", f"unknown specialist {name!r}; known specialists: {listed}")
            continue
        before = len(problems)
        for message, field_name in _check_params(spec, params):
            fail(field_name, message)
        if len(problems) == before:
            requests.append(SpecialistRequest(name, params, start, end))
    if problems:
        raise ValidationError(joined(problems), problems)
    return requests


def _check_params(spec: Specialist, params: Mapping[str, object]) -> list[tuple[str, str]]:
    out = []
    declared = {p.name: p for p in spec.params}
    for p in spec.params:
        if p.required and p.name not in params:
            about = f"{p.type}: {p.description or 'no description'}"
            out.append((f"{spec.id} needs the parameter {p.name!r} ({about})", f"params.{p.name}"))
    for key, value in params.items():
        declared_param = declared.get(key)
        if declared_param is None:
            names = ", ".join(declared) or "none"
            out.append((f"{spec.id} has no parameter {key!r}; its parameters: {names}", f"params.{key}"))
        elif not _is_type(value, declared_param.type):
            must = _ARTICLE[declared_param.type]
            out.append((f"{spec.id}.{key} must be {must}, got {json.dumps(value)[:60]}", f"params.{key}"))
    return out


_ARTICLE = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true/false)",
    "array": "an array [...]",
    "object": "an object {...}",
}


def _is_type(value: object, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {column}"
