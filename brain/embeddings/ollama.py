"""Embeddings from a local Ollama server through the official ``ollama`` client, and the one
ladder (:func:`ollama_errors`) from what that client raises to brain's errors, which the Ollama
summariser uses too.

Every way Ollama can be unusable (not running, model not pulled, too slow) becomes an
:class:`EmbedderUnavailable` whose message says the one thing to do about it, because
the person reading it is usually setting brain up for the first time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import httpx
import numpy as np
import ollama

from brain.config import Settings, env_name
from brain.embeddings.base import Embedder, Kind
from brain.errors import BrainError, EmbedderError, EmbedderUnavailable

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


def open_ollama_client(host: str, timeout: float, error: type[BrainError]) -> ollama.Client:
    """The official client for ``host``; a host it cannot use raises ``error`` naming OLLAMA_HOST."""
    try:
        return ollama.Client(host=host, timeout=timeout)
    except (ValueError, httpx.InvalidURL) as exc:
        raise error(f"OLLAMA_HOST={host!r} is not a usable address ({exc}); use e.g. http://127.0.0.1:11434") from None


#: the first Ollama release that serves each endpoint, for the message when a server lacks it
_ENDPOINT_SINCE = {"embed": "0.3", "chat": "0.1.14", "tags": "0.1"}


@contextmanager
def ollama_errors(host: str, endpoint: str, model: str, *, unavailable: type[BrainError], error: type[BrainError],
                  timed_out: str, doing: str, refusals: Sequence[tuple[str, str]] = ()) -> Iterator[None]:
    """Run one call of the ollama client to ``/api/<endpoint>`` of ``host`` and turn its failures into
    ``unavailable`` (Ollama cannot serve now: not running, too slow, model not pulled, endpoint
    missing, a server failure) or ``error`` (it answered, but not with something usable), each
    message saying what to do. ``timed_out`` is the timeout's message (it names the caller's
    setting); ``doing`` completes "refused to ..."; ``refusals`` are ``(words in Ollama's error,
    our message)`` pairs a provider knows how to explain (raised as ``error``)."""
    try:
        yield
    except ConnectionError:  # what the ollama client raises for httpx.ConnectError
        raise unavailable(f"cannot reach Ollama at {host}: start it with `ollama serve`, "
                          "or set OLLAMA_HOST to the address it listens on") from None
    except httpx.TimeoutException:
        raise unavailable(timed_out) from None
    except httpx.InvalidURL as exc:
        raise unavailable(f"OLLAMA_HOST={host!r} is not a usable address ({exc}); use e.g. http://127.0.0.1:11434") \
            from None
    except httpx.TransportError as exc:
        raise unavailable(f"the connection to Ollama at {host} failed: {exc}") from None
    except ollama.ResponseError as exc:
        message = str(exc.error)
        lowered = message.lower()
        if "not found" in lowered and "model" in lowered:
            raise unavailable(f"Ollama at {host} does not have the model {model!r}: run `ollama pull {model}`") \
                from None
        for words, explained in refusals:
            if words in lowered:
                raise error(explained) from None
        if exc.status_code == 404:  # an older Ollama answers an endpoint it lacks with "404 page not found"
            raise unavailable(f"Ollama at {host} has no /api/{endpoint} endpoint ({message}); upgrade Ollama to "
                              f"{_ENDPOINT_SINCE.get(endpoint, 'a recent release')} or later") from None
        if exc.status_code >= 500:
            raise unavailable(f"Ollama at {host} failed ({exc.status_code}): {message}") from None
        raise error(f"Ollama at {host} refused to {doing} with {model!r}: {message}") from None
    except ValueError as exc:  # a 200 whose body is not JSON, or JSON of the wrong shape (pydantic)
        raise error(f"{host} answered /api/{endpoint} with something that is not an Ollama {endpoint} response: "
                    f"{exc}") from None


def _base_model(model: str) -> str:
    """``nomic-embed-text:v1.5`` -> ``nomic-embed-text`` (tags do not change the architecture)."""
    return model.split(":", 1)[0]


class OllamaEmbedder(Embedder):
    """An embedding model served by Ollama; ``name`` is ``ollama/<model>``.

    Construction never touches the network, so building the app (and its error
    messages) works with Ollama down; the first embed call is the first request.
    """

    def __init__(self, model: str = DEFAULT_MODEL, settings: Settings | None = None):
        settings = settings if settings is not None else Settings()
        super().__init__(batch_size=settings.embed_batch_size, cache_size=settings.query_cache_size)
        if not model or "/" in model or any(c.isspace() for c in model):
            raise EmbedderError(f"invalid Ollama model name {model!r}")
        self.model = model
        self.name = f"ollama/{model}"
        self.host = settings.ollama_host
        self.timeout = settings.ollama_timeout
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
        timed_out = (f"Ollama at {self.host} did not answer within {self.timeout:g}s while embedding "
                     f"{len(texts)} texts with {self.model!r}; the first call may be loading the model. "
                     f"Raise {env_name('ollama_timeout')} or lower {env_name('embed_batch_size')}")
        not_embedding = (f"{self.model!r} is not an embedding model; set {env_name('embedder')} to e.g. "
                         f"ollama/{DEFAULT_MODEL}")
        with ollama_errors(self.host, "embed", self.model, unavailable=EmbedderUnavailable, error=EmbedderError,
                           timed_out=timed_out, doing="embed", refusals=[("does not support embeddings", not_embedding)]):
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
