"""What metadata may hold: the keys the store reserves, the bounds on every stored value (Chroma fails
on a document with a few thousand metadata values and then refuses every later write to the
collection), and the keys the store interprets."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic_core import PydanticCustomError

from brain.model.errors import Problem, ValidationError, joined

#: ``RagStore.update_memory`` (a document's id, text, vector, type, scope, origin and time are its own)
RESERVED_KEYS = frozenset({"type", "timestamp", "ts_epoch", "source", "scope", "id", "text", "embedding"})
#: what to do instead of setting a reserved key, for the error message
RESERVED_HINTS = {
    "type": "the document type is given once, as the document's type",
    "timestamp": "give the time as the timestamp argument",
    "ts_epoch": "it is computed from the timestamp",
    "source": "it records where the document came from and does not change",
    "scope": "a memory's scope never changes: store a new memory in the other scope and delete this one",
    "id": "the id is the document's own",
    "text": "give the new text as the text argument",
    "embedding": "the store embeds the text with its own model",
}
# key prefixes Chroma refuses or reserves for itself
_CHROMA_RESERVED_PREFIXES = ("$", "#", "chroma:")

# ---- limits ------------------------------------------------------------------------------------
# Chroma keeps one row per metadata key and per list item; one document with more than about 5,460
# of them fails Chroma's compaction, after which every write to the collection fails too (and every
# read after a restart). These limits keep every document far below that, with room for real data.
#: keys in one document's metadata (brain's own fields included)
MAX_METADATA_KEYS = 100
#: characters in a metadata key
MAX_KEY_LENGTH = 128
#: characters in a string value
MAX_STRING_LENGTH = 65_536
#: items in a list value
MAX_LIST_ITEMS = 256
#: characters in a string item of a list
MAX_LIST_ITEM_LENGTH = 1_024
#: a memory's tags, and the characters of one tag
MAX_TAGS = 100
MAX_TAG_LENGTH = 100
#: keys plus list items of one document (what Chroma stores as rows)
MAX_METADATA_ENTRIES = 2_048
#: characters of a memory's text: half the default context budget (RAG_CONTEXT_MAX_CHARS, 8,000), so a
#: memory fits a prompt whole beside the persona and the message; a longer one would be stored and then
#: dropped from every prompt (the budget drops whole items)
MAX_MEMORY_CHARS = 4_000


#: characters of one recorded turn (a user's message, an answer): twice the default context budget, and room for
#: the chat proxy's note that it cut a longer answer. Writing a longer turn would hold up every other request to
#: the store while it is embedded, for a text no prompt could show
MAX_TURN_CHARS = 16_400


def turn_text_problem(field: str, text: str) -> str | None:
    """Why a turn's ``text`` is too long to record (:data:`MAX_TURN_CHARS`), or None."""
    if len(text) <= MAX_TURN_CHARS:
        return None
    return (
        f"{field} of {len(text):,} characters; a turn holds at most {MAX_TURN_CHARS:,} (MAX_TURN_CHARS), as no "
        f"prompt could show a longer one: record the first part, or ingest the text as a knowledge-base document "
        f"(nothing was written)"
    )


def memory_text_problem(text: str) -> str | None:
    """Why a memory's ``text`` is too long to store (:data:`MAX_MEMORY_CHARS`), or None."""
    if len(text) <= MAX_MEMORY_CHARS:
        return None
    return (
        f"a memory of {len(text):,} characters; at most {MAX_MEMORY_CHARS:,} (MAX_MEMORY_CHARS, half the default "
        f"RAG_CONTEXT_MAX_CHARS) are stored, as a prompt could not show a longer one: split it into several "
        f"memories, or ingest it as a knowledge-base document"
    )


