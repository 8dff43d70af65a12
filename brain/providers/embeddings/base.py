"""The embedder contract every backend honours, and the query cache they share.

Backends only turn a batch of strings into raw vectors (``_embed``). Everything that
must be identical whatever the backend lives here, so a bug in one provider cannot
leak unnormalised, misshapen or NaN vectors into the store: input validation,
batching, output validation, L2 normalisation, and the query cache.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import numpy as np

from brain.model.errors import EmbedderError, Problem, ValidationError
from brain.model.provider_names import DEFAULT_EMBED_BATCH_SIZE, DEFAULT_QUERY_CACHE_SIZE
from brain.model.vectors import unit_rows, zero_rows
from brain.providers.cache import CacheInfo, LRUCache

Kind = Literal["document", "query"]


def _validate_text(text: object, item: int | None) -> str:
    if isinstance(text, str) and text.strip():
        return text
    problem = f"got {type(text).__name__}" if not isinstance(text, str) else "got an empty or blank string"
    where = f" (item {item})" if item is not None else ""
    message = f"text must be a non-empty string{where}: {problem}"
    raise ValidationError.of("text", message, item=item)


def shortest_first(texts: Sequence[str], length: Callable[[int], int] | None = None) -> list[int] | None:
    """An order of ``texts`` (:meth:`Embedder._batch_order`) that puts texts of similar length in one batch:
    by ``length`` of each position (default: characters); None when there is nothing to order."""
    if len(texts) <= 1:
        return None
    return sorted(range(len(texts)), key=length or (lambda i: len(texts[i])))


class Embedder(ABC):
    """Turns text into L2-normalised float32 vectors; see the module docstring for the split of work.

    Subclasses set :attr:`name`, provide :attr:`dimension` and implement :meth:`_embed`.
    They may override :meth:`_batch_order` when grouping similar inputs makes batches cheaper.
    """

    #: ``provider/model``; stored with the collection so vectors from different spaces never mix.
    name: str

    def __init__(self, *, batch_size: int = DEFAULT_EMBED_BATCH_SIZE, cache_size: int = DEFAULT_QUERY_CACHE_SIZE):
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.batch_size = batch_size
        # Chat repeats queries (one user message is retrieved against several document types) and a
        # query embedding costs a model call; keyed by the exact text, which is safe because
        # embedders are deterministic.
        self._query_cache: LRUCache[str, np.ndarray] = LRUCache(cache_size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # -- what a backend provides ----------------------------------------------------------

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""

    @abstractmethod
    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        """Raw vectors for one batch (at most ``batch_size`` texts), one row per text, in order.

        Rows need not be normalised; the base class checks and normalises them.
        """

    def _batches(self, texts: list[str], sequence: list[int]) -> Iterator[list[int]]:
        """The positions of ``texts`` embedded together, in ``sequence`` order: ``batch_size`` at a
        time. Backends whose cost grows with the texts' length may cut batches shorter."""
        for start in range(0, len(sequence), self.batch_size):
            yield sequence[start : start + self.batch_size]

    def _batch_order(self, texts: list[str]) -> list[int] | None:
        """The order in which to feed ``texts`` to :meth:`_embed`, or None for as given."""
        return None

    # -- public API ------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts to be stored: shape ``(len(texts), dimension)``, one row per text."""
        if isinstance(texts, (str, bytes)):
            # A str is a Sequence[str]; embedding it character by character is never intended.
            raise ValidationError(
                "texts must be a sequence of strings, not a single string; use embed_query for one text",
                [Problem("texts", "expected a sequence of strings")],
            )
        checked = [_validate_text(text, i) for i, text in enumerate(texts)]
        return self._embed_all(checked, "document")

    def embed_query(self, text: str) -> np.ndarray:
        """The vector for a search query, shape ``(dimension,)``.

        Read-only because the same array object is handed to every caller that asks for the
        same text: a caller normalising or scaling it in place would corrupt later results.
        """
        text = _validate_text(text, None)
        cached = self._query_cache.get(text)
        if cached is not None:
            return cached
        vector: np.ndarray = self._embed_all([text], "query")[0].copy()
        vector.flags.writeable = False
        self._query_cache.put(text, vector)
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for many texts embedded as queries (as :meth:`embed_query` does one), in batches and
        without the query cache: for labelled example queries learnt from, not searched with."""
        if isinstance(texts, (str, bytes)):
            raise ValidationError(
                "texts must be a sequence of strings, not a single string; use embed_query for one text",
                [Problem("texts", "expected a sequence of strings")],
            )
        return self._embed_all([_validate_text(text, i) for i, text in enumerate(texts)], "query")

    def cache_info(self) -> CacheInfo:
        """Query-cache counters: ``hits``, ``misses``, ``size`` and ``maxsize``."""
        return self._query_cache.info()

    def clear_cache(self) -> None:
        self._query_cache.clear()

    # -- internals -------------------------------------------------------------------------

    def _embed_all(self, texts: list[str], kind: Kind) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        order = self._batch_order(texts)
        sequence = list(order) if order is not None else list(range(len(texts)))
        chunks = []
        for members in self._batches(texts, sequence):
            batch = [texts[i] for i in members]
            chunks.append(self._checked(self._embed(batch, kind), len(batch)))
        stacked = np.concatenate(chunks, axis=0) if len(chunks) > 1 else chunks[0]
        if order is None:
            return np.ascontiguousarray(stacked)
        result = np.empty_like(stacked)
        result[order] = stacked  # row k of stacked belongs to text order[k]
        return result

    def _checked(self, raw: np.ndarray, rows: int) -> np.ndarray:
        """Reject malformed backend output and L2-normalise it.

        Bad vectors are refused here rather than stored: a NaN or a wrong-length row in the
        index poisons every later search, and nobody would trace it back to the embedder.
        """
        try:
            vectors = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbedderError(f"{self.name} returned something that is not a matrix of numbers: {exc}") from None
        if vectors.ndim != 2 or vectors.shape[0] != rows:
            raise EmbedderError(f"{self.name} returned shape {vectors.shape} for {rows} texts")
        if vectors.shape[1] != self.dimension:
            raise EmbedderError(
                f"{self.name} returned vectors of dimension {vectors.shape[1]}, expected {self.dimension}"
            )
        if not np.isfinite(vectors).all():
            raise EmbedderError(f"{self.name} returned NaN or infinite values")
        if zero_rows(vectors).any():
            raise EmbedderError(f"{self.name} returned an all-zero vector")
        return unit_rows(vectors)
