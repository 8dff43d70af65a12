"""Memory formation's model providers: ``get_extractor(settings)`` gives the Ollama extractor when
formation can run, and :func:`formation_off_reason` says why it cannot (for health and for the error
that ``extract_memories`` raises). See :mod:`brain.providers.extractors.base` for the contract."""

from __future__ import annotations

from brain.config import Settings
from brain.providers.extractors.base import Extractor, ExtractorError, ExtractorUnavailable, ModelAnswer
from brain.providers.extractors.ollama import OllamaExtractor

__all__ = [
    "Extractor",
    "ExtractorError",
    "ExtractorUnavailable",
    "ModelAnswer",
    "OllamaExtractor",
    "formation_off_reason",
    "get_extractor",
]


def formation_off_reason(settings: Settings) -> str | None:
    """Why memory formation is off with ``settings`` (a sentence naming the settings to change), or None
    when it is on."""
    if not settings.formation:
        return "BRAIN_FORMATION is false: set BRAIN_FORMATION=true to form memories from conversations"
    if settings.summarizer == "extractive":
        return (
            "BRAIN_SUMMARIZER=extractive: no model is configured, so no memories are formed; set "
            "BRAIN_SUMMARIZER=ollama (formation asks BRAIN_FORMATION_MODEL on OLLAMA_HOST)"
        )
    return None


def get_extractor(settings: Settings) -> OllamaExtractor | None:
    """The model ``BRAIN_FORMATION_MODEL`` on ``OLLAMA_HOST`` (the server is not contacted here), or None
    when formation is off (:func:`formation_off_reason` says why)."""
    if formation_off_reason(settings) is not None:
        return None
    return OllamaExtractor(settings.formation_model, host=settings.ollama_host, timeout=settings.formation_timeout)
