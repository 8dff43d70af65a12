"""The values documents carry: their types and sources, scopes, times, conversation ids and turn ranges,
with the checks that say what a bad one must look like."""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any

from pydantic import BeforeValidator

from brain.model.errors import ValidationError


# not StrEnum: its str() and format() give the value where these give "DocType.MEMORY", and such strings
# may be stored (index snapshot keys) or asserted on; changing that is a change of its own
class DocType(str, Enum):  # noqa: UP042
    PERSONA = "persona"
    FAQ = "faq"
    MEMORY = "memory"
    TURN = "turn"
    SUMMARY = "summary"


class Source(str, Enum):  # noqa: UP042 (as DocType)
    CHAT = "chat"
    KB = "kb"
    SYSTEM = "system"
    IMPORT = "import"


DOC_TYPES: tuple[str, ...] = tuple(t.value for t in DocType)
GLOBAL_SCOPE = "global"
#: an entity's scope is this prefix and its name (:func:`entity_scope`, :func:`entity_of`)
ENTITY_SCOPE_PREFIX = "entity:"
#: characters no name may hold, as a regex class body: the Unicode categories Cc (control characters:
#: C0, DEL, C1), Cf (format characters: bidirectional overrides, zero-width ones, ...), Zl and Zp (line
#: and paragraph separators) and Cs (lone surrogates) as of Unicode 14. A terminal or a log line shows
#: a name holding one of them as something else (an escape sequence, text reversed, a line break).
UNPRINTABLE_CLASS = (
    r"\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
    r"\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    r"\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    r"\U000e0001\U000e0020-\U000e007f"
)
#: an entity name (the ``<name>`` of an ``entity:<name>`` scope): 1 to 128 characters, none of them
#: unprinting (:data:`UNPRINTABLE_CLASS`), no space at either end
ENTITY_PATTERN = rf"^[^\s{UNPRINTABLE_CLASS}](?:[^{UNPRINTABLE_CLASS}]{{0,126}}[^\s{UNPRINTABLE_CLASS}])?$"
#: the name rule as the API's JSON Schema publishes it (ECMA-262 regexes, as schema tools read them): the
#: class's characters of the Basic Multilingual Plane, lone surrogates aside (JSON text cannot hold one);
#: the server's own check (:func:`check_name`) refuses the rest too
_PUBLISHED_CLASS = UNPRINTABLE_CLASS.split(r"\U")[0].replace(r"\ud800-\udfff", "")
PUBLISHED_ENTITY_PATTERN = rf"^[^\s{_PUBLISHED_CLASS}](?:[^{_PUBLISHED_CLASS}]{{0,126}}[^\s{_PUBLISHED_CLASS}])?$"
ENTITY_MAX_LENGTH = 128
#: a conversation id, ``conv-<id>``
CONVERSATION_ID_PATTERN = r"^conv-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
CONVERSATION_ID_MAX_LENGTH = 133
#: a speaker's display name (who said a turn, e.g. "Alice", "Brain"): the entity name's rule, so an
#: entity's name is always a valid speaker name (a name is shown on one line: no control characters)
SPEAKER_NAME_PATTERN = ENTITY_PATTERN
SPEAKER_NAME_MAX_LENGTH = ENTITY_MAX_LENGTH
_NAME_RE = re.compile(ENTITY_PATTERN)
_UNPRINTABLE_RE = re.compile(f"[{UNPRINTABLE_CLASS}]")
_UNPRINTABLE_KINDS = {
    "Cc": "control character",
    "Cf": "formatting character",
    "Zl": "line separator",
    "Zp": "paragraph separator",
    "Cs": "lone surrogate",
}
_CONV_RE = re.compile(CONVERSATION_ID_PATTERN)
_RANGE_RE = re.compile(r"^(\d+)-(\d+)$")


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_timestamp(value: object, field: str = "timestamp") -> datetime:
    """ISO 8601 string, datetime or epoch seconds -> aware UTC datetime; naive times are refused."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be an ISO 8601 time with a timezone, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise ValueError(
                f"{field} {value!r} is not a time that can be stored (epoch seconds out of range)"
            ) from None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z") or text.endswith("z"):
            text = text[:-1] + "+00:00"
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{field} must be an ISO 8601 time such as 2026-11-21T09:30:00+00:00, got {value!r}"
            ) from None
    if not isinstance(value, datetime):
        raise ValueError(f"{field} must be an ISO 8601 time with a timezone, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"{field} {value.isoformat()!r} has no timezone: add one, e.g. {value.isoformat()}+00:00")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+14:00 lies before year 1 in UTC
        raise ValueError(
            f"{field} {value.isoformat()!r} is out of range: in UTC it falls outside the years 1..9999"
        ) from None


def format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _check_printable_name(value: object, field: str, what: str) -> str:
    """``value`` if it is one line of printable text of 1 to 128 characters with no space at either end
    (:data:`ENTITY_PATTERN`), else ValueError saying what is wrong. The message shows the name escaped
    (``repr``), so an escape sequence in it is never printed raw."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be {what} (a string), got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{field} is empty: give {what} such as 'alice', or leave {field} out")
    if len(value) > ENTITY_MAX_LENGTH:
        raise ValueError(f"{field} has {len(value)} characters; {what} has at most {ENTITY_MAX_LENGTH}")
    shown = repr(value[:40]) + ("..." if len(value) > 40 else "")
    bad = _UNPRINTABLE_RE.search(value)
    if bad is not None:
        char = bad.group()
        kind = _UNPRINTABLE_KINDS.get(unicodedata.category(char), "unprinting character")
        name = unicodedata.name(char, "") or {"\n": "LINE FEED", "\r": "CARRIAGE RETURN", "\t": "TAB"}.get(char, "")
        raise ValueError(
            f"{field} {shown} is not a valid {what.split(' ', 1)[1]}: it holds the {kind} "
            f"U+{ord(char):04X}{f' ({name})' if name else ''} at position {bad.start()}; a name is one "
            "line of printable text"
        )
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"{field} {shown} is not a valid {what.split(' ', 1)[1]}: it starts or ends with a space "
            "(give the name without them)"
        )
    return value


