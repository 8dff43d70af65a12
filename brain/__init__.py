"""brain — the memory layer of a chat assistant.

One Chroma collection (``conversations``) holds five document types — persona, faq, memory,
turn, summary — each validated by :mod:`brain.schemas`. :class:`RagStore` writes and reads them;
memories are ranked exactly by similarity, importance and recency.
"""

from brain.config import Settings, load_settings
from brain.errors import (
    BrainError,
    ConfigError,
    EmbedderError,
    EmbedderUnavailable,
    EmbeddingModelMismatch,
    FilterError,
    NotFound,
    StoreUnavailable,
    ValidationError,
)
from brain.rag_store import RagStore
from brain.ranking import ScoreWeights
from brain.results import Document, Hit, MemoryHit
from brain.schemas import DocType, get_all_schemas, schema_info, validate_metadata
from brain.startup import StartupReport, startup

__version__ = "0.1.0"

__all__ = [
    "BrainError",
    "ConfigError",
    "DocType",
    "Document",
    "EmbedderError",
    "EmbedderUnavailable",
    "EmbeddingModelMismatch",
    "FilterError",
    "Hit",
    "MemoryHit",
    "NotFound",
    "RagStore",
    "ScoreWeights",
    "Settings",
    "StartupReport",
    "StoreUnavailable",
    "ValidationError",
    "get_all_schemas",
    "load_settings",
    "schema_info",
    "startup",
    "validate_metadata",
]
