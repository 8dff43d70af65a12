"""Memory formation's model providers: :class:`OllamaExtractor` and :class:`OpenAIExtractor`, built from plain
arguments;
:func:`brain.wiring.get_extractor` builds it from the settings, or gives None when formation is off
(:func:`brain.wiring.formation_off_reason` says why). See :mod:`brain.providers.extractors.base` for the
contract."""

from __future__ import annotations

from brain.model.errors import ExtractorError, ExtractorUnavailable
from brain.providers.extractors.base import Extractor, ModelAnswer
from brain.providers.extractors.ollama import OllamaExtractor
from brain.providers.extractors.openai import OpenAIExtractor

__all__ = [
    "Extractor",
    "ExtractorError",
    "ExtractorUnavailable",
    "ModelAnswer",
    "OllamaExtractor",
    "OpenAIExtractor",
]
