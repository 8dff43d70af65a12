"""Validation of metadata against its type's model, and reading back what Chroma holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from brain.model.errors import Problem, ValidationError, joined
from brain.model.schemas.limits import bounds_problems
from brain.model.schemas.models import MODELS, BaseMetadata
from brain.model.schemas.values import DOC_TYPES, GLOBAL_SCOPE, DocType, parse_timestamp


def model_for(doc_type: Any) -> type[BaseMetadata]:
    key = doc_type.value if isinstance(doc_type, DocType) else doc_type
    try:
        return MODELS[key]
    except (KeyError, TypeError):
        raise ValidationError(
            f"unknown document type {doc_type!r}: expected one of {', '.join(DOC_TYPES)}",
            [Problem("type", "unknown document type")],
        ) from None


def _type_name(model: type[BaseMetadata]) -> str:
    return next(name for name, m in MODELS.items() if m is model)


def pydantic_problems(exc: pydantic.ValidationError) -> list[Problem]:
    """Pydantic's findings as Problems: the field's dotted path, and a message that names it."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or (err.get("ctx") or {}).get("key") or "metadata"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = f"{field} is required"
        elif err["type"] in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            msg = f"{field}: {msg.lower()}, got {err.get('input')!r}"
        elif err["type"] == "extra_forbidden":
            msg = f"{field} is not a known field"
        elif not msg.startswith(field.split(".")[0]) and field not in msg:
            msg = f"{field}: {msg}"
        problems.append(Problem(field, msg))
    return problems


def validate_metadata(doc_type: object, meta: Mapping[str, object] | None = None) -> BaseMetadata:
    """Validate ``meta`` as metadata of ``doc_type``; raise :class:`ValidationError` naming the field."""
    model = model_for(doc_type)
    if not isinstance(meta, (dict, type(None))):
        raise ValidationError(
            f"metadata must be a mapping, got {type(meta).__name__}",
            [Problem("metadata", "not a mapping")],
        )
    data = dict(meta or {})
    expected = _type_name(model)
    given_type = data.pop("type", None)
    if given_type is not None and given_type not in (expected, DocType(expected)):
        raise ValidationError(
            f"type: metadata says {given_type!r} but the document type is {expected!r}",
            [Problem("type", "type mismatch")],
        )
    data["type"] = expected
    try:
        validated = model(**data)
    except pydantic.ValidationError as exc:
        problems = pydantic_problems(exc)
        raise ValidationError(joined(problems), problems) from None
    except TypeError as exc:  # e.g. non-string keyword names
        raise ValidationError(f"metadata: {exc}", [Problem("metadata", str(exc))]) from None
    too_big = bounds_problems(validated.to_chroma())
    if too_big:
        problems = [Problem(key, message) for key, message in too_big]
        raise ValidationError(joined(problems), problems)
    return validated


def read_stored(doc_type: object, meta: Mapping[str, object] | None) -> tuple[BaseMetadata | None, dict[str, str]]:
    """Metadata as Chroma holds it, validated again for a rewrite: ``(model, problems)``.

    A row written by an older version or directly through Chroma may hold values today's rules refuse.
    Such values are dropped (``problems`` says which and why) instead of failing the rewrite, so the
    rewrite repairs the row; a global memory that names an entity (older versions stored those) is read
    as global. ``model`` is None when the row cannot be read even so (no usable time, a bad scope)."""
    data = {k: v for k, v in from_chroma(dict(meta or {})).items() if k != "ts_epoch"}
    problems: dict[str, str] = {}
    if (
        data.get("type") == DocType.MEMORY.value
        and data.get("scope", GLOBAL_SCOPE) == GLOBAL_SCOPE
        and data.get("entity") is not None
    ):
        problems["entity"] = f"a global memory names entity {data.pop('entity')!r}; read as global"
    try:
        parse_timestamp(data.get("timestamp"))
    except ValueError:
        epoch = (meta or {}).get("ts_epoch")
        problems["timestamp"] = f"timestamp {data.get('timestamp')!r} is not a time; ts_epoch used"
        data["timestamp"] = epoch
    fixed = {"type", "timestamp", "scope", "metadata"}
    for _ in range(len(data) + 1):
        try:
            return validate_metadata(doc_type, data), problems
        except ValidationError as exc:
            fields = [p.field or "metadata" for p in exc.problems]
            bad = {f if f in data else f.split(".")[0] for f in fields}
            droppable = (bad - fixed) & set(data)
            if not droppable:
                problems["metadata"] = str(exc)
                return None, problems
            for key in droppable:
                problems[key] = f"{key} {data.pop(key)!r} is not valid any more; dropped"
    return None, problems  # pragma: no cover - every pass drops a key


def read_for_rewrite(doc_type: object, doc_id: str, meta: Mapping[str, object] | None, remedy: str) -> BaseMetadata:
    """:func:`read_stored` for a write that rewrites the document: its model, or a :class:`ValidationError`
    naming what cannot be read and ``remedy`` (what the caller can do instead)."""
    model, problems = read_stored(doc_type, meta)
    if model is None:
        raise ValidationError(
            f"{DocType(doc_type).value} {doc_id!r} as stored cannot be read ({'; '.join(problems.values())}); {remedy}"
        )
    return model


def from_chroma(meta: Mapping[str, object] | None) -> dict[str, object]:
    """Stored metadata as callers see it: lists restored (``tags`` absent -> [])."""
    out = dict(meta or {})
    if out.get("type") == DocType.MEMORY.value:
        out.setdefault("tags", [])
    return out


def get_all_schemas() -> dict[str, dict[str, object]]:
    """The JSON Schema of every document type's metadata, keyed by type."""
    return {name: model.model_json_schema(by_alias=True) for name, model in MODELS.items()}


def schema_info(doc_type: object) -> dict[str, object]:
    """``{"document_type", "schema", "fields", "required_fields"}`` for one type."""
    model = model_for(doc_type)
    name = _type_name(model)
    schema = model.model_json_schema(by_alias=True)
    fields: dict[str, dict[str, object]] = {}
    for key, prop in schema.get("properties", {}).items():
        fields[key] = {
            "type": prop.get("type") or [p.get("type") for p in prop.get("anyOf", []) if p.get("type")],
            "description": prop.get("description", ""),
            "required": key in schema.get("required", []),
            **({"default": prop["default"]} if "default" in prop else {}),
        }
    return {
        "document_type": name,
        "schema": schema,
        "fields": fields,
        "required_fields": list(schema.get("required", [])),
    }
