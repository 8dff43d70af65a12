"""The extractor contract: one small class per provider, like the summarisers.

An extractor is the model memory formation asks (:mod:`brain.features.chat.formation`): given chat
messages and a JSON schema, it returns the model's answer text with what it cost, or raises one of the
two errors below. It does not read the answer: :mod:`brain.rules.formation` checks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from brain.model.errors import ExtractorError, ExtractorUnavailable  # noqa: F401 (importable from here too)


@dataclass(frozen=True)
class ModelAnswer:
    """What one model call gave: the message text, the tokens it read (``prompt_tokens``: Ollama's
    ``prompt_eval_count``, OpenAI's ``usage.prompt_tokens``) and wrote (``eval_tokens``), its wall time in
    seconds, and whether it was cut at the token limit."""

    content: str
    prompt_tokens: int
    eval_tokens: int
    seconds: float
    #: the model stopped at its token limit: the answer is cut
    truncated: bool = False


@runtime_checkable
class Extractor(Protocol):
    """``ask(messages, schema) -> ModelAnswer``; ``name`` (``ollama/<model>``, ``openai/<model>``) says which model
    answered."""

    name: str

    def ask(
        self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, object], *, timeout: float | None = None
    ) -> ModelAnswer:
        """The model's answer to ``messages``, constrained to the JSON ``schema``; raises
        :class:`ExtractorUnavailable` (down, slow, model not pulled) or :class:`ExtractorError` (an answer
        that is not a chat response). ``timeout``: give up after this many seconds (at most the
        extractor's own limit; None: that limit)."""
        ...
