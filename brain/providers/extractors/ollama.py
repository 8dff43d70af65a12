"""Memory formation's model served by Ollama, through the official ``ollama`` client's chat API with the
answer's JSON schema as ``format`` (the server constrains the output to it).

Every way Ollama can fail becomes one of two errors, by the ladder the other Ollama providers use
(:func:`brain.providers.ollama_client.ollama_errors`): :class:`ExtractorUnavailable` (not running, model
not pulled, too slow, a server failure) or :class:`ExtractorError` (it answered with something that is not
a chat response, or without message text). Formation retries both with back-off; neither loses a batch.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import ollama

from brain.model.errors import ExtractorError, ExtractorUnavailable
from brain.model.provider_names import DEFAULT_OLLAMA_HOST, DEFAULT_SUMMARY_MODEL
from brain.providers.extractors.base import ModelAnswer
from brain.providers.ollama_client import OllamaChatModel, ollama_errors

DEFAULT_MODEL = DEFAULT_SUMMARY_MODEL
#: tokens the model may write: ample for the facts of a window, and a stop for a model that loops on
#: whitespace inside a constrained answer
MAX_PREDICT = 2048


class OllamaExtractor(OllamaChatModel):
    """A chat model served by Ollama; ``name`` is ``ollama/<model>``. Construction touches no network."""

    unavailable = ExtractorUnavailable
    error = ExtractorError
    model_setting = "BRAIN_FORMATION_MODEL"

    def __init__(self, model: str = DEFAULT_MODEL, *, host: str = DEFAULT_OLLAMA_HOST, timeout: float = 120.0):
        super().__init__(model, host=host, timeout=timeout)

    def ask(
        self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, object], *, timeout: float | None = None
    ) -> ModelAnswer:
        """The model's answer to ``messages`` in the shape of ``schema``; ``timeout`` (seconds, at most the
        extractor's own) bounds this call."""
        if not messages:
            raise ExtractorError("nothing to ask: no messages given")
        with self.client(timeout) as (client, limit):
            return self._ask(client, messages, schema, limit)

    def _ask(
        self, client: ollama.Client, messages: Sequence[Mapping[str, str]], schema: Mapping[str, object], limit: float
    ) -> ModelAnswer:
        timed_out = (
            f"Ollama at {self.host} timed out: no answer within {limit:.3g} s while forming memories with "
            f"{self.model!r}; raise BRAIN_FORMATION_TIMEOUT or use a smaller BRAIN_FORMATION_MODEL"
        )
        started = time.monotonic()
        with ollama_errors(
            self.host,
            "chat",
            self.model,
            unavailable=ExtractorUnavailable,
            error=ExtractorError,
            timed_out=timed_out,
            doing="form memories",
        ):
            response = client.chat(
                model=self.model,
                messages=[dict(m) for m in messages],
                format=dict(schema),
                stream=False,
                options={"temperature": 0, "num_predict": MAX_PREDICT},
            )
        seconds = time.monotonic() - started
        content = getattr(getattr(response, "message", None), "content", None)
        if not isinstance(content, str):
            raise ExtractorError(f"Ollama's chat response from {self.model!r} at {self.host} has no message text")
        # Ollama leaves prompt_eval_count out when the whole prompt came from its cache
        return ModelAnswer(
            content=content,
            prompt_tokens=int(getattr(response, "prompt_eval_count", None) or 0),
            eval_tokens=int(getattr(response, "eval_count", None) or 0),
            seconds=seconds,
            truncated=getattr(response, "done_reason", None) == "length",
        )
