"""A deterministic extractive summary: the span's most informative sentences, verbatim, in order.

The fallback when the model summariser is down or answers garbage. No model, no network, same
input -> same output. Sentences are scored by how many of the span's frequent content words they
hold (a classic frequency summariser), with a small bonus for numbers and capitalised words
(names, dates, places are what a summary must not lose); the best are kept up to ``max_chars`` and
printed in conversation order with their speaker.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from brain.model.errors import SummarizerError
from brain.providers.summarizers.base import TurnText
from brain.text.stop_words import CHAT_FILLERS, STOP_WORDS

DEFAULT_MAX_CHARS = 600
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: words that do not make a sentence informative: function words and chat fillers ("okay", "thanks")
_STOPWORDS = STOP_WORDS | CHAT_FILLERS


class ExtractiveSummarizer:
    """Picks sentences; ``name`` is ``extractive``. Never fails on non-empty input."""

    #: the BRAIN_SUMMARIZER value that selects this summariser
    kind = "extractive"
    name = "extractive"

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS):
        if max_chars < 40:
            raise ValueError("max_chars must be at least 40")
        self.max_chars = max_chars

    def ping(self) -> None:
        """Always usable."""

    def summarize(self, turns: Sequence[TurnText], *, timeout: float | None = None) -> str:
        sentences: list[tuple[str, str]] = []  # (speaker, sentence) in conversation order
        for turn in turns:
            for sentence in _SENTENCE_END.split(" ".join(turn.text.split())):
                if sentence:
                    sentences.append((turn.role.capitalize(), sentence))
        if not sentences:
            raise SummarizerError("nothing to summarise: the turns have no text")
        words = [_content_words(s) for _, s in sentences]
        freq = Counter(w for ws in words for w in set(ws))
        scores = [_score(s, ws, freq) for (_, s), ws in zip(sentences, words)]
        order = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
        chosen: list[int] = []
        used = 0
        for i in order:
            cost = len(sentences[i][0]) + 2 + len(sentences[i][1]) + (1 if chosen else 0)
            if used + cost <= self.max_chars:
                chosen.append(i)
                used += cost
        if not chosen:  # the best sentence alone is too long: keep its head
            speaker, sentence = sentences[order[0]]
            room = self.max_chars - len(speaker) - 3
            return f"{speaker}: {sentence[:room].rsplit(' ', 1)[0]}…"
        return " ".join(f"{sentences[i][0]}: {sentences[i][1]}" for i in sorted(chosen))


def _content_words(sentence: str) -> list[str]:
    return [w for w in (m.group(0).casefold() for m in _WORD.finditer(sentence)) if len(w) > 2 and w not in _STOPWORDS]


def _score(sentence: str, words: list[str], freq: Counter[str]) -> float:
    if not words:
        return 0.0
    distinct = set(words)
    base = sum(freq[w] for w in distinct) / math.sqrt(len(distinct))
    specifics = sum(1 for token in sentence.split()[1:] if token[:1].isupper() or any(c.isdigit() for c in token))
    return base + 0.5 * min(specifics, 4)
