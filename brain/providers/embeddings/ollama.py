"""Embeddings from a local Ollama server through the official ``ollama`` client; its failures become
brain's errors by the one ladder both Ollama providers use (:func:`brain.providers.ollama_client.ollama_errors`).

Every way Ollama can be unusable (not running, model not pulled, too slow) becomes an
:class:`EmbedderUnavailable` whose message says the one thing to do about it, because
the person reading it is usually setting brain up for the first time.
"""

from __future__ import annotations

import threading

import numpy as np
import ollama

from brain.model.errors import EmbedderError, EmbedderUnavailable
from brain.model.provider_names import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_OLLAMA_EMBED_TIMEOUT,
    DEFAULT_OLLAMA_HOST,
    DEFAULT_QUERY_CACHE_SIZE,
)
from brain.providers.embeddings.base import Embedder, Kind
from brain.providers.ollama_client import ollama_errors, open_ollama_client

DEFAULT_MODEL = "nomic-embed-text"
#: input limit assumed for chunking (tokens, [CLS]/[SEP] included). Ollama models vary; 512 is the
#: BERT-family limit and safe for nomic-embed-text (2048+).
MAX_TOKENS = 512

#: Dimensions of common embedding models, so ``dimension`` is known without a server
#: round-trip. Other models are measured on their first embed call.
KNOWN_DIMENSIONS: dict[str, int] = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
}

#: nomic-embed models were trained with task prefixes; without them retrieval quality
#: drops noticeably (see the nomic-embed-text model card).
_NOMIC_PREFIXES: dict[str, str] = {
    "document": "search_document: ",
    "query": "search_query: ",
}

_PROBE_TEXT = "dimension probe"


def _base_model(model: str) -> str:
    """``nomic-embed-text:v1.5`` -> ``nomic-embed-text`` (tags do not change the architecture)."""
    return model.split(":", 1)[0]


class OllamaEmbedder(Embedder):
    """An embedding model served by Ollama; ``name`` is ``ollama/<model>``.

    Construction never touches the network, so building the app (and its error
    messages) works with Ollama down; the first embed call is the first request. ``host``: the server's
    URL; ``timeout``: seconds one request may take; ``batch_size``: texts per request at most;
    ``cache_size``: query vectors kept for repeated queries (0: none).
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        host: str = DEFAULT_OLLAMA_HOST,
        timeout: float = DEFAULT_OLLAMA_EMBED_TIMEOUT,
        batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        cache_size: int = DEFAULT_QUERY_CACHE_SIZE,
    ):
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        if not model or "/" in model or any(c.isspace() for c in model):
            raise EmbedderError(f"invalid Ollama model name {model!r}")
        self.model = model
        self.name = f"ollama/{model}"
        self.host = host
        self.timeout = timeout
        self._dimension: int | None = KNOWN_DIMENSIONS.get(_base_model(model))
        self._prefixes = _NOMIC_PREFIXES if model.startswith("nomic-embed") else None
        self._client: ollama.Client | None = None
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        """Known from the model table, or from the first response (may cost one probe request)."""
        if self._dimension is None:
            self._embed([_PROBE_TEXT], "query")
        assert self._dimension is not None  # _embed sets it or raises
        return self._dimension

    def _get_client(self) -> ollama.Client:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = open_ollama_client(self.host, self.timeout, EmbedderError)
        return self._client

    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        if self._prefixes is not None:
            texts = [self._prefixes[kind] + text for text in texts]
        client = self._get_client()
        timed_out = (
            f"Ollama at {self.host} did not answer within {self.timeout:g}s while embedding "
            f"{len(texts)} texts with {self.model!r}; the first call may be loading the model. "
            "Raise BRAIN_OLLAMA_TIMEOUT or lower BRAIN_EMBED_BATCH_SIZE"
        )
        not_embedding = f"{self.model!r} is not an embedding model; set BRAIN_EMBEDDER to e.g. ollama/{DEFAULT_MODEL}"
        with ollama_errors(
            self.host,
            "embed",
            self.model,
            unavailable=EmbedderUnavailable,
            error=EmbedderError,
            timed_out=timed_out,
            doing="embed",
            refusals=[("does not support embeddings", not_embedding)],
        ):
            response = client.embed(model=self.model, input=texts)

        try:
            vectors = np.array(response.embeddings, dtype=np.float32)
        except ValueError:  # ragged rows
            raise EmbedderError(f"Ollama returned vectors of different lengths for {self.model!r}") from None
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbedderError(
                f"Ollama returned {len(response.embeddings)} embeddings for {len(texts)} texts with {self.model!r}"
            )
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
        return vectors
