"""How a brain document becomes an engram ``memories`` row, and back.

Our document -> engram columns:

============== ===============================================================================
column         value
============== ===============================================================================
id             the document id
content        the text
memory_type    ``metadata["engram_type"]`` when it names an engram type; else, for memories, the
               first tag that is an engram type name (``episodic``, ``procedural``, ``opinion``,
               ``emotional``, ``relational``, ``causal``, ``factual``); else by document type:
               memory -> factual, turn -> episodic, summary -> episodic, faq -> factual,
               persona -> procedural
layer          memories by importance: 5 -> core, 3-4 -> working, 1-2 -> archive;
               persona -> core, faq -> archive (searched on demand), turn/summary -> working
importance     memory importance / 5 (0.2 .. 1.0); persona 1.0; other types 0.6 (= 3/5)
core_strength  1.0 in the core layer, else 0.0 (engram's default); working_strength 1.0
created_at     ``ts_epoch`` (epoch seconds)
namespace      scope ``global`` -> ``default`` (engram's default namespace); ``entity:<name>`` as is
               (scopes never read ``default``, so the way back is unambiguous)
source         our ``source`` (chat, kb, system, import)
metadata       JSON ``{"brain": <our full metadata>}``: the way back reads only this, so nothing
               is lost (timestamp string, ts_epoch, tags, entity, conversation_id, extra keys)
============== ===============================================================================

engram's dynamic columns (``working_strength`` after creation, ``pinned``, ``consolidation_count``,
``last_consolidated``, ``contradicts``, ``summary``) are engram's own: an update of an existing row
never overwrites them.

Rows engram added itself (``metadata`` without a ``"brain"`` object) are *foreign*. They are never
deleted or rewritten by :func:`brain.features.mirror.sync.sync_mirror`, reported by ``verify_mirror``, and read
back by :func:`foreign_metadata` as memories so that a restore keeps them:
type ``memory``, source ``import``, timestamp from ``created_at``, importance
``round(importance * 5)`` clamped to 1..5, scope from the namespace (``default`` -> global, a valid
``entity:<name>`` -> that scope, anything else -> global plus ``engram_namespace``), and the extra keys
``origin = "engram"`` and ``engram_type`` (so writing them back keeps their engram type).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from brain.model.schemas import GLOBAL_SCOPE, check_scope, entity_of

ENGRAM_TYPES = ("factual", "episodic", "relational", "emotional", "procedural", "opinion", "causal")
ENGRAM_LAYERS = ("core", "working", "archive")
DEFAULT_NAMESPACE = "default"
BRAIN_KEY = "brain"
TYPE_KEY = "engram_type"
NAMESPACE_KEY = "engram_namespace"
ORIGIN_KEY = "origin"

_TYPE_BY_DOC = {
    "memory": "factual",
    "turn": "episodic",
    "summary": "episodic",
    "faq": "factual",
    "persona": "procedural",
}
_LAYER_BY_DOC = {"persona": "core", "faq": "archive", "turn": "working", "summary": "working"}


def engram_type(metadata: dict[str, Any]) -> str:
    explicit = metadata.get(TYPE_KEY)
    if explicit in ENGRAM_TYPES:
        return str(explicit)
    doc_type = metadata.get("type", "memory")
    if doc_type == "memory":
        for tag in metadata.get("tags") or ():
            if isinstance(tag, str) and tag.lower() in ENGRAM_TYPES:
                return tag.lower()
    return _TYPE_BY_DOC.get(doc_type, "factual")


def layer(metadata: dict[str, Any]) -> str:
    doc_type = metadata.get("type", "memory")
    if doc_type == "memory":
        importance = int(metadata.get("importance", 3))
        return "core" if importance >= 5 else "working" if importance >= 3 else "archive"
    return _LAYER_BY_DOC.get(doc_type, "working")


def importance(metadata: dict[str, Any]) -> float:
    doc_type = metadata.get("type", "memory")
    if doc_type == "memory":
        return int(metadata.get("importance", 3)) / 5
    return 1.0 if doc_type == "persona" else 0.6


def namespace(metadata: dict[str, Any]) -> str:
    named = metadata.get(NAMESPACE_KEY)
    if isinstance(named, str) and named:
        return named
    scope = metadata.get("scope", GLOBAL_SCOPE)
    return DEFAULT_NAMESPACE if scope == GLOBAL_SCOPE else scope


def scope_of(namespace_value: str | None) -> tuple[str, str | None]:
    """``(scope, leftover namespace)``: the scope a namespace stands for, and the namespace when it is none."""
    if namespace_value in (None, "", DEFAULT_NAMESPACE):
        return GLOBAL_SCOPE, None
    try:
        return check_scope(namespace_value), None
    except ValueError:
        return GLOBAL_SCOPE, namespace_value


def to_row(doc_id: str, text: str, metadata: dict[str, Any], epoch: float | None = None) -> dict[str, Any]:
    """The engram columns of one document (see the module docstring); ``epoch`` defaults to ``ts_epoch``."""
    row_layer = layer(metadata)
    return {
        "id": doc_id,
        "content": text,
        "memory_type": engram_type(metadata),
        "layer": row_layer,
        "created_at": float(metadata["ts_epoch"] if epoch is None else epoch),
        "core_strength": 1.0 if row_layer == "core" else 0.0,
        "importance": importance(metadata),
        "source": str(metadata.get("source", "")),
        "namespace": namespace(metadata),
        "metadata": metadata_json(metadata),
    }


def metadata_json(metadata: dict[str, object]) -> str:
    return json.dumps({BRAIN_KEY: metadata}, ensure_ascii=False, sort_keys=True, allow_nan=False)


def brain_metadata(raw: str | None) -> dict[str, object] | None:
    """Our metadata stored in a row's ``metadata`` JSON, or None for a foreign row."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return None
    inner = data.get(BRAIN_KEY) if isinstance(data, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("type"), str):
        return inner
    return None


def foreign_metadata(
    memory_type: str, created_at: float, importance_value: float, namespace_value: str | None
) -> dict[str, object]:
    """Our metadata for a row engram wrote itself (see the module docstring)."""
    epoch = float(created_at) if created_at is not None and math.isfinite(float(created_at)) else 0.0
    when = datetime.fromtimestamp(epoch, tz=UTC)
    try:
        level = round(float(importance_value) * 5)
    except (TypeError, ValueError):
        level = 3
    scope, leftover = scope_of(namespace_value)
    meta: dict[str, object] = {
        "type": "memory",
        "timestamp": when.isoformat(),
        "ts_epoch": when.timestamp(),
        "source": "import",
        "scope": scope,
        "importance": min(5, max(1, level)),
        "tags": [],
        ORIGIN_KEY: "engram",
        TYPE_KEY: memory_type if memory_type in ENGRAM_TYPES else "factual",
    }
    entity = entity_of(scope)
    if entity is not None:
        meta["entity"] = entity
    if leftover is not None:
        meta[NAMESPACE_KEY] = leftover
    return meta