# ---- keys the store interprets ------------------------------------------------------------------
#: a memory's lifecycle status (PAM's vocabulary); absent means active. Memories with an inactive one
#: are kept (store, mirror, exports) but never ranked for an entity
STATUS_KEY = "status"
STATUSES = ("active", "superseded", "deprecated", "retracted", "archived")
Status = Literal["active", "superseded", "deprecated", "retracted", "archived"]
INACTIVE_STATUSES = frozenset({"superseded", "retracted", "archived"})
#: how a memory replaced the one it supersedes (``change``): the fact changed, or the old one was wrong
CHANGES = ("update", "contradict")
Change = Literal["update", "contradict"]
#: the fields that link a supersession chain: written by ``RagStore.supersede`` (and imports), never edited
CHAIN_KEYS = frozenset({"supersedes", "superseded_by", "valid_until", "change"})
#: where the memory formation of a summary's window stands (``formation`` on the summary)
FORMATION_STATES = ("pending", "done", "failed")
#: how a formation attempt ended (``formation_outcome``): its answer accepted as given or after the one repair;
#: refused because it was not JSON, had the wrong fields, was too long (cut at the token limit or past the byte
#: bound) or named another entity; the model unreachable or answering no chat response; or the write refused
FORMATION_OUTCOMES = (
    "accepted",
    "repaired",
    "not_json",
    "wrong_fields",
    "too_long",
    "foreign",
    "unreachable",
    "model_error",
    "conflict",
)
FormationState = Literal["pending", "done", "failed"]
#: characters of the last formation failure kept on the summary (``formation_error``)
FORMATION_ERROR_LENGTH = 500
#: the name stores written before ``status`` existed used; still read as ``status`` on input
LEGACY_STATUS_KEY = "pam_status"
#: the id of what a row is a part of (a long memory a chunk continues, an index a raw vector row
#: belongs to); absent for a memory of its own. Parts are never ranked as memories
PART_OF_KEY = "part_of"
#: the part_of id of a Xaibo vector index's rows: the index is not a stored memory, so its rows point
#: at a name rather than a document (the scope keeps indexes of different scopes apart)
XAIBO_INDEX_PREFIX = "xaibo-index:"


def is_inactive(meta: Mapping[str, object]) -> bool:
    """Whether a stored memory's status retires it (kept, never ranked)."""
    status = meta.get(STATUS_KEY)
    return isinstance(status, str) and status in INACTIVE_STATUSES


def is_part(meta: Mapping[str, object]) -> bool:
    """Whether a stored row is a part of something else (``part_of``), not a memory of its own."""
    part_of = meta.get(PART_OF_KEY)
    return isinstance(part_of, str) and bool(part_of)


_INT64 = (-(2**63), 2**63 - 1)


def metadata_value_problem(value: object) -> str | None:
    """Why Chroma cannot store ``value`` as a metadata value (or brain's limits refuse it), or None
    when it can."""
    if value is None:
        return "null values cannot be stored"
    if isinstance(value, str):
        if len(value) > MAX_STRING_LENGTH:
            return f"a string of {len(value)} characters; at most {MAX_STRING_LENGTH} (MAX_STRING_LENGTH) are stored"
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if _INT64[0] <= value <= _INT64[1] else "integer out of the 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else "NaN and infinite numbers cannot be stored"
    if isinstance(value, (list, tuple)):
        if not value:
            return "empty lists cannot be stored"
        if len(value) > MAX_LIST_ITEMS:
            return f"a list of {len(value)} items; at most {MAX_LIST_ITEMS} (MAX_LIST_ITEMS) are stored"
        kinds = {type(v) for v in value}
        if len(kinds) > 1 or not kinds <= {str, int, float, bool}:
            return "lists must hold strings, numbers or booleans, all of one type"
        for n, item in enumerate(value):
            if isinstance(item, str) and len(item) > MAX_LIST_ITEM_LENGTH:
                return (
                    f"item {n} is a string of {len(item)} characters; list items have at most "
                    f"{MAX_LIST_ITEM_LENGTH} (MAX_LIST_ITEM_LENGTH)"
                )
        problems = [p for p in map(metadata_value_problem, value) if p]
        return problems[0] if problems else None
    if isinstance(value, dict):
        return "nested objects cannot be stored"
    return f"values of type {type(value).__name__} cannot be stored"


