"""Conversation summarisers: ``get_summarizer(settings)`` gives the model summariser; the
extractive one is the deterministic fallback (see :mod:`brain.providers.summarizers.base` for the contract)."""

from __future__ import annotations

from brain.config import Settings
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
    "get_summarizer",
    "transcript",
]


def get_summarizer(settings: Settings) -> Summarizer:
    """The summariser ``BRAIN_SUMMARIZER`` names: the Ollama model ``BRAIN_SUMMARY_MODEL`` on ``OLLAMA_HOST``
    (the server is not contacted here), or the extractive one."""
    if settings.summarizer == ExtractiveSummarizer.kind:
        return ExtractiveSummarizer()
    if settings.summarizer == OllamaSummarizer.kind:
        return OllamaSummarizer(settings.summary_model, host=settings.ollama_host, timeout=settings.summary_timeout)
    raise ConfigError(
        f"BRAIN_SUMMARIZER={settings.summarizer!r} names no summariser; choose from {', '.join(SUMMARIZER_KINDS)}"
    )


#: every summariser BRAIN_SUMMARIZER can select
SUMMARIZER_KINDS = (OllamaSummarizer.kind, ExtractiveSummarizer.kind)
