"""Conversation summarisers: :func:`summarizer_of_kind` builds the one a ``BRAIN_SUMMARIZER`` kind names,
from plain arguments (:func:`brain.wiring.get_summarizer` builds it from the settings); the extractive one
is the deterministic fallback (see :mod:`brain.providers.summarizers.base` for the contract)."""

from __future__ import annotations

from typing import Protocol

from brain.model.errors import ConfigError
from brain.providers.summarizers.base import Summarizer, SummarizerError, SummarizerUnavailable, TurnText, transcript
from brain.providers.summarizers.extractive import ExtractiveSummarizer
from brain.providers.summarizers.ollama import OllamaSummarizer

__all__ = [
    "ExtractiveSummarizer",
    "OllamaSummarizer",
    "SUMMARIZER_KINDS",
    "Summarizer",
    "SummarizerError",
    "SummarizerUnavailable",
    "SummarizerSettings",
    "TurnText",
    "get_summarizer",
    "summarizer_of_kind",
    "transcript",
]


def summarizer_of_kind(kind: str, *, model: str, host: str, timeout: float) -> Summarizer:
    """The summariser of ``kind`` (``BRAIN_SUMMARIZER``): the Ollama chat ``model`` on ``host``, each call
    waiting at most ``timeout`` seconds (the server is not contacted here), or the extractive one, which
    needs none of them."""
    if kind == ExtractiveSummarizer.kind:
        return ExtractiveSummarizer()
    if kind == OllamaSummarizer.kind:
        return OllamaSummarizer(model, host=host, timeout=timeout)
    raise ConfigError(f"BRAIN_SUMMARIZER={kind!r} names no summariser; choose from {', '.join(SUMMARIZER_KINDS)}")


class SummarizerSettings(Protocol):
    """The settings :func:`get_summarizer` reads (``brain.config.Settings`` has them)."""

    @property
    def summarizer(self) -> str: ...
    @property
    def summary_model(self) -> str: ...
    @property
    def ollama_host(self) -> str: ...
    @property
    def summary_timeout(self) -> float: ...


def get_summarizer(settings: SummarizerSettings) -> Summarizer:
    """The summariser the settings name. Kept for the callers that have not moved to
    :func:`brain.wiring.get_summarizer`, the one to use (this layer cannot name ``Settings``)."""
    return summarizer_of_kind(
        settings.summarizer, model=settings.summary_model, host=settings.ollama_host, timeout=settings.summary_timeout
    )


#: every summariser BRAIN_SUMMARIZER can select
SUMMARIZER_KINDS = (OllamaSummarizer.kind, ExtractiveSummarizer.kind)