def check_tags(value: object) -> list[str]:
    """A memory's tags: a list of strings, each stripped, blanks and repeats dropped (first seen kept), at
    most MAX_TAGS of at most MAX_TAG_LENGTH characters; ValueError saying what is wrong. None is no tags."""
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"tags must be a list of strings, got {value!r}")
    seen: dict[str, None] = {}
    for tag in value:
        if not isinstance(tag, str):
            raise ValueError(f"tags must be a list of strings, got {tag!r} ({type(tag).__name__}) in it")
        tag = tag.strip()
        if len(tag) > MAX_TAG_LENGTH:
            raise ValueError(
                f"tags: a tag of {len(tag)} characters ({tag[:30]!r}...); at most {MAX_TAG_LENGTH} (MAX_TAG_LENGTH)"
            )
        if tag:
            seen.setdefault(tag, None)
    if len(seen) > MAX_TAGS:
        raise ValueError(f"tags: {len(seen)} tags given; a memory has at most {MAX_TAGS} (MAX_TAGS)")
    return list(seen)


def key_error(key: str, message: str) -> PydanticCustomError:
    """A model error about metadata key ``key`` (validate_metadata reports it under that field)."""
    return PydanticCustomError("metadata_key", message, {"key": key})


def storable_extra(key: str, value: object) -> None:
    problem = metadata_value_problem(value)
    if problem:
        shown = repr(value) if len(repr(value)) <= 80 else f"{repr(value)[:80]}..."
        raise key_error(
            key,
            f"metadata field {key!r} must be a string, number, boolean or a non-empty list of one of those, "
            f"got {shown} ({problem})",
        )


def bounds_problems(stored: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(key, message)`` for every limit the flat metadata dict ``stored`` breaks (see ``MAX_*``)."""
    problems: list[tuple[str, str]] = []
    for key, value in stored.items():
        if len(key) > MAX_KEY_LENGTH:
            problems.append(
                (
                    key,
                    f"metadata key {key[:40]!r}... has {len(key)} characters; at most "
                    f"{MAX_KEY_LENGTH} (MAX_KEY_LENGTH)",
                )
            )
        problem = metadata_value_problem(value) if isinstance(value, (str, list, tuple)) else None
        if problem:
            problems.append((key, f"metadata field {key!r}: {problem}"))
    if len(stored) > MAX_METADATA_KEYS:
        problems.append(
            (
                "metadata",
                f"metadata has {len(stored)} fields; at most {MAX_METADATA_KEYS} "
                f"(MAX_METADATA_KEYS) are stored per document",
            )
        )
    entries = sum(len(v) if isinstance(v, (list, tuple)) else 1 for v in stored.values())
    if entries > MAX_METADATA_ENTRIES:
        problems.append(
            (
                "metadata",
                f"metadata holds {entries} values (fields plus list items); at most "
                f"{MAX_METADATA_ENTRIES} (MAX_METADATA_ENTRIES) are stored per document",
            )
        )
    return problems


def check_extra_metadata(
    metadata: object, arguments: tuple[str, ...] = (), *, call: str = "this call"
) -> dict[str, Any]:
    """``metadata`` as a dict of extra keys for ``call``, refusing the reserved keys (and the keys
    given as ``call``'s own ``arguments``) with :class:`ValidationError` naming each one."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError(
            f"metadata must be a mapping of keys to values, got {type(metadata).__name__}",
            [Problem("metadata", "not a mapping")],
        )
    problems = []
    for key in metadata:
        if key in RESERVED_KEYS:
            message = f"metadata.{key}: {key!r} cannot be set through metadata in {call}: {RESERVED_HINTS[key]}"
        elif key in arguments:
            message = f"metadata.{key}: give {key!r} as an argument of {call}, not in metadata"
        else:
            continue
        problems.append(Problem(f"metadata.{key}", message))
    if problems:
        raise ValidationError(joined(problems) + " (nothing was written)", problems)
    return dict(metadata)


#: the most results one search may ask for (store, turn search, mirror, specialists, the CLI's --k)
MAX_K = 1000


def check_k(k: object) -> int:
    """``k``, an int from 1 to :data:`MAX_K` (a bool is not a count)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError.of("k", f"k must be an integer between 1 and {MAX_K}, got {k!r}")
    return k
