"""What one stored row means to the in-process index (:mod:`brain.store.memory_index`): its kind, and the
fields it ranks and filters by, read defensively.

Rows are validated on the way in, but one written by an older version or directly through Chroma may hold
anything: :func:`read_row` gives every unusable value a safe default and names it as a problem.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np

from brain.model.schemas import GLOBAL_SCOPE, check_scope, is_inactive, is_part
from brain.rules import ranking

#: importance of a row whose stored importance cannot be read (the schema's default)
DEFAULT_IMPORTANCE = 3.0

# row kinds (see brain.store.memory_index)
MEMORY, PART, RETIRED, SUPERSEDED = 0, 1, 2, 3
ROW_KINDS: dict[str, tuple[int, ...]] = {
    "memories": (MEMORY,),
    "parts": (PART,),
    "memories_and_parts": (MEMORY, PART),
    "held": (MEMORY, SUPERSEDED),
}

# the per-row arrays (attribute -> dtype, whether it has a column per dimension), as MemoryIndex lays them out
ARRAYS: dict[str, tuple[type, bool]] = {
    "_f32": (np.float32, True),
    "_i8": (np.int8, True),
    "_scale": (np.float64, False),
    "_qerr": (np.float64, False),
    "_importance": (np.float64, False),
    "_epoch": (np.float64, False),
    "_used": (np.float64, False),  # last use (recency_from="last_used")
    "_scope": (np.int32, False),
    "_kind": (np.int8, False),
    # the validity window [valid_from, valid_until) and the expiry, epoch seconds (inf: none)
    "_from": (np.float64, False),
    "_until": (np.float64, False),
    "_expires": (np.float64, False),
}
#: arrays where infinity means "never"
OPEN_ENDED = frozenset({"_until", "_expires"})


def row_kind(meta: Mapping[str, object]) -> int:
    """A row's kind: superseded or retired (an inactive status) before part (``part_of``) before memory."""
    if is_inactive(meta):
        return SUPERSEDED if meta.get("status") == "superseded" else RETIRED
    return PART if is_part(meta) else MEMORY


