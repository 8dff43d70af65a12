"""Text embedders: :func:`embedder_named` builds the one a ``provider/model`` name (``BRAIN_EMBEDDER``)
names, from plain arguments; :func:`brain.wiring.get_embedder` builds it from the settings.

``local/minilm-l6-v2`` (English), ``local/multilingual-e5-small`` (about a hundred languages) and
``local/use-multilingual-v3`` (16 languages, trained to match a text with its translation) run in-process
and need nothing else; ``ollama/<model>`` (default ``ollama/nomic-embed-text``) uses a running
Ollama server, ``openai/<model>`` any OpenAI-compatible server's ``/embeddings``.
"""

from __future__ import annotations

from collections.abc import Callable

import pydantic

from brain.model.errors import EmbedderError
from brain.providers.embeddings import e5 as e5_provider
from brain.providers.embeddings import local as local_provider
from brain.providers.embeddings import ollama as ollama_provider
from brain.providers.embeddings import use as use_provider
from brain.providers.embeddings.base import Embedder, Kind
from brain.providers.embeddings.e5 import LocalE5Embedder
from brain.providers.embeddings.local import LocalMiniLMEmbedder
from brain.providers.embeddings.ollama import DEFAULT_MODEL as DEFAULT_OLLAMA_MODEL
from brain.providers.embeddings.ollama import OllamaEmbedder
from brain.providers.embeddings.openai import MAX_TOKENS as OPENAI_MAX_TOKENS
from brain.providers.embeddings.openai import OpenAIEmbedder
from brain.providers.embeddings.use import LocalUSEEmbedder

__all__ = [
    "DEFAULT_OLLAMA_MODEL",
    "Embedder",
    "Kind",
    "LocalE5Embedder",
    "LocalMiniLMEmbedder",
    "LocalUSEEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "VALID_CHOICES",
    "embedder_named",
    "max_input_tokens",
    "token_counter",
]

#: What ``BRAIN_EMBEDDER`` may be, for error messages.
VALID_CHOICES = (
    LocalMiniLMEmbedder.name,
    LocalE5Embedder.name,
    LocalUSEEmbedder.name,
    f"ollama/<model> (e.g. ollama/{DEFAULT_OLLAMA_MODEL})",
    "openai/<model> (on BRAIN_OPENAI_BASE_URL)",
)


def embedder_named(
    name: str,
    *,
    batch_size: int,
    cache_size: int,
    ollama_host: str,
    ollama_timeout: float,
    openai_base_url: str | None = None,
    openai_api_key: pydantic.SecretStr | str | None = None,
) -> Embedder:
    """The embedder ``name`` (``provider/model``, e.g. ``local/minilm-l6-v2`` or ``ollama/nomic-embed-text``)
    names, with ``batch_size`` texts per call and ``cache_size`` cached query vectors; an Ollama one asks
    ``ollama_host``, an ``openai/`` one ``openai_base_url`` with ``openai_api_key``, each waiting
    ``ollama_timeout`` seconds per request. Loads no model, contacts no server."""
    provider, _, model = name.partition("/")
    if provider == "local" and model == LocalMiniLMEmbedder.name.partition("/")[2]:
        return LocalMiniLMEmbedder(batch_size=batch_size, cache_size=cache_size)
    if provider == "local" and model == LocalE5Embedder.name.partition("/")[2]:
        return LocalE5Embedder(batch_size=batch_size, cache_size=cache_size)
    if provider == "local" and model == use_provider.MODEL_NAME:
        return LocalUSEEmbedder(batch_size=batch_size, cache_size=cache_size)
    if provider == "ollama":
        return OllamaEmbedder(
            model or DEFAULT_OLLAMA_MODEL,
            host=ollama_host,
            timeout=ollama_timeout,
            batch_size=batch_size,
            cache_size=cache_size,
        )
    if provider == "openai":
        return OpenAIEmbedder(
            model,
            base_url=openai_base_url,
            api_key=openai_api_key,
            timeout=ollama_timeout,
            batch_size=batch_size,
            cache_size=cache_size,
        )
    raise EmbedderError(f"BRAIN_EMBEDDER={name!r} is not a known embedder; valid choices: " + ", ".join(VALID_CHOICES))


def max_input_tokens(embedder: str) -> int:
    """The input limit (tokens, [CLS]/[SEP] included) of the embedder ``provider/model`` names, without
    loading it; an unknown provider gets the local model's (the smallest)."""
    if embedder == LocalE5Embedder.name:
        return e5_provider.MAX_TOKENS
    if embedder == LocalUSEEmbedder.name:
        return use_provider.MAX_TOKENS
    provider = embedder.partition("/")[0]
    if provider == "openai":
        return OPENAI_MAX_TOKENS
    return ollama_provider.MAX_TOKENS if provider == "ollama" else local_provider.MAX_TOKENS


def token_counter(embedder: str) -> Callable[[str], int] | None:
    """The embedder ``provider/model`` names' own count of a document's tokens (prefix and special tokens
    included), when its tokenizer is not the MiniLM WordPiece the chunker cuts with; None otherwise (MiniLM
    is that tokenizer; Ollama models do not expose theirs)."""
    counters: dict[str, tuple[Callable[[str], int], str]] = {
        LocalE5Embedder.name: (e5_provider.count_tokens, "xlmr"),
        LocalUSEEmbedder.name: (use_provider.count_tokens, "use-m3"),
    }
    if embedder not in counters:
        return None
    counter, tokenizer = counters[embedder]

    def count(text: str) -> int:
        return counter(text)

    count.tokenizer = tokenizer  # type: ignore[attr-defined]  # names it in the chunker's signature
    return count
