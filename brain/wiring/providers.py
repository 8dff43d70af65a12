"""Settings in, providers out: which embedder, summariser and extractor the configuration names."""

from __future__ import annotations

from brain.config import Settings
from brain.config.fields import EmbedderFields
from brain.providers.embeddings import Embedder, embedder_named
from brain.providers.extractors import Extractor, OllamaExtractor, OpenAIExtractor
from brain.providers.summarizers import ExtractiveSummarizer, OpenAISummarizer, Summarizer, summarizer_of_kind


def get_embedder(settings: EmbedderFields) -> Embedder:
    """The embedder ``BRAIN_EMBEDDER`` names, with the batch size, query cache and Ollama server the
    settings give. Does not load a model or contact a server."""
    return get_embedder_named(settings, settings.embedder)


def get_embedder_named(settings: EmbedderFields, name: str) -> Embedder:
    """The embedder ``name`` (``provider/model``) with the other embedder settings: the batch size, query
    cache and servers (what a store serving another model's collection embeds with)."""
    return embedder_named(
        name,
        batch_size=settings.embed_batch_size,
        cache_size=settings.query_cache_size,
        ollama_host=settings.ollama_host,
        ollama_timeout=settings.ollama_timeout,
        openai_base_url=settings.openai_base_url,
        openai_api_key=settings.openai_api_key,
    )


def get_summarizer(settings: Settings) -> Summarizer:
    """The summariser ``BRAIN_SUMMARIZER`` names: the model ``BRAIN_SUMMARY_MODEL`` on ``OLLAMA_HOST`` or on
    ``BRAIN_OPENAI_BASE_URL`` (no server is contacted here), or the extractive one."""
    return summarizer_of_kind(
        settings.summarizer,
        model=settings.summary_model,
        host=settings.ollama_host,
        timeout=settings.summary_timeout,
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
    )


def formation_off_reason(settings: Settings) -> str | None:
    """Why memory formation is off with ``settings`` (a sentence naming the settings to change), or None
    when it is on."""
    if not settings.formation:
        return "BRAIN_FORMATION is false: set BRAIN_FORMATION=true to form memories from conversations"
    if settings.summarizer == ExtractiveSummarizer.kind:
        return (
            "BRAIN_SUMMARIZER=extractive: no model is configured, so no memories are formed; set "
            "BRAIN_SUMMARIZER=ollama (formation asks BRAIN_FORMATION_MODEL on OLLAMA_HOST) or BRAIN_SUMMARIZER=openai "
            "(on BRAIN_OPENAI_BASE_URL)"
        )
    if settings.summarizer == OpenAISummarizer.kind and not settings.openai_base_url:
        return (
            "BRAIN_SUMMARIZER=openai but BRAIN_OPENAI_BASE_URL is unset: set it to the OpenAI-compatible server "
            "formation asks, e.g. http://127.0.0.1:8080/v1"
        )
    return None


def get_extractor(settings: Settings) -> Extractor | None:
    """The model ``BRAIN_FORMATION_MODEL`` on the server ``BRAIN_SUMMARIZER`` names (no server is contacted
    here), or None when formation is off (:func:`formation_off_reason` says why)."""
    if formation_off_reason(settings) is not None:
        return None
    if settings.summarizer == OpenAISummarizer.kind:
        return OpenAIExtractor(
            settings.formation_model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            timeout=settings.formation_timeout,
        )
    return OllamaExtractor(settings.formation_model, host=settings.ollama_host, timeout=settings.formation_timeout)