def canonical_name(value: str) -> str:
    """An entity name's one form: Unicode compatibility normalisation and case folding (NFKC_Casefold:
    NFKC, case folding, NFKC again), so ``Alice``, ``ALICE`` and fullwidth ``ａｌｉｃｅ`` are ``alice``."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())


def check_name(value: object, field: str = "entity") -> str:
    """The canonical form (:func:`canonical_name`) of the entity name ``value``, else ValueError saying
    what is wrong and what a name must look like. Every place that takes an entity name checks it here,
    so two spellings of one name are one entity everywhere. A name is one line of printable text
    (:data:`ENTITY_PATTERN`), holds no scope prefix (``entity:``) and is no path: no ``\\``, no ``/`` at
    either end, no empty, ``.`` or ``..`` part between slashes (``team/ops`` is a name)."""
    value = _check_printable_name(value, field, "an entity name")
    name = canonical_name(value)
    shown = repr(value[:40]) + ("..." if len(value) > 40 else "")
    if name != value:  # compatibility forms can hold spaces, or grow past the length
        _check_printable_name(name, f"{field} {shown} (as {name[:40]!r})", "an entity name")
    if ENTITY_SCOPE_PREFIX in name:
        bare = name.rsplit(ENTITY_SCOPE_PREFIX, 1)[1]
        raise ValueError(
            f"{field} {shown} is not a valid entity name: it holds the scope prefix "
            f"{ENTITY_SCOPE_PREFIX!r}; give the name alone (e.g. {bare!r})"
        )
    parts = name.split("/")
    if "\\" in name or any(part in ("", ".", "..") for part in parts):
        raise ValueError(
            f"{field} {shown} is not a valid entity name: it looks like a file path (a backslash, a "
            "'/' at either end, or an empty, '.' or '..' part between slashes); a name such as "
            "'team/ops' is fine"
        )
    return name


def valid_name(value: object, field: str = "entity") -> str:
    """``value`` if it is an entity name (:func:`check_name`), else :class:`ValidationError` naming ``field``."""
    try:
        return check_name(value, field)
    except ValueError as exc:
        raise ValidationError.of(field, str(exc)) from None


def check_scope(value: object) -> str:
    """``value`` as a scope, its entity's name in canonical form (``entity:Alice`` is ``entity:alice``),
    else ValueError saying what a scope must look like."""
    if not isinstance(value, str):
        raise ValueError(f"scope must be 'global' or 'entity:<name>', got {value!r}")
    if value == GLOBAL_SCOPE:
        return value
    if value.startswith(ENTITY_SCOPE_PREFIX):
        try:
            return ENTITY_SCOPE_PREFIX + check_name(value.removeprefix(ENTITY_SCOPE_PREFIX), "its name")
        except ValueError as exc:
            raise ValueError(f"scope must be 'global' or 'entity:<name>', got {value[:80]!r}: {exc}") from None
    raise ValueError(f"scope must be 'global' or 'entity:<name>', got {value[:60]!r}")


def entity_scope(entity: str) -> str:
    """The scope string of an entity, validated (:func:`check_name`; ValueError saying why not).
    Every scope string of an entity is built here."""
    return ENTITY_SCOPE_PREFIX + check_name(entity)


def entity_of(scope: str) -> str | None:
    """The entity whose scope ``scope`` is, or None for the global scope (the inverse of :func:`entity_scope`)."""
    return scope.removeprefix(ENTITY_SCOPE_PREFIX) if scope.startswith(ENTITY_SCOPE_PREFIX) else None


def memory_scope(scope: Any = None, entity: Any = None) -> str:
    """The scope of a memory given its ``scope`` and/or ``entity`` (raises ValueError).

    ``entity`` *is* a scope: a memory about Bob is stored in ``entity:bob``, and only there. Given
    both, they must agree; given neither, the memory is global. A global memory has no entity."""
    if entity is None:
        return GLOBAL_SCOPE if scope is None else check_scope(scope)
    own = entity_scope(entity)
    if scope is not None and check_scope(scope) != own:
        raise ValueError(
            f"entity {entity!r} and scope {scope!r} disagree: a memory about {entity!r} is stored in scope "
            f"{own!r}; give only the entity, or only the scope"
        )
    return own


def valid_entity_scope(entity: object) -> str:
    """``entity``'s scope, or :class:`ValidationError` naming the field (for callers that take an
    entity as an argument)."""
    return entity_scope(valid_name(entity))


def check_speaker_name(value: object, field: str = "speaker") -> str:
    """``value`` if it is a speaker's display name (:data:`SPEAKER_NAME_PATTERN`), else ValueError
    saying what a name must look like."""
    if isinstance(value, str) and value and not value.strip():
        raise ValueError(f"{field} is empty: give a display name such as 'Alice', or leave {field} out")
    return _check_printable_name(value, field, "a display name")


def valid_speaker_name(value: object, field: str = "speaker") -> str:
    """``value`` if it is a speaker's display name, else :class:`ValidationError` naming ``field``
    (for callers that take a name as an argument)."""
    try:
        return check_speaker_name(value, field)
    except ValueError as exc:
        raise ValidationError.of(field, str(exc)) from None


#: a speaker's display name, checked with a message that says what it must look like
SpeakerName = Annotated[str, BeforeValidator(check_speaker_name)]


def check_importance(value: object) -> int:
    """A memory's importance, 1 to 5; ValueError saying why not. Strict: JSON numbers only (a whole
    float such as 4.0 is accepted, as JSON tools write it)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise ValueError(f"importance must be an integer between 1 and 5, got {value!r}")
    if not 1 <= value <= 5:
        raise ValueError(f"importance must be between 1 and 5, got {value:g}")
    return int(value)


