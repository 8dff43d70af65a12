"""brain — the memory layer of a chat assistant.

:func:`open` gives a :class:`Brain`: the store, its mirror, the chat layer, the summariser and the
specialist registry wired once (:mod:`brain.core`); start there.

One Chroma collection (``conversations``) holds five document types — persona, faq, memory,
turn, summary — each validated by :mod:`brain.schemas`. :class:`RagStore` writes and reads them
(:func:`open_store` opens one with its mirror);
memories are ranked exactly by similarity, importance and recency. :class:`ChatMemory` is what a
chat backend talks to (context per message, exchanges, summaries); :class:`EngramMirror` keeps the
memories in an Engram-compatible SQLite file; :func:`export_pam` / :func:`import_pam` speak
Portable AI Memory.
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
    StoreLocked,
    StoreUnavailable,
    ValidationError,
)
from brain.chat import ChatMemory, Context, Exchange
from brain.core import Brain, open as open, open_store  # noqa: A004 (brain.open, re-exported)
from brain.mirror import EngramMirror, EmbeddingProtocolError
from brain.pam import export_pam, import_pam
from brain.rag_store import RagStore
from brain.ranking import ScoreWeights
from brain.results import Document, Hit, MemoryHit
from brain.schemas import DocType, get_all_schemas, schema_info, validate_metadata
from brain.startup import StartupReport, startup
from brain.summarizers import SummarizerError, SummarizerUnavailable

__version__ = "0.1.0"

# `open` is left out of __all__: `from brain import *` must not shadow the built-in open
__all__ = [
    "Brain",
    "BrainError",
    "ChatMemory",
    "Context",
    "EmbeddingProtocolError",
    "EngramMirror",
    "Exchange",
    "StoreLocked",
    "SummarizerError",
    "SummarizerUnavailable",
    "export_pam",
    "import_pam",
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
    "open_store",
    "schema_info",
    "startup",
    "validate_metadata",
]
