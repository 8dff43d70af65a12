"""The official Ollama client, opened the one way every Ollama provider (embedder, summariser, extractor) opens
it, the one ladder from what it raises to brain's errors, and the client holder of the chat-model providers."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import httpx
import ollama

from brain.model.errors import BrainError
from brain.model.provider_names import DEFAULT_SUMMARY_MODEL, model_name_problem


def open_ollama_client(host: str, timeout: float, error: type[BrainError]) -> ollama.Client:
    """The official client for ``host``; a host it cannot use raises ``error`` naming OLLAMA_HOST."""
    try:
        return ollama.Client(host=host, timeout=timeout)
    except (ValueError, httpx.InvalidURL) as exc:
        raise error(f"OLLAMA_HOST={host!r} is not a usable address ({exc}); use e.g. http://127.0.0.1:11434") from None


#: the first Ollama release that serves each endpoint, for the message when a server lacks it
_ENDPOINT_SINCE = {"embed": "0.3", "chat": "0.1.14", "tags": "0.1"}


@contextmanager
def ollama_errors(
    host: str,
    endpoint: str,
    model: str,
    *,
    unavailable: type[BrainError],
    error: type[BrainError],
    timed_out: str,
    doing: str,
    refusals: Sequence[tuple[str, str]] = (),
) -> Iterator[None]:
    """Run one call of the ollama client to ``/api/<endpoint>`` of ``host`` and turn its failures into
    ``unavailable`` (Ollama cannot serve now: not running, too slow, model not pulled, endpoint
    missing, a server failure) or ``error`` (it answered, but not with something usable), each
    message saying what to do. ``timed_out`` is the timeout's message (it names the caller's
    setting); ``doing`` completes "refused to ..."; ``refusals`` are ``(words in Ollama's error,
    our message)`` pairs a provider knows how to explain (raised as ``error``)."""
    try:
        yield
    except ConnectionError:  # what the ollama client raises for httpx.ConnectError
        raise unavailable(
            f"cannot reach Ollama at {host}: start it with `ollama serve`, "
            "or set OLLAMA_HOST to the address it listens on"
        ) from None
    except httpx.TimeoutException:
        raise unavailable(timed_out) from None
    except httpx.InvalidURL as exc:
        raise unavailable(
            f"OLLAMA_HOST={host!r} is not a usable address ({exc}); use e.g. http://127.0.0.1:11434"
        ) from None
    except httpx.TransportError as exc:
        raise unavailable(f"the connection to Ollama at {host} failed: {exc}") from None
    except ollama.ResponseError as exc:
        message = str(exc.error)
        lowered = message.lower()
        if "not found" in lowered and "model" in lowered:
            raise unavailable(
                f"Ollama at {host} does not have the model {model!r}: run `ollama pull {model}`"
            ) from None
        for words, explained in refusals:
            if words in lowered:
                raise error(explained) from None
        if exc.status_code == 404:  # an older Ollama answers an endpoint it lacks with "404 page not found"
            raise unavailable(
                f"Ollama at {host} has no /api/{endpoint} endpoint ({message}); upgrade Ollama to "
                f"{_ENDPOINT_SINCE.get(endpoint, 'a recent release')} or later"
            ) from None
        if exc.status_code >= 500:
            raise unavailable(f"Ollama at {host} failed ({exc.status_code}): {message}") from None
        raise error(f"Ollama at {host} refused to {doing} with {model!r}: {message}") from None
    except ValueError as exc:  # a 200 whose body is not JSON, or JSON of the wrong shape (pydantic)
        raise error(
            f"{host} answered /api/{endpoint} with something that is not an Ollama {endpoint} response: {exc}"
        ) from None


class OllamaChatModel:
    """A chat model on one Ollama server (``name`` is ``ollama/<model>``), its client opened on first use and
    kept; construction touches no network. Subclasses name their two errors (the model cannot serve now /
    answered something unusable) and the setting that names the model."""

    unavailable: type[BrainError] = BrainError
    error: type[BrainError] = BrainError
    #: the setting that names the model, for the message when the name is not one
    model_setting = ""

    def __init__(self, model: str, *, host: str, timeout: float):
        if model_name_problem(model):
            raise self.error(
                f"invalid Ollama model name {model!r}: set {self.model_setting} to an Ollama model "
                f"name such as {DEFAULT_SUMMARY_MODEL}"
            )
        self.model = model
        self.name = f"ollama/{model}"
        self.host = host
        self.timeout = timeout
        self._client: ollama.Client | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, host={self.host!r})"

    @contextmanager
    def client(self, timeout: float | None = None) -> Iterator[tuple[ollama.Client, float]]:
        """The client for one call, and that call's time limit: ``timeout``, at most the model's own. A shorter
        limit gets a client of its own, so the shared one keeps the configured timeout."""
        limit = self.timeout if timeout is None else min(float(timeout), self.timeout)
        if limit < self.timeout:
            with open_ollama_client(self.host, limit, self.unavailable) as client:
                yield client, limit
            return
        with self._lock:
            if self._client is None:
                self._client = open_ollama_client(self.host, self.timeout, self.unavailable)
            shared = self._client
        yield shared, limit
