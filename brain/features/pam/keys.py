"""The brain metadata keys that carry PAM-only information, shared by the memory and conversation
mappings: what a PAM object holds that brain has no field for travels as JSON in these keys, so an
export writes it back unchanged. See docs/pam.md.
"""

from __future__ import annotations

import orjson

#: brain metadata keys that carry PAM-only information (a memory's status is brain's own typed field,
#: :data:`brain.model.schemas.STATUS_KEY`)
TYPE_KEY, EXTRA_KEY = "pam_type", "pam_extra"
#: the key of brain's block inside a PAM memory's ``metadata`` (and a conversation's ``raw_metadata``)
BRAIN_KEY = "brain"
#: turn metadata key holding, on a conversation's first turn, the PAM conversation fields brain has
#: no place for (its PAM ``id`` when that is not the brain id, ``title``, ``provider``, ...), as JSON
CONVERSATION_KEY = "pam_conversation"


def load_extra(
    value: object, doc_id: str, warnings: list[str], kind: str = "memory", key: str = EXTRA_KEY
) -> dict[str, object]:
    """The JSON object kept in a ``pam_extra`` / ``pam_conversation`` value ({} when there is none);
    a value that is not one is left out of the export with a warning."""
    if value is None:
        return {}
    try:
        extra = orjson.loads(value) if isinstance(value, str) else None
    except orjson.JSONDecodeError:
        extra = None
    if not isinstance(extra, dict):
        warnings.append(f"{kind} {doc_id}: metadata {key} is not a JSON object; exported without it")
        return {}
    return extra
