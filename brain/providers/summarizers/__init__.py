"""Conversation summarisers: :func:`summarizer_of_kind` builds the one a ``BRAIN_SUMMARIZER`` kind names,
from plain arguments (:func:`brain.wiring.get_summarizer` builds it from the settings); the extractive one
is the deterministic fallback (see :mod:`brain.providers.summarizers.base` for the contract)."""

from __future__ import annotations

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
    "TurnText",
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


#: every summariser BRAIN_SUMMARIZER can select
SUMMARIZER_KINDS = (OllamaSummarizer.kind, ExtractiveSummarizer.kind)
