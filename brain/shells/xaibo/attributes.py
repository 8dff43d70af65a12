"""Xaibo attributes <-> the store's metadata (the rules are in :mod:`brain.shells.xaibo`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brain.model.errors import Problem, ValidationError, joined
from brain.model.schemas import GLOBAL_SCOPE, check_conversation_id, entity_scope, metadata_value_problem
from brain.shells.xaibo.keys import ATTR_PREFIX, JSON_PREFIX, MAPPED_FIELDS, MAPPED_KEY, written_by_xaibo


@dataclass
class Encoded:
    fields: dict[str, Any]  # importance / tags / entity / conversation_id that came from attributes
    extras: dict[str, Any]  # xaibo.attr.* / xaibo.json.* / xaibo.mapped


def _mapped_value(key: str, value: Any, scope: str) -> tuple[bool, Any]:
    """(True, stored value) when ``value`` is valid for the store's field ``key``, else (False, None)."""
    if key == "importance":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, None
        if isinstance(value, float) and not value.is_integer():
            return False, None
        return (True, int(value)) if 1 <= value <= 5 else (False, None)
    if key == "tags":
        if isinstance(value, (list, tuple)) and all(isinstance(t, str) and t.strip() for t in value):
            return True, list(dict.fromkeys(t.strip() for t in value))
        return False, None
    if key == "entity":
        if not isinstance(value, str):
            return False, None
        try:
            own = entity_scope(value)
        except ValueError:
            return False, None
        if scope != own:  # an entity is a scope: a global memory has none
            return False, None
        return True, value
    if key == "conversation_id":
        try:
            return True, check_conversation_id(value)
        except ValueError:
            return False, None
    return False, None


def encode_attributes(attributes: Any, scope: str = GLOBAL_SCOPE) -> Encoded:
    """Validate Xaibo attributes into what the store keeps; raise ValidationError naming every bad key."""
    if attributes is None:
        return Encoded({}, {})
    if not isinstance(attributes, Mapping):
        raise ValidationError(
            f"attributes must be a dict of names to values, got {type(attributes).__name__} (nothing was written)",
            [Problem("attributes", "not a dict")],
        )
    fields: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    mapped: list[str] = []
    problems: list[Problem] = []
    for key, value in attributes.items():
        if not isinstance(key, str) or not key or key.startswith("$"):
            problems.append(
                Problem(
                    f"attributes.{key}", f"attribute names must be non-empty strings not starting with '$', got {key!r}"
                )
            )
            continue
        if key in MAPPED_FIELDS:
            ok, stored = _mapped_value(key, value, scope)
            if ok:
                fields[key] = stored
                mapped.append(key)
                continue
        if metadata_value_problem(value) is None:
            extras[ATTR_PREFIX + key] = list(value) if isinstance(value, tuple) else value
            continue
        try:
            extras[JSON_PREFIX + key] = json.dumps(value, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            problems.append(
                Problem(
                    f"attributes.{key}",
                    f"attribute {key!r} must be JSON data (strings, numbers, booleans, null, "
                    f"lists, objects), got {type(value).__name__} ({exc})",
                )
            )
    if problems:
        raise ValidationError(joined(problems) + " (nothing was written)", problems)
    if mapped:
        extras[MAPPED_KEY] = mapped
    return Encoded(fields, extras)


def decode_attributes(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a document was given, from its stored metadata.

    A memory written by the rest of the assistant (no Xaibo markers) shows its importance, tags,
    entity and conversation id."""
    out: dict[str, Any] = {}
    if written_by_xaibo(metadata):
        mapped = metadata.get(MAPPED_KEY) or []
    else:
        mapped = [k for k in MAPPED_FIELDS if metadata.get(k) not in (None, [])]
    for key in mapped:
        if key == "tags":
            out[key] = list(metadata.get("tags") or [])
        elif key in metadata:
            out[key] = metadata[key]
    for key, value in metadata.items():
        if key.startswith(ATTR_PREFIX):
            out[key[len(ATTR_PREFIX) :]] = value
        elif key.startswith(JSON_PREFIX):
            try:
                out[key[len(JSON_PREFIX) :]] = json.loads(value)
            except (TypeError, ValueError):  # edited by hand into something that is not JSON: as stored
                out[key[len(JSON_PREFIX) :]] = value
    return out
