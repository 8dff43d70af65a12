"""Text embedders: ``get_embedder(settings)`` picks one from ``BRAIN_EMBEDDER`` (``provider/model``).

``local/minilm-l6-v2`` runs in-process and needs nothing else; ``ollama/<model>`` (default
``ollama/nomic-embed-text``) uses a running Ollama server.
"""

from __future__ import annotations

from brain.config import Settings, env_name
from brain.model.errors import EmbedderError
from brain.providers.embeddings import local as local_provider
from brain.providers.embeddings import ollama as ollama_provider
from brain.providers.embeddings.base import Embedder, Kind
from brain.providers.embeddings.local import LocalMiniLMEmbedder
from brain.providers.embeddings.ollama import DEFAULT_MODEL as DEFAULT_OLLAMA_MODEL
from brain.providers.embeddings.ollama import OllamaEmbedder

__all__ = [
    "DEFAULT_OLLAMA_MODEL",
    "Embedder",
    "Kind",
    "LocalMiniLMEmbedder",
    "OllamaEmbedder",
    "VALID_CHOICES",
    "get_embedder",
    "max_input_tokens",
    "typical_rate",
]

#: What ``BRAIN_EMBEDDER`` may be, for error messages.
VALID_CHOICES = (LocalMiniLMEmbedder.name, f"ollama/<model> (e.g. ollama/{DEFAULT_OLLAMA_MODEL})")


def get_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names. Does not load a model or contact a server."""
    provider, _, model = settings.embedder.partition("/")
    if provider == "local" and model == LocalMiniLMEmbedder.name.partition("/")[2]:
        return LocalMiniLMEmbedder(settings)
    if provider == "ollama":
        return OllamaEmbedder(model or DEFAULT_OLLAMA_MODEL, settings)
    raise EmbedderError(
        f"{env_name('embedder')}={settings.embedder!r} is not a known embedder; valid choices: "
        + ", ".join(VALID_CHOICES)
    )


def max_input_tokens(embedder: str) -> int:
    """The input limit (tokens, [CLS]/[SEP] included) of the embedder ``provider/model`` names, without
    loading it; an unknown provider gets the local model's (the smallest)."""
    provider = embedder.partition("/")[0]
    return ollama_provider.MAX_TOKENS if provider == "ollama" else local_provider.MAX_TOKENS


#: documents per second each provider embeds on common hardware (one CPU core for the local model; a
#: GPU-less Ollama for nomic-embed-text), for the time estimates of a re-index that has not run yet;
#: a re-index measures its own rate and records it with the collection it built
TYPICAL_DOCS_PER_SECOND = {"local": 100.0, "ollama": 40.0}


def typical_rate(embedder: str) -> float:
    """The typical documents/s of the embedder ``provider/model`` names (see TYPICAL_DOCS_PER_SECOND)."""
    return TYPICAL_DOCS_PER_SECOND.get(embedder.partition("/")[0], 40.0)
