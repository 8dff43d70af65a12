"""A small real HTTP server that answers like Ollama, for tests that must not need Ollama.

It speaks the parts of Ollama's API brain uses, with the same JSON shapes and error
answers, so the real ``ollama`` client (and its error handling) is exercised end to end:

* ``POST /api/embed`` -> ``{"model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"}``
* ``POST /api/chat`` (``stream: false``) -> ``{"model", "created_at", "message": {"role", "content"}, "done", ...}``
* ``GET /api/tags`` -> ``{"models": [{"name": "nomic-embed-text:latest", ...}]}`` (embedding and chat models)
* ``GET /api/version`` -> ``{"version": ...}``
* unknown model -> 404 ``{"error": "model \\"x\\" not found, try pulling it first"}``

Vectors are deterministic: derived from a SHA-256 of the text, so equal texts give equal
vectors and different texts differ. Every request is recorded in :attr:`OllamaStub.requests`.

Chat answers are deterministic too (:func:`stub_chat_reply`). ``chat_mode`` (changeable while the
server runs) makes ``/api/chat`` misbehave the ways a real server or proxy can: ``"ok"``,
``"not-json"`` (200 with an HTML body), ``"wrong-shape"`` (200 JSON without a message),
``"empty"`` (a message with no text), ``"error"`` (500 ``{"error": ...}``); ``chat_delay`` makes it
slow. ``chat_script`` scripts the answers instead: a list consumed in order, one item per chat request,
each a string (the message content), a callable ``(request_body) -> str`` (the content, computed from
what was sent), or an int (answer with that HTTP error status); when the script is empty the
deterministic reply (or ``chat_mode``) answers. Chat answers carry ``prompt_eval_count`` (the words of
the messages sent) and ``eval_count`` (the words of the answer), as Ollama's token counts.
"Down" is simply a stopped stub (or a port nobody listens on). ``hang = True`` makes it hung: it accepts
every connection and reads the request, then never answers (until the stub stops);
``hang_after = n`` does so for every embed request after the first ``n`` (a process killed while it
waits has had exactly ``n`` answers).

Usage::

    with OllamaStub() as stub:
        settings = Settings(embedder="ollama/nomic-embed-text", ollama_host=stub.url)
        ...
        assert len(stub.embed_requests()) == 1
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

DEFAULT_MODELS: Mapping[str, int] = {"nomic-embed-text": 768}
DEFAULT_CHAT_MODELS: tuple[str, ...] = ("llama3.2:3b",)
CHAT_MODES = ("ok", "not-json", "wrong-shape", "empty", "error")
ScriptedAnswer = str | Callable[[Any], str] | int
_FAKE_DIGEST = "0a109f422b47e3a30ba2b10eca18548e944e8a23073ee3f3e947efcf3c45e59f"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any  # parsed JSON, or None for a request without a body

    @property
    def inputs(self) -> list[str]:
        """The texts of an ``/api/embed`` request, as a list whether it sent one or many."""
        raw = self.body.get("input", []) if isinstance(self.body, dict) else []
        return [raw] if isinstance(raw, str) else list(raw)


def dead_url() -> str:
    """The address of a stub that has been stopped: nothing listens there any more."""
    with OllamaStub(chat_models=DEFAULT_CHAT_MODELS) as server:
        url = server.url
    return url


def stub_vector(text: str, dimension: int, norm: float = 1.0) -> list[float]:
    """The vector the stub returns for ``text``: a hash-seeded Gaussian direction scaled to ``norm``."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dimension)
    vector *= norm / np.linalg.norm(vector)
    return vector.tolist()


def stub_chat_reply(messages: list[dict[str, Any]]) -> str:
    """The stub's answer to a chat: names the last user message's hash and its first words."""
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    digest = hashlib.sha256(str(last).encode("utf-8")).hexdigest()[:12]
    head = " ".join(str(last).split()[:12])
    return f"Model summary {digest}: {head}"


def _tag(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


class OllamaStub:
    """The server. ``models`` maps each pulled model to its vector dimension; ``chat_models`` names
    the pulled chat models (none by default; e.g. ``chat_models=DEFAULT_CHAT_MODELS``).

    ``norm`` scales every returned vector (real models do not all return unit vectors),
    and ``delay`` makes ``/api/embed`` answer late, to exercise client timeouts.
    """

    def __init__(
        self,
        models: Mapping[str, int] | Iterable[str] = DEFAULT_MODELS,
        *,
        norm: float = 1.0,
        delay: float = 0.0,
        chat_models: Iterable[str] = (),
        chat_mode: str = "ok",
        chat_delay: float = 0.0,
        hang: bool = False,
    ):
        pairs = models.items() if isinstance(models, Mapping) else ((m, 768) for m in models)
        self.models: dict[str, int] = {_tag(name): dim for name, dim in pairs}
        self.chat_models: set[str] = {_tag(name) for name in chat_models}
        self.norm = norm
        self.delay = delay
        self.chat_mode = chat_mode
        self.chat_delay = chat_delay
        self.chat_script: list[ScriptedAnswer] = []
        self.hang = hang
        self.hang_after: int | None = None
        self._released = threading.Event()  # set when the stub stops: hung requests end then
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> OllamaStub:
        self._released.clear()
        handler = type("Handler", (_Handler,), {"stub": self})
        # ThreadingHTTPServer uses daemon threads: a request stalled by ``delay`` cannot block shutdown.
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # A short poll interval: shutdown() waits for the next poll, 0.5 s by default, per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="ollama-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OllamaStub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stub is not running; use it as a context manager or call start()")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- inspection ------------------------------------------------------------------------

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def embed_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path == "/api/embed"]

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path == "/api/chat"]

    def next_scripted(self) -> ScriptedAnswer | None:
        """The next scripted chat answer, taken off the script; None when the script is empty."""
        with self._lock:
            return self.chat_script.pop(0) if self.chat_script else None

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def dimension_of(self, model: str) -> int | None:
        return self.models.get(_tag(model))


