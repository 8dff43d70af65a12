"""The value rules settings check that the API's token table applies too, and the providers' defaults.

Configuration is the lower layer: the token table reads these from here, so that checking a setting loads
none of it. The providers' defaults and their naming rule are defined in :mod:`brain.model.provider_names`,
below both configuration and the providers, and named here too for the settings."""

from __future__ import annotations

from brain.model.provider_names import DEFAULT_EMBEDDER, DEFAULT_SUMMARY_MODEL, model_name_problem

__all__ = [
    "DEFAULT_EMBEDDER",
    "DEFAULT_SUMMARY_MODEL",
    "MIN_TOKEN_LENGTH",
    "TOKEN_HINT",
    "model_name_problem",
    "token_problem",
]

MIN_TOKEN_LENGTH = 16
TOKEN_HINT = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be an API token (BRAIN_API_TOKEN, a line of BRAIN_API_TOKENS_FILE), or None."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"a token must be at least {MIN_TOKEN_LENGTH} characters long, got {len(token)}; {TOKEN_HINT}"
    if not all(33 <= ord(c) <= 126 for c in token):  # it travels in an HTTP header
        return f"a token may hold printable ASCII characters only, without spaces; {TOKEN_HINT}"
    return None
