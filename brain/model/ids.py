"""Document ids: ``doc-<uuid>``, random for new documents, derived from content where re-writing the
same thing must land on the same document (memories, ingested chunks, persona sections)."""

from __future__ import annotations

import hashlib
import re
import uuid

from brain.model.errors import ValidationError
from brain.model.schemas import GLOBAL_SCOPE
from brain.model.schemas.values import CONVERSATION_ID_MAX_LENGTH

# uuid5 namespace of brain's derived ids
_NAMESPACE = uuid.UUID("5f0c7f0e-4a55-4a8e-9a77-6a3a9b1e2c10")


def new_id() -> str:
    return f"doc-{uuid.uuid4()}"


def normalize_memory_text(text: str) -> str:
    """What makes two memory texts 'the same': case and runs of whitespace do not count."""
    return " ".join(text.split()).casefold()


def memory_id(text: str, scope: str = GLOBAL_SCOPE, attempt: int = 0) -> str:
    """The derived id of a memory; ``attempt`` > 0 gives the alternatives used when the first one is
    held by a memory whose text was changed in place."""
    key = scope + chr(31) + normalize_memory_text(text) + (f"{chr(31)}{attempt}" if attempt else "")
    return f"doc-{uuid.uuid5(_NAMESPACE, key)}"


def derived_id(*parts: str) -> str:
    """A stable ``doc-<uuid>`` from the parts that identify a document (e.g. source file, position, hash)."""
    return f"doc-{uuid.uuid5(_NAMESPACE, chr(31).join(parts))}"


#: how an idempotency key may look: what an HTTP header carries, without control characters
IDEMPOTENCY_KEY_MAX = 255


def check_idempotency_key(value: object) -> str:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= IDEMPOTENCY_KEY_MAX
        or not all(" " <= c <= "~" for c in value)
        or not value.strip()
    ):
        raise ValidationError.of(
            "idempotency_key",
            (
                f"idempotency_key must be 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters (e.g. a UUID), "
                f"got {value!r} (nothing was written)"
            ),
        )
    return value


# ---- an entity's own conversation ids ------------------------------------------------------------------
_TAGGED = re.compile(r"\.([0-9a-f]{16})$")


def conversation_tag(entity: str) -> str:
    """The tag that marks a conversation id as ``entity``'s own (16 hex digits of its name's SHA-256)."""
    return hashlib.sha256(entity.encode()).hexdigest()[:16]


def own_conversation_id(conversation_id: str, entity: str) -> str:
    """``entity``'s conversation of the id ``conversation_id`` a client named: ``<id>.<tag>``, the tag the
    entity's (a long id hashed to fit). Another entity's conversation of that id is another conversation."""
    tag = conversation_tag(entity)
    if len(conversation_id) + 1 + len(tag) > CONVERSATION_ID_MAX_LENGTH:
        conversation_id = f"conv-{hashlib.sha256(conversation_id.encode()).hexdigest()[:32]}"
    return f"{conversation_id}.{tag}"


def is_own_form(conversation_id: str, entity: str) -> bool:
    """Whether ``conversation_id`` is one of :func:`own_conversation_id`'s for ``entity``."""
    return conversation_id.endswith("." + conversation_tag(entity))


def tagged_for_another(conversation_id: str, entity: str) -> bool:
    """Whether ``conversation_id`` carries another entity's tag: an id no caller but that entity may start,
    since the tag is computable and such an id is where that entity's own conversation of the name lives."""
    found = _TAGGED.search(conversation_id)
    return found is not None and found.group(1) != conversation_tag(entity)
