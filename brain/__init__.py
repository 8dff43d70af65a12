"""brain — the memory layer of a chat assistant.

:func:`open` gives a :class:`Brain`: the store, its mirror, the chat layer, the summariser and the
specialist registry wired once (:mod:`brain.app.core`); start there.

One Chroma collection (``conversations``) holds five document types — persona, faq, memory,
turn, summary — each validated by :mod:`brain.model.schemas`. :class:`RagStore` writes and reads them
(:func:`open_store` opens one with its mirror);
memories are ranked exactly by similarity, importance and recency. :class:`ChatMemory` is what a
chat backend talks to (context per message, exchanges, summaries); :func:`export_pam` / :func:`import_pam`
speak Portable AI Memory. The errors are in :mod:`brain.errors` (:class:`BrainError` is here too), the
document models in :mod:`brain.schemas`.
"""

import importlib
from typing import TYPE_CHECKING

# what each public name is, imported on first use: `import brain.model.errors` or `brain --help` need none of it
_EXPORTS: dict[str, tuple[str, str]] = {
    "Brain": ("brain.app.core", "Brain"),
    "BrainError": ("brain.model.errors", "BrainError"),
    "ChatMemory": ("brain.features.chat", "ChatMemory"),
    "Context": ("brain.features.chat", "Context"),
    "Document": ("brain.model.results", "Document"),
    "Exchange": ("brain.features.chat", "Exchange"),
    "MemoryHit": ("brain.model.results", "MemoryHit"),
    "RagStore": ("brain.app.rag_store", "RagStore"),
    "Settings": ("brain.config", "Settings"),
    "StartupReport": ("brain.app.startup", "StartupReport"),
    "export_pam": ("brain.features.pam", "export_pam"),
    "get_all_schemas": ("brain.model.schemas", "get_all_schemas"),
    "import_pam": ("brain.features.pam", "import_pam"),
    "load_settings": ("brain.config", "load_settings"),
    "open": ("brain.ops", "open"),
    "open_operations": ("brain.ops", "open_operations"),
    "Operations": ("brain.ops", "Operations"),
    "open_store": ("brain.app.core", "open_store"),
    "schema_info": ("brain.model.schemas", "schema_info"),
    "startup": ("brain.app.startup", "startup"),
    "validate_metadata": ("brain.model.schemas", "validate_metadata"),
}

from brain.model.version import __version__ as __version__  # noqa: E402 (below the table of lazy names)

# `open` is left out of __all__: `from brain import *` must not shadow the built-in open
__all__ = [
    "Brain",
    "BrainError",
    "ChatMemory",
    "Context",
    "Document",
    "Exchange",
    "MemoryHit",
    "Operations",
    "RagStore",
    "Settings",
    "StartupReport",
    "export_pam",
    "get_all_schemas",
    "import_pam",
    "load_settings",
    "open_operations",
    "open_store",
    "schema_info",
    "startup",
    "validate_metadata",
]


def __getattr__(name: str) -> object:
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
    from brain.app.core import Brain, open_store
    from brain.app.rag_store import RagStore
    from brain.app.startup import StartupReport, startup
    from brain.config import Settings, load_settings
    from brain.features.chat import ChatMemory, Context, Exchange
    from brain.features.pam import export_pam, import_pam
    from brain.model.errors import BrainError
    from brain.model.results import Document, MemoryHit
    from brain.model.schemas import get_all_schemas, schema_info, validate_metadata
    from brain.ops import Operations, open_operations
    from brain.ops import open as open