def check_last_used(value: object) -> float:
    """``value`` as a last-use time (epoch seconds, finite, >= 0), else ValueError saying so."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"last_used must be epoch seconds (a number >= 0), got {value!r}")
    return float(value)


def check_conversation_id(value: object) -> str:
    if not isinstance(value, str) or not _CONV_RE.fullmatch(value):
        raise ValueError(f"conversation_id must look like 'conv-<id>' (letters, digits, . _ : -), got {value!r}")
    return value


def valid_conversation_id(value: object) -> str:
    """``value`` if it is a conversation id, else :class:`ValidationError` naming the field (for callers
    that take one as an argument rather than as metadata)."""
    try:
        return check_conversation_id(value)
    except ValueError as exc:
        raise ValidationError.of("conversation_id", str(exc)) from None


#: a conversation id, ``conv-<id>``, checked with a message that says what it must look like
ConversationId = Annotated[str, BeforeValidator(check_conversation_id)]


def parse_turn_range(value: object) -> tuple[int, int]:
    """A summary's ``turn_range`` ``'<start>-<end>'`` as ``(start, end)``, ``1 <= start <= end``;
    ValueError saying what it must look like otherwise."""
    match = _RANGE_RE.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"turn_range must look like '<start>-<end>' e.g. '1-8', got {value!r}")
    start, end = int(match.group(1)), int(match.group(2))
    if start < 1 or start > end:
        raise ValueError(f"turn_range must have 1 <= start <= end, got {value!r}")
    return start, end


def format_turn_range(start: int, end: int) -> str:
    """The ``turn_range`` of turns ``start`` to ``end`` (the inverse of :func:`parse_turn_range`)."""
    return f"{start}-{end}"
