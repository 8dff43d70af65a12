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

import importlib
from typing import TYPE_CHECKING, Any

# what each public name is, imported on first use: `import brain.errors` or `brain --help` need none of it
_EXPORTS: dict[str, tuple[str, str]] = {
    "Brain": ("brain.core", "Brain"),
    "BrainError": ("brain.errors", "BrainError"),
    "ChatMemory": ("brain.chat", "ChatMemory"),
    "ConfigError": ("brain.errors", "ConfigError"),
    "Context": ("brain.chat", "Context"),
    "DocType": ("brain.schemas", "DocType"),
    "Document": ("brain.results", "Document"),
    "EmbedderError": ("brain.errors", "EmbedderError"),
    "EmbedderUnavailable": ("brain.errors", "EmbedderUnavailable"),
    "EmbeddingModelMismatch": ("brain.errors", "EmbeddingModelMismatch"),
    "EmbeddingProtocolError": ("brain.mirror", "EmbeddingProtocolError"),
    "EngramMirror": ("brain.mirror", "EngramMirror"),
    "Exchange": ("brain.chat", "Exchange"),
    "FilterError": ("brain.errors", "FilterError"),
    "Hit": ("brain.results", "Hit"),
    "MemoryHit": ("brain.results", "MemoryHit"),
    "NotFound": ("brain.errors", "NotFound"),
    "RagStore": ("brain.rag_store", "RagStore"),
    "ScoreWeights": ("brain.ranking", "ScoreWeights"),
    "Settings": ("brain.config", "Settings"),
    "StartupReport": ("brain.startup", "StartupReport"),
    "StoreLocked": ("brain.errors", "StoreLocked"),
    "StoreUnavailable": ("brain.errors", "StoreUnavailable"),
    "SummarizerError": ("brain.summarizers", "SummarizerError"),
    "SummarizerUnavailable": ("brain.summarizers", "SummarizerUnavailable"),
    "ValidationError": ("brain.errors", "ValidationError"),
    "export_pam": ("brain.pam", "export_pam"),
    "get_all_schemas": ("brain.schemas", "get_all_schemas"),
    "import_pam": ("brain.pam", "import_pam"),
    "load_settings": ("brain.config", "load_settings"),
    "open": ("brain.core", "open"),
    "open_store": ("brain.core", "open_store"),
    "schema_info": ("brain.schemas", "schema_info"),
    "startup": ("brain.startup", "startup"),
    "validate_metadata": ("brain.schemas", "validate_metadata"),
}

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


def __getattr__(name: str) -> Any:
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'brain' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # the names as type checkers and IDEs see them
    from brain.core import Brain
    from brain.errors import BrainError
    from brain.chat import ChatMemory
    from brain.errors import ConfigError
    from brain.chat import Context
    from brain.schemas import DocType
    from brain.results import Document
    from brain.errors import EmbedderError
    from brain.errors import EmbedderUnavailable
    from brain.errors import EmbeddingModelMismatch
    from brain.mirror import EmbeddingProtocolError
    from brain.mirror import EngramMirror
    from brain.chat import Exchange
    from brain.errors import FilterError
    from brain.results import Hit
    from brain.results import MemoryHit
    from brain.errors import NotFound
    from brain.rag_store import RagStore
    from brain.ranking import ScoreWeights
    from brain.config import Settings
    from brain.startup import StartupReport
    from brain.errors import StoreLocked
    from brain.errors import StoreUnavailable
    from brain.summarizers import SummarizerError
    from brain.summarizers import SummarizerUnavailable
    from brain.errors import ValidationError
    from brain.pam import export_pam
    from brain.schemas import get_all_schemas
    from brain.pam import import_pam
    from brain.config import load_settings
    from brain.core import open
    from brain.core import open_store
    from brain.schemas import schema_info
    from brain.startup import startup
    from brain.schemas import validate_metadata
