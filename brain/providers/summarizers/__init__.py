"""Conversation summarisers: :func:`summarizer_of_kind` builds the one a ``BRAIN_SUMMARIZER`` kind names,
from plain arguments (:func:`brain.wiring.get_summarizer` builds it from the settings); the extractive one
is the deterministic fallback (see :mod:`brain.providers.summarizers.base` for the contract)."""

from __future__ import annotations

import pydantic

from brain.model.errors import ConfigError, SummarizerError, SummarizerUnavailable
from brain.providers.summarizers.base import Summarizer, TurnText, transcript
from brain.providers.summarizers.extractive import ExtractiveSummarizer
from brain.providers.summarizers.ollama import OllamaSummarizer
from brain.providers.summarizers.openai import OpenAISummarizer

__all__ = [
    "ExtractiveSummarizer",
    "OllamaSummarizer",
    "OpenAISummarizer",
    "SUMMARIZER_KINDS",
    "Summarizer",
    "SummarizerError",
    "SummarizerUnavailable",
    "TurnText",
    "summarizer_of_kind",
    "transcript",
]


def summarizer_of_kind(
    kind: str,
    *,
    model: str,
    host: str,
    timeout: float,
    base_url: str | None = None,
    api_key: pydantic.SecretStr | str | None = None,
) -> Summarizer:
    """The summariser of ``kind`` (``BRAIN_SUMMARIZER``): the chat ``model`` on the Ollama server ``host``, or on
    the OpenAI-compatible ``base_url`` with ``api_key``, each call waiting at most ``timeout`` seconds (no
    server is contacted here); or the extractive one, which needs none of them."""
    if kind == ExtractiveSummarizer.kind:
        return ExtractiveSummarizer()
    if kind == OllamaSummarizer.kind:
        return OllamaSummarizer(model, host=host, timeout=timeout)
    if kind == OpenAISummarizer.kind:
        return OpenAISummarizer(model, base_url=base_url, api_key=api_key, timeout=timeout)
    raise ConfigError(f"BRAIN_SUMMARIZER={kind!r} names no summariser; choose from {', '.join(SUMMARIZER_KINDS)}")


#: every summariser BRAIN_SUMMARIZER can select
SUMMARIZER_KINDS = (OllamaSummarizer.kind, OpenAISummarizer.kind, ExtractiveSummarizer.kind)
