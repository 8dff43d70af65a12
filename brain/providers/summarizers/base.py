"""The summariser contract: one small class per provider, like the embedders.

A summariser turns a span of conversation turns into a short text. It either returns that text
or raises one of the two errors below; the chat layer (:mod:`brain.features.chat`) decides what to do
about a failure (retry with back-off, then fall back to :class:`ExtractiveSummarizer`).
"""

from __future__ import annotations

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
