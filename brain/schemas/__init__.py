"""Document types and their metadata models.

Every document in the ``conversations`` collection carries a ``type`` and the metadata of that type,
validated here before anything is written. ``to_chroma`` turns a model into the flat dict Chroma
stores: ISO ``timestamp`` normalised to UTC plus a numeric ``ts_epoch`` (Chroma's range operators
take numbers only), underscore keys for the FAQ's specialist fields, no empty lists (Chroma
rejects them).

Every key the store itself reads back is either a typed field of a model (``importance``,
``created_at``, ``last_used``, ``status``, ``part_of``, ...) or reserved
(:data:`RESERVED_KEYS`: computed or set by the store, never given as metadata). Every stored value
is bounded (the ``MAX_*`` limits below), because Chroma fails on a document with a few thousand
metadata values and then refuses every later write to the collection.

The package: :mod:`.values` (types, scopes, times, ids and their checks), :mod:`.limits` (reserved
keys, bounds, the keys the store interprets), :mod:`.models` (one metadata model per type) and
:mod:`.validation` (validating metadata, reading back what Chroma holds). Everything is re-exported
here: import from ``brain.schemas``.
"""

from brain.schemas.limits import (
    INACTIVE_STATUSES,
    LEGACY_STATUS_KEY,
    MAX_K,
    MAX_KEY_LENGTH,
    MAX_LIST_ITEM_LENGTH,
    MAX_LIST_ITEMS,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_KEYS,
    MAX_STRING_LENGTH,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    PART_OF_KEY,
    RESERVED_HINTS,
    RESERVED_KEYS,
    STATUS_KEY,
    STATUSES,
    XAIBO_INDEX_PREFIX,
    Status,
    bounds_problems,
    check_extra_metadata,
    check_k,
    is_inactive,
    is_part,
    metadata_value_problem,
)
from brain.schemas.models import (
    MODELS,
    BaseMetadata,
    FaqMetadata,
    MemoryMetadata,
    PersonaMetadata,
    SummaryMetadata,
    TurnMetadata,
)
from brain.schemas.validation import (
    from_chroma,
    get_all_schemas,
    model_for,
    read_stored,
    schema_info,
    validate_metadata,
)
from brain.schemas.values import (
    CONVERSATION_ID_MAX_LENGTH,
    CONVERSATION_ID_PATTERN,
    DOC_TYPES,
    ENTITY_MAX_LENGTH,
    ENTITY_PATTERN,
    GLOBAL_SCOPE,
    ConversationId,
    DocType,
    Source,
    check_conversation_id,
    check_last_used,
    check_scope,
    entity_of,
    entity_scope,
    format_timestamp,
    format_turn_range,
    memory_scope,
    parse_timestamp,
    parse_turn_range,
    utc_now,
    valid_conversation_id,
    valid_entity_scope,
)

__all__ = [
    "CONVERSATION_ID_MAX_LENGTH",
    "MAX_K",
    "check_k",
    "CONVERSATION_ID_PATTERN",
    "DOC_TYPES",
    "ENTITY_MAX_LENGTH",
    "ENTITY_PATTERN",
    "GLOBAL_SCOPE",
    "INACTIVE_STATUSES",
    "LEGACY_STATUS_KEY",
    "MAX_KEY_LENGTH",
    "MAX_LIST_ITEMS",
    "MAX_LIST_ITEM_LENGTH",
    "MAX_METADATA_ENTRIES",
    "MAX_METADATA_KEYS",
    "MAX_STRING_LENGTH",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "MODELS",
    "PART_OF_KEY",
    "RESERVED_HINTS",
    "RESERVED_KEYS",
    "STATUSES",
    "STATUS_KEY",
    "XAIBO_INDEX_PREFIX",
    "BaseMetadata",
    "ConversationId",
    "DocType",
    "FaqMetadata",
    "MemoryMetadata",
    "PersonaMetadata",
    "Source",
    "Status",
    "SummaryMetadata",
    "TurnMetadata",
    "bounds_problems",
    "check_conversation_id",
    "check_extra_metadata",
    "check_last_used",
    "check_scope",
    "entity_of",
    "entity_scope",
    "format_timestamp",
    "format_turn_range",
    "from_chroma",
    "get_all_schemas",
    "is_inactive",
    "is_part",
    "memory_scope",
    "metadata_value_problem",
    "model_for",
    "parse_timestamp",
    "parse_turn_range",
    "read_stored",
    "schema_info",
    "utc_now",
    "valid_conversation_id",
    "valid_entity_scope",
    "validate_metadata",
]
