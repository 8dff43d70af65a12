"""The official Ollama client, opened the one way both Ollama providers (embedder, summariser) open it."""

from __future__ import annotations

import httpx
import ollama

from brain.model.errors import BrainError


def open_ollama_client(host: str, timeout: float, error: type[BrainError]) -> ollama.Client:
    """The official client for ``host``; a host it cannot use raises ``error`` naming OLLAMA_HOST."""
    try:
        return ollama.Client(host=host, timeout=timeout)
    except (ValueError, httpx.InvalidURL) as exc:
        raise error(f"OLLAMA_HOST={host!r} is not a usable address ({exc}); use e.g. http://127.0.0.1:11434") from None
