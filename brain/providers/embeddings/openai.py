"""Embeddings from any OpenAI-compatible server's ``/embeddings`` (``BRAIN_EMBEDDER=openai/<model>``), through
the official ``openai`` client: llama.cpp's server started with ``--embedding``, vLLM, LM Studio, Ollama's
``/v1``, hosted APIs. The server is ``BRAIN_OPENAI_BASE_URL`` with ``BRAIN_OPENAI_API_KEY``.

Its failures become :class:`EmbedderUnavailable` (not running, too slow, the model not served, the key
refused) or :class:`EmbedderError` (an answer that is not a list of vectors, one per text) by the ladder every
OpenAI-compatible provider uses (:func:`brain.providers.openai_client.openai_errors`).
"""

from __future__ import annotations

import time

import numpy as np
import pydantic

from brain.model.errors import EmbedderError, EmbedderUnavailable
from brain.model.provider_names import DEFAULT_EMBED_BATCH_SIZE, DEFAULT_OLLAMA_EMBED_TIMEOUT, DEFAULT_QUERY_CACHE_SIZE
from brain.providers.embeddings.base import Embedder, Kind
from brain.providers.openai_client import SharedClient, bounded_json, openai_errors, secret_text

#: input limit assumed for chunking (tokens): servers vary, and 512 is what the BERT-family models take
MAX_TOKENS = 512
#: the most bytes one answer may hold per text: a 4096-dimension vector as JSON floats is about 90 kB
_BYTES_PER_TEXT = 131072
_PROBE_TEXT = "dimension probe"


class _Vector(pydantic.BaseModel):
    index: int
    embedding: list[float]


class _Embeddings(pydantic.BaseModel):
    data: list[_Vector]


class OpenAIEmbedder(Embedder):
    """An embedding model on an OpenAI-compatible server; ``name`` is ``openai/<model>``. Construction never
    touches the network; the dimension is learned from the first answer."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: pydantic.SecretStr | str | None = None,
        timeout: float = DEFAULT_OLLAMA_EMBED_TIMEOUT,
        batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        cache_size: int = DEFAULT_QUERY_CACHE_SIZE,
    ):
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        if not model or "/" in model or any(c.isspace() for c in model):
            raise EmbedderError(
                f"invalid model name {model!r}: set BRAIN_EMBEDDER to openai/<a model the server lists>"
            )
        if not base_url:
            raise EmbedderUnavailable(
                f"BRAIN_EMBEDDER=openai/{model} needs an OpenAI-compatible server: set BRAIN_OPENAI_BASE_URL, e.g. "
                "http://127.0.0.1:8080/v1"
            )
        self.model = model
        self.name = f"openai/{model}"
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._key = secret_text(api_key)
        self._dimension: int | None = None
        self._client = SharedClient(self.base_url, self._key, timeout)

    def __repr__(self) -> str:  # never the key
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def dimension(self) -> int:
        """Learned from the first answer (may cost one probe request)."""
        if self._dimension is None:
            self._embed([_PROBE_TEXT], "query")
        assert self._dimension is not None  # _embed sets it or raises
        return self._dimension

    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        client = self._client.get()
        started = time.monotonic()
        timed_out = (
            f"{self.base_url} did not answer within {self.timeout:g}s while embedding {len(texts)} texts with "
            f"{self.model!r}; raise BRAIN_OLLAMA_TIMEOUT (the embedders' time limit) or lower BRAIN_EMBED_BATCH_SIZE"
        )
        with openai_errors(
            self.base_url,
            self.model,
            self._key,
            unavailable=EmbedderUnavailable,
            error=EmbedderError,
            timed_out=timed_out,
            doing="embed",
            model_setting="BRAIN_EMBEDDER",
            route="/embeddings",
        ):
            with client.embeddings.with_streaming_response.create(
                model=self.model, input=texts, encoding_format="float"
            ) as response:
                raw = bounded_json(response, _BYTES_PER_TEXT * len(texts), started + self.timeout)
            answer = _Embeddings.model_validate_json(raw)
        rows = sorted(answer.data, key=lambda v: v.index)
        if [v.index for v in rows] != list(range(len(texts))):
            raise EmbedderError(f"{self.base_url} returned {len(rows)} embeddings for {len(texts)} texts")
        try:
            vectors = np.array([v.embedding for v in rows], dtype=np.float32)
        except ValueError:  # ragged rows
            raise EmbedderError(f"{self.base_url} returned vectors of different lengths for {self.model!r}") from None
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise EmbedderError(f"{self.base_url} returned empty vectors for {self.model!r}")
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
        return vectors
