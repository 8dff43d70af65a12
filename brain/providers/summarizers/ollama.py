"""Summaries from a chat model served by Ollama, through the official ``ollama`` client's chat API.

Every way Ollama can fail becomes one of two errors: :class:`SummarizerUnavailable` (not running,
model not pulled, too slow) or :class:`SummarizerError` (it answered with something that is not a
usable summary: not JSON, the wrong shape, no text). The chat layer retries both and then falls
back to an extractive summary, so neither ever reaches a chat request.
"""

from __future__ import annotations

from collections.abc import Sequence

import ollama

from brain.model.errors import SummarizerError, SummarizerUnavailable
from brain.model.provider_names import DEFAULT_OLLAMA_HOST, DEFAULT_SUMMARY_MODEL
from brain.providers.ollama_client import OllamaChatModel, ollama_errors, open_ollama_client
from brain.providers.summarizers.base import MAX_PREDICT, TurnText, clean_summary, summary_messages

DEFAULT_MODEL = DEFAULT_SUMMARY_MODEL
PING_TIMEOUT = 3.0


class OllamaSummarizer(OllamaChatModel):
    """A chat model served by Ollama; ``name`` is ``ollama/<model>``. Construction touches no network."""

    #: the BRAIN_SUMMARIZER value that selects this summariser
    kind = "ollama"
    unavailable = SummarizerUnavailable
    error = SummarizerError
    model_setting = "BRAIN_SUMMARY_MODEL"

    def __init__(self, model: str = DEFAULT_MODEL, *, host: str = DEFAULT_OLLAMA_HOST, timeout: float = 120.0):
        super().__init__(model, host=host, timeout=timeout)

    def summarize(self, turns: Sequence[TurnText], *, timeout: float | None = None) -> str:
        """The model's summary; ``timeout`` (seconds, at most the summariser's own) bounds this call."""
        if not turns:
            raise SummarizerError("nothing to summarise: no turns given")
        with self.client(timeout) as (client, limit):
            return self._summarize(client, turns, limit)

    def _summarize(self, client: ollama.Client, turns: Sequence[TurnText], limit: float) -> str:
        messages = summary_messages(turns)
        timed_out = (
            f"Ollama at {self.host} timed out: no answer within {limit:.3g} s while summarising with "
            f"{self.model!r}; raise BRAIN_SUMMARY_TIMEOUT and BRAIN_SUMMARY_DEADLINE_SECONDS or use a smaller "
            "BRAIN_SUMMARY_MODEL"
        )
        with ollama_errors(
            self.host,
            "chat",
            self.model,
            unavailable=SummarizerUnavailable,
            error=SummarizerError,
            timed_out=timed_out,
            doing="summarise",
        ):
            response = client.chat(
                model=self.model,
                messages=messages,
                stream=False,
                options={"temperature": 0, "num_predict": MAX_PREDICT},
            )
        message = getattr(response, "message", None)
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            raise SummarizerError(f"Ollama's chat response from {self.model!r} has no message text")
        text = clean_summary(content)
        if not text:
            raise SummarizerError(f"Ollama's {self.model!r} returned an empty summary")
        return text

    def ping(self) -> None:
        """One short request to ``/api/tags``: is Ollama up and is the model pulled?"""
        timeout = min(self.timeout, PING_TIMEOUT)
        # every failure of the probe means the model cannot summarise now: unavailable, whatever the answer
        with ollama_errors(
            self.host,
            "tags",
            self.model,
            unavailable=SummarizerUnavailable,
            error=SummarizerUnavailable,
            doing="list its models",
            timed_out=f"Ollama at {self.host} timed out: no answer to /api/tags within {timeout:.3g} s",
        ):
            with open_ollama_client(self.host, timeout, SummarizerUnavailable) as client:
                listed = client.list()
        names = {m.model for m in listed.models if m.model}
        wanted = self.model if ":" in self.model else f"{self.model}:latest"
        if wanted not in names and self.model not in names:
            raise SummarizerUnavailable(
                f"Ollama at {self.host} does not have {self.model!r}: run `ollama pull {self.model}`"
            )
