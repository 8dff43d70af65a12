"""Named errors. Every failure brain reports is one of these, and its message says what to do."""

from __future__ import annotations

from typing import Any


class BrainError(Exception):
    """Base class of every error raised by brain."""


class ConfigError(BrainError):
    """A setting is missing, malformed or out of range."""


class ValidationError(BrainError, ValueError):
    """Input failed validation; nothing was written.

    ``problems`` lists each problem as ``{"item": index or None, "field": name, "message": text}``.
    """

    def __init__(self, message: str, problems: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.problems = problems or []


class FilterError(ValidationError):
    """A ``where`` filter that the store cannot express."""


class EmbedderError(BrainError):
    """The embedder failed (bad model files, bad output)."""


class EmbedderUnavailable(EmbedderError):
    """The embedder cannot be reached (e.g. Ollama is not running or the model is not pulled)."""


class EmbeddingModelMismatch(BrainError):
    """The collection was built with another embedder; vectors from different spaces never mix."""


class StoreUnavailable(BrainError):
    """The Chroma store cannot be opened or reached."""


class StoreNotFound(StoreUnavailable):
    """There is no store where the settings point, and the caller asked not to create one."""


class StoreLocked(StoreUnavailable):
    """Another process has the embedded data directory open (embedded Chroma is single-process)."""


class Forbidden(BrainError):
    """The caller may not do this: e.g. a token bound to one entity asked for another's data."""


class StoreError(StoreUnavailable):
    """Chroma failed or refused an operation on the collection (an internal error, a request it
    cannot serve). The message names the operation and what to check; nothing of a failed write is
    kept by brain's own state."""


class NotFound(BrainError, KeyError):
    """No document with that id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"
