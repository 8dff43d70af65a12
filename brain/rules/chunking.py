"""Token-window chunking: long text -> overlapping slices that each fit the embedder's input.

Windows are cut in tokens of the local MiniLM WordPiece tokenizer (the process-wide counting copy,
:func:`brain.text.tokenizer.counting_tokenizer`: truncation and padding off), the unit the embedder
pays for and truncates at. ``window_size`` and ``window_overlap`` count content
tokens, without ``[CLS]``/``[SEP]``; ``max_tokens`` is the embedder's limit *including* them, so a
window must be at most ``max_tokens - 2`` (MiniLM: 256 -> 254). A larger window is refused rather
than clamped: silently cutting text the operator asked to keep whole would hide a configuration
mistake.

Chunks are slices of the original text, cut between tokens using the tokenizer's character offsets:

- every chunk is at most ``window_size`` tokens (re-tokenizing a chunk gives at most that many);
- cuts fall at whitespace when one lies in the last half-stride of the window (half of
  ``window_size - window_overlap``), else between words there (punctuation is a word for this
  tokenizer), and inside a word only when no word ends in that stretch (a very long word);
- consecutive chunks overlap by at least ``window_overlap`` tokens: the next chunk starts at the
  whitespace (or word) boundary at or before ``end - window_overlap``, so the overlap is exactly
  ``window_overlap`` tokens when a boundary falls there and rounds up to whole words otherwise
  (when one word covers that whole stretch, e.g. a long word or an overlap of nearly the whole
  window, the next chunk starts after the word instead of inside it, so that overlap is shorter);
- together the chunks cover the text from its first token to its last (with ``window_overlap=0``
  only the whitespace at the cuts is left out).

An embedder with a tokenizer of its own (multilingual-e5-small's SentencePiece) also gives its count of a
text's tokens: a chunk over the embedder's input by that count is cut again with a window shrunk in
proportion, so every chunk fits the model that embeds it (none is truncated or windowed by the model).

The same object serves agent frameworks that expect ``chunk(text) -> list[str]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from brain.model.errors import ConfigError
from brain.text.tokenizer import counting_tokenizer

SPECIAL_TOKENS = 2  # [CLS] and [SEP]


def _local_max_tokens() -> int:
    from brain.providers.embeddings.local import MAX_TOKENS

    return MAX_TOKENS


class TokenChunker:
    """Split text into overlapping windows of at most ``window_size`` tokens (see module docstring)."""

    def __init__(
        self,
        window_size: int = 200,
        window_overlap: int = 40,
        max_tokens: int | None = None,
        embedder_tokens: Callable[[str], int] | None = None,
    ):
        for name, value in (("window_size", window_size), ("window_overlap", window_overlap)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if max_tokens is None:
            max_tokens = _local_max_tokens()
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= SPECIAL_TOKENS:
            raise ValueError(f"max_tokens must be an integer above {SPECIAL_TOKENS}, got {max_tokens!r}")
        if window_size < 1:
            raise ValueError(f"window_size must be at least 1 token, got {window_size}")
        if window_size > max_tokens - SPECIAL_TOKENS:
            raise ValueError(
                f"window_size {window_size} does not fit the embedder's input of {max_tokens} tokens "
                f"(including [CLS] and [SEP]): use at most {max_tokens - SPECIAL_TOKENS}"
            )
        if not 0 <= window_overlap < window_size:
            raise ValueError(
                f"window_overlap must be between 0 and window_size - 1 ({window_size - 1}), got {window_overlap}"
            )
        self.window_size = window_size
        self.window_overlap = window_overlap
        self.max_tokens = max_tokens
        #: the embedder's own count of a text's tokens (special tokens and prefix included), when its
        #: tokenizer is not the one windows are cut with: every chunk is then checked against it too
        self.embedder_tokens = embedder_tokens

    @classmethod
    def from_settings(cls, settings: Any) -> TokenChunker:
        """``BRAIN_CHUNK_WINDOW`` / ``BRAIN_CHUNK_OVERLAP``, checked against ``BRAIN_EMBEDDER``'s input limit."""
        from brain.providers.embeddings import max_input_tokens, token_counter  # the providers own their inputs

        embedder = str(getattr(settings, "embedder", "local/"))
        try:
            return cls(
                settings.chunk_window,
                settings.chunk_overlap,
                max_tokens=max_input_tokens(embedder),
                embedder_tokens=token_counter(embedder),
            )
        except ValueError as exc:
            raise ConfigError(
                f"BRAIN_CHUNK_WINDOW={settings.chunk_window} / BRAIN_CHUNK_OVERLAP={settings.chunk_overlap} "
                f"cannot be used with BRAIN_EMBEDDER={getattr(settings, 'embedder', '?')}: {exc}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"TokenChunker(window_size={self.window_size}, window_overlap={self.window_overlap}, "
            f"max_tokens={self.max_tokens})"
        )

    @property
    def signature(self) -> str:
        """What decides the chunks (stored with ingested documents, so a new setting re-chunks)."""
        checked = "" if self.embedder_tokens is None else f"/fits-{getattr(self.embedder_tokens, 'tokenizer', 'own')}"
        return f"wordpiece-minilm/w{self.window_size}/o{self.window_overlap}{checked}"

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` occupies, without [CLS]/[SEP] (the unit of ``window_size``)."""
        if not text:
            return 0
        return len(counting_tokenizer().encode(text, add_special_tokens=False).ids)

    def chunk(self, text: str) -> list[str]:
        """Slices of ``text``, each at most ``window_size`` tokens; ``[text]`` when it fits, ``[]`` when blank."""
        if not text or not text.strip():
            return []
        return [text[a:b] for a, b in self.spans(text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` character offsets of the chunks of ``text`` (``chunk`` slices these)."""
        if not text or not text.strip():
            return []
        spans = self._wordpiece_spans(text)
        if self.embedder_tokens is None:
            return spans
        return [piece for a, b in spans for piece in self._fitted(text, a, b)]

    def _fitted(self, text: str, a: int, b: int) -> list[tuple[int, int]]:
        """The chunk ``text[a:b]`` as it is when the embedder's own tokenizer reads it within its input,
        else cut again with a window shrunk by the ratio of the two counts: a script WordPiece reads as
        a few tokens (Thai, Arabic) can be many more for a SentencePiece model."""
        assert self.embedder_tokens is not None
        count = self.embedder_tokens(text[a:b])
        if count <= self.max_tokens or self.window_size <= 1:
            return [(a, b)]
        window = max(1, int(self.window_size * self.max_tokens / count * 0.9))
        if window >= self.window_size:
            window = self.window_size - 1
        smaller = TokenChunker(
            window, min(self.window_overlap, window - 1), self.max_tokens, embedder_tokens=self.embedder_tokens
        )
        return [(a + x, a + y) for x, y in smaller.spans(text[a:b])]

    def _wordpiece_spans(self, text: str) -> list[tuple[int, int]]:
        tokenizer = counting_tokenizer()
        enc = tokenizer.encode(text, add_special_tokens=False)
        n = len(enc.ids)
        if n <= self.window_size:
            return [(0, len(text))]
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(n, 2)
        starts, ends = offsets[:, 0], offsets[:, 1]
        words = np.asarray([-1 if w is None else w for w in enc.word_ids], dtype=np.int64)
        # boundary b (1..n-1) = a cut before token b. A gap between two tokens' characters is
        # whitespace (or characters the tokenizer drops); a change of word id is a word boundary.
        gap = np.flatnonzero(starts[1:] > ends[:-1]) + 1
        word = np.flatnonzero((words[1:] != words[:-1]) | (words[1:] < 0)) + 1
        window, overlap = self.window_size, self.window_overlap
        slack = max(1, (window - overlap) // 2)  # how far back a cut may move to land on whitespace

        def latest(bounds: np.ndarray, lo: int, hi: int) -> int | None:
            """The largest boundary in (lo, hi], or None."""
            i = int(np.searchsorted(bounds, hi, side="right")) - 1
            if i >= 0 and bounds[i] > lo:
                return int(bounds[i])
            return None

        def earliest(bounds: np.ndarray, lo: int, hi: int) -> int | None:
            """The smallest boundary in (lo, hi), or None."""
            i = int(np.searchsorted(bounds, lo, side="right"))
            if i < len(bounds) and bounds[i] < hi:
                return int(bounds[i])
            return None

        result: list[tuple[int, int]] = []
        s = prev_e = 0
        while True:
            if n - s <= window:
                e = n
            else:  # the end moves forward at every step: a cut after the previous chunk's end
                lo = max(s, prev_e, s + window - slack)
                e = latest(gap, lo, s + window) or latest(word, lo, s + window) or s + window
            a, b = int(starts[s]), int(ends[e - 1])
            if (e < n and not _is_boundary(word, e)) or (s > 0 and not _is_boundary(word, s)):
                # cut inside a word (one word longer than the window): re-tokenizing the piece may
                # split it differently, so check and step back until it fits
                while e - 1 > s and self.count_tokens(text[a:b]) > window:
                    e -= 1
                    b = int(ends[e - 1])
            result.append((a, b))
            prev_e = e
            if e >= n:
                break
            target = e - overlap
            nxt = (
                latest(gap, max(s, target - slack), target)
                or latest(word, s, target)
                or earliest(word, max(s, target), e)
            )
            if nxt is None:  # inside one very long word
                nxt = max(target, s + 1)
            s = nxt
        return result


def _is_boundary(bounds: np.ndarray, x: int) -> bool:
    i = int(np.searchsorted(bounds, x))
    return i < len(bounds) and int(bounds[i]) == x


__all__ = ["TokenChunker"]