def finite_number(value: object) -> float | None:
    """``value`` as a finite float, or None when it is not a number (booleans and strings are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def read_row(meta: Mapping[str, object]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """What the index needs of a stored row: ``({"importance", "epoch", "used", "scope", "kind", "tags"}, problems)``.

    Rows are validated on the way in, but one written by an older version or directly through Chroma
    may hold anything. A value that cannot be used gets a safe default (importance 3, epoch 0, no last
    use, no tags) and a problem; a row without a valid scope is not usable at all (None): guessing its
    scope could show it to the wrong entity."""
    problems: dict[str, str] = {}
    try:
        scope = check_scope(meta.get("scope", GLOBAL_SCOPE))
    except ValueError:
        return None, {"scope": f"scope {meta.get('scope')!r} is not 'global' or 'entity:<name>'; row left out"}
    if scope != meta.get("scope", GLOBAL_SCOPE):  # shown as its canonical name's, it could be another entity's
        return None, {
            "scope": f"scope {meta.get('scope')!r} names its entity in another form than the canonical "
            f"{scope!r} (stored before names were canonical); row left out"
        }
    importance = finite_number(meta.get("importance", DEFAULT_IMPORTANCE))
    if importance is None or not 1 <= importance <= 5:
        problems["importance"] = f"importance {meta.get('importance')!r} is not 1..5; ranked as {DEFAULT_IMPORTANCE:g}"
        importance = DEFAULT_IMPORTANCE
    epoch = finite_number(meta.get("ts_epoch"))
    if epoch is None:
        problems["ts_epoch"] = f"ts_epoch {meta.get('ts_epoch')!r} is not epoch seconds; ranked as oldest"
        epoch = 0.0
    if meta.get("last_used") is not None and finite_number(meta["last_used"]) is None:
        problems["last_used"] = f"last_used {meta.get('last_used')!r} is not epoch seconds; ignored"
    used = ranking.recency_epoch(meta)
    created = _time(meta, "created_at", {})  # only the fallback start of the window: not the index's to report
    valid_from = _time(meta, "valid_from", problems)
    valid_from = valid_from if valid_from is not None else created if created is not None else epoch
    valid_until = _time(meta, "valid_until", problems)
    expires = _time(meta, "expires_at", problems)
    tags = meta.get("tags")
    if tags is not None and (
        isinstance(tags, str) or not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags)
    ):
        problems["tags"] = f"tags {tags!r} are not a list of strings; ignored"
        tags = None
    return {
        "importance": importance,
        "epoch": epoch,
        "used": used,
        "scope": scope,
        "kind": row_kind(meta),
        "tags": frozenset(tags or ()),
        "from": valid_from,
        "until": math.inf if valid_until is None else valid_until,
        "expires": math.inf if expires is None else expires,
    }, problems


def _time(meta: Mapping[str, object], key: str, problems: dict[str, str]) -> float | None:
    """``meta[key]`` (an ISO time) as epoch seconds; None when absent or, with a problem, unreadable."""
    value = meta.get(key)
    if value is None:
        return None
    try:
        if isinstance(value, str):
            # stored times are normalised ISO strings: the plain parser reads them (a rebuild reads many)
            when = datetime.fromisoformat(value)
            if when.tzinfo is not None:
                return when.timestamp()
    except ValueError:
        pass
    problems[key] = f"{key} {value!r} is not an ISO time with a timezone; ignored"
    return None


def check_export(dimension: int, arrays: dict[str, np.ndarray], rows: Mapping[str, object]) -> None:
    """Raise ``ValueError`` naming what of an exported index (:meth:`MemoryIndex.export
    <brain.store.memory_index.MemoryIndex.export>`) does not fit: a missing array, a shape, a dtype, rows
    of another length, or rows that claim what their arrays do not hold."""
    ids, texts, metas, tags, scopes = (rows.get(key) for key in ("ids", "texts", "metas", "tags", "scopes"))
    problems = rows.get("problems")
    if not (
        isinstance(ids, list)
        and isinstance(texts, list)
        and isinstance(metas, list)
        and isinstance(tags, list)
        and isinstance(scopes, list)
        and isinstance(problems, dict)
    ):
        raise ValueError("rows need the lists ids, texts, metas, tags, scopes and the mapping problems")
    n = len(ids)
    if not len(texts) == len(metas) == len(tags) == n or len(set(ids)) != n:
        raise ValueError(
            f"{n} ids but {len(texts)} texts, {len(metas)} metadatas, {len(tags)} tag lists (or repeated ids)"
        )
    for what, values, kind in (
        ("ids", ids, str),
        ("texts", texts, str),
        ("metas", metas, dict),
        ("tags", tags, list),
        ("scopes", scopes, str),
    ):
        if not all(isinstance(v, kind) for v in values):
            raise ValueError(f"{what} must all be of type {kind.__name__}")
    for name, (dtype, width) in ARRAYS.items():
        arr = arrays.get(name.lstrip("_"))
        shape = (n, dimension) if width else (n,)
        if arr is None or arr.shape != shape or arr.dtype != np.dtype(dtype):
            got = "missing" if arr is None else f"{arr.dtype}{list(arr.shape)}"
            raise ValueError(f"array {name.lstrip('_')} is {got}, not {np.dtype(dtype)}{list(shape)}")
    codes = arrays["scope"]
    if n and (codes.min() < 0 or codes.max() >= len(scopes)):
        raise ValueError(f"scope codes outside the {len(scopes)} scopes")
    # what the rows claim must be what the arrays hold: a row is ranked by its arrays and shown with its
    # metadata, so a scope code another scope's row carries would show that row to the wrong entity
    for name, (dtype, _) in ARRAYS.items():
        column = arrays[name.lstrip("_")]
        if not np.issubdtype(np.dtype(dtype), np.floating):
            continue
        if name in OPEN_ENDED and (np.isnan(column).any() or (column == -np.inf).any()):
            raise ValueError(f"array {name.lstrip('_')} holds NaN or minus infinity")
        if name not in OPEN_ENDED and not np.isfinite(column).all():
            raise ValueError(f"array {name.lstrip('_')} holds values that are not finite (NaN or infinity)")
    for row, (meta, code) in enumerate(zip(metas, codes.tolist())):
        if meta.get("scope", GLOBAL_SCOPE) != scopes[code]:
            raise ValueError(
                f"row {ids[row]!r} has scope {meta.get('scope', GLOBAL_SCOPE)!r} in its metadata "
                f"but {scopes[code]!r} in the scope codes"
            )
    kinds = arrays["kind"].tolist()
    for row, meta in enumerate(metas):
        if row_kind(meta) != kinds[row]:
            raise ValueError(
                f"row {ids[row]!r} has kind {kinds[row]} in the arrays, not the {row_kind(meta)} its metadata says"
            )
