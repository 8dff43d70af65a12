"""Memory formation's model providers: :class:`OllamaExtractor`, built from plain arguments;
:func:`brain.wiring.get_extractor` builds it from the settings, or gives None when formation is off
(:func:`brain.wiring.formation_off_reason` says why). See :mod:`brain.providers.extractors.base` for the
contract."""

from __future__ import annotations

from typing import Protocol

from brain.providers.extractors.base import Extractor, ExtractorError, ExtractorUnavailable, ModelAnswer
from brain.providers.extractors.ollama import OllamaExtractor

__all__ = [
    "Extractor",
    "ExtractorError",
    "ExtractorUnavailable",
    "ModelAnswer",
    "ExtractorSettings",
    "OllamaExtractor",
    "get_extractor",
]


class ExtractorSettings(Protocol):
    """The settings :func:`get_extractor` reads (``brain.config.Settings`` has them)."""

    @property
    def formation(self) -> bool: ...
    @property
    def summarizer(self) -> str: ...
    @property
    def formation_model(self) -> str: ...
    @property
    def ollama_host(self) -> str: ...
    @property
    def formation_timeout(self) -> float: ...


def get_extractor(settings: ExtractorSettings) -> OllamaExtractor | None:
    """The extractor the settings name, or None when formation is off. Kept for the callers that have not
    moved to :func:`brain.wiring.get_extractor`, the one to use (this layer cannot name ``Settings``)."""
    # the rule of brain.wiring.formation_off_reason: formation on, and a model summariser configured
    if not settings.formation or settings.summarizer == "extractive":
        return None
    return OllamaExtractor(settings.formation_model, host=settings.ollama_host, timeout=settings.formation_timeout)
