"""Summaries from a chat model on any OpenAI-compatible server (``BRAIN_SUMMARIZER=openai``), through the
official ``openai`` client: llama.cpp's server, vLLM, LM Studio, Ollama's ``/v1``, hosted APIs.

Its failures become the same two errors as Ollama's (:class:`SummarizerUnavailable`, :class:`SummarizerError`)
by :func:`brain.providers.openai_client.openai_errors`; the chat layer retries both and then falls back to an
extractive summary.
"""

from __future__ import annotations

from collections.abc import Sequence

from brain.model.errors import SummarizerError, SummarizerUnavailable
from brain.providers.openai_client import OpenAIChatModel
from brain.providers.summarizers.base import MAX_PREDICT, TurnText, clean_summary, summary_messages


class OpenAISummarizer(OpenAIChatModel):
    """A chat model on an OpenAI-compatible server; ``name`` is ``openai/<model>``. Construction touches no
    network."""

    #: the BRAIN_SUMMARIZER value that selects this summariser
    kind = "openai"
    unavailable = SummarizerUnavailable
    error = SummarizerError
    model_setting = "BRAIN_SUMMARY_MODEL"

    def summarize(self, turns: Sequence[TurnText], *, timeout: float | None = None) -> str:
        """The model's summary; ``timeout`` (seconds, at most the summariser's own) bounds this call."""
        if not turns:
            raise SummarizerError("nothing to summarise: no turns given")
        timed_out = (
            f"{self.base_url} timed out while summarising with {self.model!r}; raise BRAIN_SUMMARY_TIMEOUT and "
            "BRAIN_SUMMARY_DEADLINE_SECONDS or use a smaller BRAIN_SUMMARY_MODEL"
        )
        answer = self.chat(
            summary_messages(turns), timeout=timeout, max_tokens=MAX_PREDICT, timed_out=timed_out, doing="summarise"
        )
        text = clean_summary(answer.content)
        if not text:
            raise SummarizerError(f"{self.model!r} at {self.base_url} returned an empty summary")
        return text
