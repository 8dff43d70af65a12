"""The metadata keys the Xaibo adapter writes on the documents it stores."""

from brain.schemas import XAIBO_CHUNK_KEY, XAIBO_KIND_KEY, MemoryMetadata

KIND_KEY = XAIBO_KIND_KEY  # "memory" (BrainMemory's heads and chunks) or "vector" (BrainVectorIndex rows)
MEMORY_ID_KEY = "xaibo.memory_id"
CHUNK_KEY = XAIBO_CHUNK_KEY  # 0 = the head, 1.. = continuation chunks
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
