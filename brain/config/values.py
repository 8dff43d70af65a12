"""The defaults and value rules settings check that the providers and the token table apply too.

Configuration is the lower layer: the embedder, the summariser and the API's token table read these from
here, so that checking a setting loads none of them."""

from __future__ import annotations

#: BRAIN_EMBEDDER's default: the in-process MiniLM (:class:`brain.providers.embeddings.local.LocalMiniLMEmbedder`)
DEFAULT_EMBEDDER = "local/minilm-l6-v2"
#: BRAIN_SUMMARY_MODEL's default Ollama model
DEFAULT_SUMMARY_MODEL = "llama3.2:3b"

MIN_TOKEN_LENGTH = 16
TOKEN_HINT = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def model_name_problem(model: str) -> str | None:
    """Why ``model`` cannot be an Ollama model name, or None (BRAIN_SUMMARY_MODEL is checked with this)."""
    if not isinstance(model, str) or not model.strip() or any(c.isspace() for c in model):
        return f"must be an Ollama model name such as {DEFAULT_SUMMARY_MODEL}"
    return None


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be an API token (BRAIN_API_TOKEN, a line of BRAIN_API_TOKENS_FILE), or None."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"a token must be at least {MIN_TOKEN_LENGTH} characters long, got {len(token)}; {TOKEN_HINT}"
    if not all(33 <= ord(c) <= 126 for c in token):  # it travels in an HTTP header
        return f"a token may hold printable ASCII characters only, without spaces; {TOKEN_HINT}"
    return None
