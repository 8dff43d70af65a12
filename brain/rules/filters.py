"""Friendly filters -> Chroma ``where`` clauses.

A plain dict means "all of these": ``{"type": "memory", "scope": "global"}`` becomes
``{"$and": [{"type": "memory"}, {"scope": "global"}]}``. A list value means "any of"
(``$in``); ``tags`` means "has every one of these tags" (``$contains``, Chroma >= 1.5);
``timestamp`` comparisons accept ISO times and are rewritten onto the numeric ``ts_epoch``
(Chroma's range operators take numbers only). Anything Chroma cannot express raises
:class:`FilterError` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from brain.model.errors import FilterError, Problem
from brain.model.schemas import parse_timestamp

SCALAR = (str, int, float, bool)
COMPARISON = {"$eq", "$ne"}
RANGE = {"$gt", "$gte", "$lt", "$lte"}
MEMBERSHIP = {"$in", "$nin"}
CONTAINS = {"$contains", "$not_contains"}
OPERATORS = COMPARISON | RANGE | MEMBERSHIP | CONTAINS
LOGICAL = {"$and", "$or"}


def _fail(key: str, message: str) -> FilterError:
    return FilterError(f"where[{key!r}]: {message}", [Problem(f"where.{key}", message)])


def _iso(key: str, value: object) -> str:
    try:
        return parse_timestamp(value, key).isoformat()
    except ValueError as exc:
        raise _fail(key, str(exc)) from None


def _scalar(key: str, value: object) -> Any:
    if isinstance(value, datetime):
        return _iso(key, value)
    if value is None or not isinstance(value, SCALAR):
        raise _fail(key, f"value must be a string, number or boolean, got {value!r}")
    return value


def _homogeneous_list(key: str, op: str, value: object) -> list[object]:
    if not isinstance(value, (list, tuple, set, frozenset)) or not value:
        raise _fail(key, f"{op} needs a non-empty list, got {value!r}")
    items = [_iso(key, v) if key == "timestamp" else _scalar(key, v) for v in value]
    kinds = {bool if isinstance(v, bool) else (float if isinstance(v, (int, float)) else str) for v in items}
    if len(kinds) > 1:
        raise _fail(key, f"{op} values must all be of one type, got {value!r}")
    if any(isinstance(v, float) for v in items):  # Chroma wants one type: 5 and 4.0 become 5.0 and 4.0
        items = [float(v) for v in items]
    return items


def _timestamp_clause(op: str, value: object) -> dict[str, object]:
    try:
        epoch = parse_timestamp(value, "where timestamp").timestamp()
    except ValueError as exc:
        raise _fail("timestamp", str(exc)) from None
    return {"ts_epoch": {op: epoch}}


def _condition(key: str, cond: object) -> list[dict[str, object]]:
    """Clauses (to be and-ed) for one key."""
    if not isinstance(key, str) or not key or key.startswith("$"):
        raise _fail(str(key), f"unknown key or operator {key!r}; use a metadata field name, '$and' or '$or'")
    if key == "tags" and not isinstance(cond, dict):
        tags = [cond] if isinstance(cond, str) else cond
        if not isinstance(tags, (list, tuple, set)) or not tags or not all(isinstance(t, str) for t in tags):
            raise _fail(key, f"tags filter must be a tag or a non-empty list of tags, got {cond!r}")
        return [{"tags": {"$contains": t}} for t in tags]
    if isinstance(cond, dict):
        if not cond:
            raise _fail(key, "empty operator dict")
        clauses = []
        for op, value in cond.items():
            if op not in OPERATORS:
                raise _fail(key, f"unknown operator {op!r}; allowed: {', '.join(sorted(OPERATORS))}")
            if key == "timestamp" and op in RANGE | COMPARISON:
                if op in RANGE:
                    clauses.append(_timestamp_clause(op, value))
                else:
                    clauses.append({"timestamp": {op: _iso(key, value)}})
                continue
            if op in RANGE:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise _fail(key, f"{op} takes a number, got {value!r} (compare times through 'timestamp')")
                clauses.append({key: {op: value}})
            elif op in MEMBERSHIP:
                clauses.append({key: {op: _homogeneous_list(key, op, value)}})
            else:
                clauses.append({key: {op: _scalar(key, value)}})
        return clauses
    if isinstance(cond, (list, tuple, set, frozenset)):
        return [{key: {"$in": _homogeneous_list(key, "$in", cond)}}]
    if key == "timestamp":
        return [{"timestamp": _iso(key, cond)}]
    return [{key: _scalar(key, cond)}]


def _clauses(where: Mapping[str, object]) -> list[dict[str, object]]:
    clauses: list[dict[str, object]] = []
    for key, cond in where.items():
        if key in LOGICAL:
            if not isinstance(cond, (list, tuple)) or not cond:
                raise _fail(key, f"{key} needs a non-empty list of filters")
            parts = [_combine(_clauses(_mapping(key, c))) for c in cond]
            clauses.append(parts[0] if len(parts) == 1 else {key: parts})
        else:
            clauses.extend(_condition(key, cond))
    return clauses


def _mapping(key: str, value: object) -> dict[str, object]:
    if not isinstance(value, dict) or not value:
        raise _fail(key, f"each item must be a non-empty filter dict, got {value!r}")
    return value


def _combine(clauses: list[dict[str, object]]) -> dict[str, object]:
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def to_chroma_where(where: Mapping[str, object] | None, **fixed: object) -> dict[str, object] | None:
    """Translate a friendly filter, and-ed with ``fixed`` conditions, into a Chroma ``where``."""
    if where is not None and not isinstance(where, dict):
        raise FilterError(f"where must be a dict, got {type(where).__name__}")
    clauses = _clauses({k: v for k, v in fixed.items() if v is not None})
    if where:
        clauses.extend(_clauses(where))
    return _combine(clauses) if clauses else None
