"""brain — the memory layer of a chat assistant.

:func:`open` gives a :class:`Brain`: the store, its mirror, the chat layer, the summariser and the
specialist registry wired once (:mod:`brain.app.core`); start there.

One Chroma collection (``conversations``) holds five document types — persona, faq, memory,
turn, summary — each validated by :mod:`brain.model.schemas`. :class:`RagStore` writes and reads them
(:func:`open_store` opens one with its mirror);
memories are ranked exactly by similarity, importance and recency. :class:`ChatMemory` is what a
chat backend talks to (context per message, exchanges, summaries); :class:`EngramMirror` keeps the
memories in an Engram-compatible SQLite file; :func:`export_pam` / :func:`import_pam` speak
Portable AI Memory.
"""

import importlib
from typing import TYPE_CHECKING, Any

# what each public name is, imported on first use: `import brain.model.errors` or `brain --help` need none of it
_EXPORTS: dict[str, tuple[str, str]] = {
    "Brain": ("brain.app.core", "Brain"),
    "BrainError": ("brain.model.errors", "BrainError"),
    "ChatMemory": ("brain.features.chat", "ChatMemory"),
    "ConfigError": ("brain.model.errors", "ConfigError"),
    "Context": ("brain.features.chat", "Context"),
    "DocType": ("brain.model.schemas", "DocType"),
    "Document": ("brain.model.results", "Document"),
    "EmbedderError": ("brain.model.errors", "EmbedderError"),
    "EmbedderUnavailable": ("brain.model.errors", "EmbedderUnavailable"),
    "EmbeddingModelMismatch": ("brain.model.errors", "EmbeddingModelMismatch"),
    "EmbeddingProtocolError": ("brain.features.mirror", "EmbeddingProtocolError"),
    "EngramMirror": ("brain.features.mirror", "EngramMirror"),
    "Exchange": ("brain.features.chat", "Exchange"),
    "FilterError": ("brain.model.errors", "FilterError"),
    "Hit": ("brain.model.results", "Hit"),
    "MemoryHit": ("brain.model.results", "MemoryHit"),
    "NotFound": ("brain.model.errors", "NotFound"),
    "RagStore": ("brain.app.rag_store", "RagStore"),
    "ScoreWeights": ("brain.rules.ranking", "ScoreWeights"),
    "Settings": ("brain.config", "Settings"),
    "StartupReport": ("brain.app.startup", "StartupReport"),
    "StoreLocked": ("brain.model.errors", "StoreLocked"),
    "StoreUnavailable": ("brain.model.errors", "StoreUnavailable"),
    "SummarizerError": ("brain.providers.summarizers", "SummarizerError"),
    "SummarizerUnavailable": ("brain.providers.summarizers", "SummarizerUnavailable"),
    "ValidationError": ("brain.model.errors", "ValidationError"),
    "export_pam": ("brain.features.pam", "export_pam"),
    "get_all_schemas": ("brain.model.schemas", "get_all_schemas"),
    "import_pam": ("brain.features.pam", "import_pam"),
    "load_settings": ("brain.config", "load_settings"),
    "open": ("brain.app.core", "open"),
    "open_store": ("brain.app.core", "open_store"),
    "schema_info": ("brain.model.schemas", "schema_info"),
    "startup": ("brain.app.startup", "startup"),
    "validate_metadata": ("brain.model.schemas", "validate_metadata"),
}

from brain.model.version import __version__

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
    from brain.app.core import Brain
    from brain.model.errors import BrainError
    from brain.features.chat import ChatMemory
    from brain.model.errors import ConfigError
    from brain.features.chat import Context
    from brain.model.schemas import DocType
    from brain.model.results import Document
    from brain.model.errors import EmbedderError
    from brain.model.errors import EmbedderUnavailable
    from brain.model.errors import EmbeddingModelMismatch
    from brain.features.mirror import EmbeddingProtocolError
    from brain.features.mirror import EngramMirror
    from brain.features.chat import Exchange
    from brain.model.errors import FilterError
    from brain.model.results import Hit
    from brain.model.results import MemoryHit
    from brain.model.errors import NotFound
    from brain.app.rag_store import RagStore
    from brain.rules.ranking import ScoreWeights
    from brain.config import Settings
    from brain.app.startup import StartupReport
    from brain.model.errors import StoreLocked
    from brain.model.errors import StoreUnavailable
    from brain.providers.summarizers import SummarizerError
    from brain.providers.summarizers import SummarizerUnavailable
    from brain.model.errors import ValidationError
    from brain.features.pam import export_pam
    from brain.model.schemas import get_all_schemas
    from brain.features.pam import import_pam
    from brain.config import load_settings
    from brain.app.core import open
    from brain.app.core import open_store
    from brain.model.schemas import schema_info
    from brain.app.startup import startup
    from brain.model.schemas import validate_metadata
