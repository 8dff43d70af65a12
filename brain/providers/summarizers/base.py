"""The summariser contract: one small class per provider, like the embedders.

A summariser turns a span of conversation turns into a short text. It either returns that text
or raises one of the two errors below; the chat layer (:mod:`brain.features.chat`) decides what to do
about a failure (retry with back-off, then fall back to :class:`ExtractiveSummarizer`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from brain.model.errors import SummarizerError, SummarizerUnavailable  # noqa: F401 (importable from here too)


@dataclass(frozen=True)
class TurnText:
    """One turn as a summariser sees it."""

    turn_index: int
    role: str  # "user" or "assistant"
    text: str


@runtime_checkable
class Summarizer(Protocol):
    """``summarize(turns) -> text``; ``name`` is recorded in each summary's metadata (``summarizer``)."""

    name: str

    def summarize(self, turns: Sequence[TurnText], *, timeout: float | None = None) -> str:
        """A summary of ``turns`` (in order); raises :class:`SummarizerError` or :class:`SummarizerUnavailable`.
        ``timeout``: give up after this many seconds (the caller's time left; None: the summariser's own
        limit). A summariser that needs no time may ignore it."""
        ...

    def ping(self) -> None:
        """Check that the summariser can be used now; raises :class:`SummarizerUnavailable` if not."""
        ...


def transcript(turns: Sequence[TurnText]) -> str:
    """Turns as ``User: ...`` / ``Assistant: ...`` lines, the form every summariser reads."""
    return "\n".join(f"{turn.role.capitalize()}: {' '.join(turn.text.split())}" for turn in turns)


#: a summary longer than this is cut at a sentence end (a model that rambles is still useful)
MAX_SUMMARY_CHARS = 2000
#: tokens a model summariser may generate; a few sentences need far fewer
MAX_PREDICT = 400

SYSTEM_PROMPT = (
    "You summarise part of a conversation between a user and an assistant so that the assistant can "
    "remember it later. Write 2 to 5 plain sentences in the third person. Keep names, dates, numbers, "
    "preferences, decisions and open questions; drop greetings and small talk. Output only the summary."
)

# reasoning models (deepseek-r1, qwen3) put their thinking in the answer between these tags
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def summary_messages(turns: Sequence[TurnText]) -> list[dict[str, str]]:
    """The chat messages every model summariser sends for ``turns`` (system + user)."""
    first, last = turns[0].turn_index, turns[-1].turn_index
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Conversation turns {first} to {last}:\n\n{transcript(turns)}"},
    ]


def clean_summary(content: str) -> str:
    """A model's answer as a stored summary: no reasoning block, single-spaced, at most MAX_SUMMARY_CHARS."""
    text = " ".join(_THINK.sub(" ", content).split())
    if len(text) <= MAX_SUMMARY_CHARS:
        return text
    cut = text[:MAX_SUMMARY_CHARS]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    return cut[: end + 1] if end > MAX_SUMMARY_CHARS // 2 else cut.rsplit(" ", 1)[0] + "…"
