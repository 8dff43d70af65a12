"""The names of the providers' default models and the rule an Ollama model name follows.

Both the configuration (its defaults, its checks of a setting) and the providers (their defaults, their
checks of a name passed to them) need these, and neither may import the other's layer, so they live here.
"""

from __future__ import annotations

#: the in-process embedders as ``provider/model``
MINILM_EMBEDDER = "local/minilm-l6-v2"
E5_EMBEDDER = "local/multilingual-e5-small"
USE_EMBEDDER = "local/use-multilingual-v3"
#: BRAIN_EMBEDDER's default
DEFAULT_EMBEDDER = MINILM_EMBEDDER
#: the Ollama chat model the summariser and memory formation ask by default
DEFAULT_SUMMARY_MODEL = "llama3.2:3b"
#: where Ollama listens unless told otherwise (OLLAMA_HOST's default)
DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
#: texts per embedding call (BRAIN_EMBED_BATCH_SIZE's default)
DEFAULT_EMBED_BATCH_SIZE = 64
#: query vectors an embedder keeps for repeated queries (BRAIN_QUERY_CACHE_SIZE's default)
DEFAULT_QUERY_CACHE_SIZE = 1024
#: time limit of one embedding request to Ollama, seconds (BRAIN_OLLAMA_TIMEOUT's default)
DEFAULT_OLLAMA_EMBED_TIMEOUT = 30.0


def model_name_problem(model: object) -> str | None:
    """Why ``model`` cannot be an Ollama model name, or None."""
    if not isinstance(model, str) or not model.strip() or any(c.isspace() for c in model):
        return f"must be an Ollama model name such as {DEFAULT_SUMMARY_MODEL}"
    return None
