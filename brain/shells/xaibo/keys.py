"""The metadata keys the Xaibo adapter writes on the documents it stores."""

from collections.abc import Mapping

from brain.model.schemas import PART_OF_KEY, XAIBO_INDEX_PREFIX, MemoryMetadata

# A continuation chunk is a part of its memory (``part_of`` = the memory's id), a vector row a part of
# its index (``part_of`` = XAIBO_INDEX_PREFIX + the index name): the store's typed field, which keeps
# both out of memory retrieval.
CHUNKS_KEY = "xaibo.chunks"  # on the head: how many chunks the text has
REVISION_KEY = "xaibo.revision"
INDEX_KEY = "xaibo.index"  # a vector row's index name
MAPPED_KEY = "xaibo.mapped"  # attribute names that were stored as the store's own fields
ATTR_PREFIX = "xaibo.attr."
JSON_PREFIX = "xaibo.json."
REPLACE = "$replace"

#: attributes that become the store's own memory fields when their value is valid
MAPPED_FIELDS = ("importance", "tags", "entity", "conversation_id")
MODEL_FIELDS = frozenset(MemoryMetadata.model_fields) | {"ts_epoch"}

# Xaibo's VectorMemory passes each chunk's text as "chunk_text"; the first of these is a row's text
TEXT_ATTRIBUTES = ("chunk_text", "text", "content")


def vector_index_part_of(index: str) -> str:
    """The ``part_of`` of a vector index's rows."""
    return XAIBO_INDEX_PREFIX + index


def written_by_xaibo(metadata: Mapping[str, object]) -> bool:
    """Whether a row was written by these modules (a memory's head or chunk, or a vector row) rather than
    by the rest of the assistant."""
    return REVISION_KEY in metadata or INDEX_KEY in metadata


__all__ = [
    "ATTR_PREFIX",
    "CHUNKS_KEY",
    "INDEX_KEY",
    "JSON_PREFIX",
    "MAPPED_FIELDS",
    "MAPPED_KEY",
    "MODEL_FIELDS",
    "PART_OF_KEY",
    "REPLACE",
    "REVISION_KEY",
    "TEXT_ATTRIBUTES",
    "vector_index_part_of",
    "written_by_xaibo",
]