class _Handler(BaseHTTPRequestHandler):
    stub: OllamaStub
    protocol_version = "HTTP/1.1"  # keep-alive, like the real server; the client reuses connections
    timeout = 10  # seconds an idle kept-alive connection may hold a handler thread after the test

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging; pytest output should show test failures, not traffic."""

    # -- plumbing --------------------------------------------------------------------------

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw.decode("utf-8", "replace")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (a timeout test); that is the expected outcome, not a stub error.
            self.close_connection = True

    def _send_json(self, status: int, payload: Any) -> None:
        self._send(status, "application/json; charset=utf-8", json.dumps(payload).encode("utf-8"))

    def _send_text(self, status: int, text: str) -> None:
        self._send(status, "text/plain", text.encode("utf-8"))

    # -- routes ----------------------------------------------------------------------------

    def _hung(self) -> bool:
        """With ``hang`` on: wait, without answering, until the stub stops; then drop the connection."""
        if not self.stub.hang:
            return False
        self.stub._released.wait()
        self.close_connection = True
        return True

    def do_GET(self) -> None:
        self.stub.record(RecordedRequest("GET", self.path, None))
        if self._hung():
            return
        if self.path == "/api/tags":
            names = [*self.stub.models, *sorted(self.stub.chat_models - set(self.stub.models))]
            self._send_json(200, {"models": [_model_entry(name) for name in names]})
        elif self.path == "/api/version":
            self._send_json(200, {"version": "0.6.3"})
        elif self.path == "/":
            self._send_text(200, "Ollama is running")
        else:
            self._send_text(404, "404 page not found")  # what Ollama's router answers

    def do_POST(self) -> None:
        body = self._read_body()
        self.stub.record(RecordedRequest("POST", self.path, body))
        if self._hung():
            return
        if self.path == "/api/chat":
            self._chat(body)
            return
        if self.path != "/api/embed":
            self._send_text(404, "404 page not found")
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": "invalid request body"})
            return
        model = body.get("model")
        if not model:
            self._send_json(400, {"error": "model is required"})
            return
        if self.stub.hang_after is not None and len(self.stub.embed_requests()) > self.stub.hang_after:
            self.stub._released.wait()
            self.close_connection = True
            return
        dimension = self.stub.dimension_of(str(model))
        if dimension is None:
            self._send_json(404, {"error": f'model "{model}" not found, try pulling it first'})
            return
        raw = body.get("input", [])
        inputs = [raw] if isinstance(raw, str) else raw
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            self._send_json(400, {"error": "invalid input type"})
            return
        if raw == "":
            inputs = []  # Ollama answers an empty string with no embeddings (it only loads the model)
        if self.stub.delay:
            time.sleep(self.stub.delay)
        self._send_json(
            200,
            {
                "model": model,
                "embeddings": [stub_vector(text, dimension, self.stub.norm) for text in inputs],
                "total_duration": 14_143_917,
                "load_duration": 1_019_500,
                "prompt_eval_count": sum(len(text.split()) + 2 for text in inputs),
            },
        )


    def _chat(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("messages", []), list):
            self._send_json(400, {"error": "invalid request body"})
            return
        model = str(body.get("model") or "")
        if not model:
            self._send_json(400, {"error": "model is required"})
            return
        if _tag(model) not in self.stub.chat_models:
            self._send_json(404, {"error": f'model "{model}" not found, try pulling it first'})
            return
        if self.stub.chat_delay:
            time.sleep(self.stub.chat_delay)
        messages = body.get("messages") or []
        scripted = self.stub.next_scripted()
        if isinstance(scripted, int):
            self._send_json(scripted, {"error": f"scripted failure {scripted}"})
            return
        if scripted is not None:
            content = scripted if isinstance(scripted, str) else scripted(body)
            self._send_json(200, _chat_reply(model, messages, content))
            return
        mode = self.stub.chat_mode
        if mode == "not-json":
            self._send(200, "text/html", b"<html><body>502 Bad Gateway</body></html>")
            return
        if mode == "error":
            self._send_json(500, {"error": "llama runner process has terminated: signal: killed"})
            return
        content = "" if mode == "empty" else stub_chat_reply(messages)
        reply = _chat_reply(model, messages, content)
        if mode == "wrong-shape":
            reply = {"model": model, "message": ["not", "a", "message"], "done": True}
        self._send_json(200, reply)


def _chat_reply(model: str, messages: list[Any], content: str) -> dict[str, Any]:
    """A non-streamed chat answer; token counts are word counts, so a test can predict them."""
    sent = sum(len(str(m.get("content", "")).split()) for m in messages if isinstance(m, dict))
    return {
        "model": model,
        "created_at": "2025-01-01T00:00:00.000000000Z",
        "message": {"role": "assistant", "content": content},
        "done_reason": "stop",
        "done": True,
        "total_duration": 512_000_000,
        "prompt_eval_count": sent,
        "eval_count": len(content.split()),
    }


def _model_entry(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": "2025-01-01T00:00:00.000000000Z",
        "size": 274_302_450,
        "digest": _FAKE_DIGEST,
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "nomic-bert",
            "families": ["nomic-bert"],
            "parameter_size": "137M",
            "quantization_level": "F16",
        },
    }
