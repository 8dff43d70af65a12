"""A small real HTTP server on 127.0.0.1 that answers like an OpenAI-compatible chat API (Ollama's ``/v1``), and
records what it receives: the upstream the chat proxy's tests stand brain in front of.

* ``GET /v1/models`` -> ``{"object": "list", "data": [{"id": "llama3.2:3b", ...}]}``
* ``POST /v1/embeddings`` -> deterministic vectors of :data:`DIMENSION` (:func:`embeddings`)
* ``POST /v1/chat/completions`` -> a chat completion whose text is :func:`reply_to` the last user message; with
  ``stream: true``, server-sent events (a role chunk, one chunk per word, a finish chunk, ``data: [DONE]``),
  one every ``chunk_delay`` seconds, each one's send time kept in :attr:`OpenAIStub.sent_at`.

``script`` scripts the next answers instead, one item per chat request: a ``str`` (the answer's content),
a callable ``(request body) -> item`` (an item computed from what was sent), ``(status, message)`` (an error
with that message), ``bytes`` (the raw body, answered as is:
JSON for a plain request, the whole event stream for a streamed one), an ``int`` (that error status, with
OpenAI's error body), ``"hang"`` (read the request, never answer), ``"hang-midway"`` (stream two chunks, then
nothing), ``"drop-midway"`` (stream two chunks, then close the connection) or ``"401-quoting-key"`` (a 401 whose
message quotes the request's Authorization header, as OpenAI's "Incorrect API key provided" does).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from brain.ops.values import PART_CLOSING

MODEL = "llama3.2:3b"


def reply_to(text: str) -> str:
    return f"You said: {text}"


def user_said(content: str) -> str:
    """What the user wrote in a user message as brain sends it: the text after the part brain put before it."""
    return content.rpartition(PART_CLOSING + "\n")[2]


def brain_part(content: str) -> str:
    """The part brain put before a user message's text ("" when none)."""
    head, closing, _ = content.rpartition(PART_CLOSING + "\n")
    return head if closing else ""


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]

    @property
    def system_text(self) -> str:
        return "\n".join(m["content"] for m in self.messages if m["role"] == "system" and isinstance(m["content"], str))

    @property
    def body_text(self) -> str:
        """Every message's text content, whoever wrote it."""
        return "\n".join(m["content"] for m in self.messages if isinstance(m["content"], str))

    @property
    def brain_text(self) -> str:
        """Everything brain added: its system message and the parts before user messages."""
        parts = [
            brain_part(m["content"]) for m in self.messages if m["role"] == "user" and isinstance(m["content"], str)
        ]
        return "\n".join([self.system_text, *parts])

    @property
    def said(self) -> list[str]:
        """The user and assistant messages as their speakers wrote them (brain's parts left out)."""
        return [
            user_said(m["content"]) if m["role"] == "user" else m["content"]
            for m in self.messages
            if m["role"] in ("user", "assistant") and isinstance(m["content"], str)
        ]


def completion(text: str | None, *, tool_calls: list | None = None, model: str = MODEL) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


#: the script's words for a misbehaviour; any other string is the content of the answer
_SCRIPT_WORDS = ("hang", "hang-midway", "drop-midway", "401-quoting-key")
#: the dimension of the stub's vectors
DIMENSION = 16


def embeddings(texts: Any, model: str) -> dict[str, Any]:
    """Deterministic vectors (from a SHA-256 of each text), in OpenAI's ``/v1/embeddings`` shape."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    data = []
    for i, text in enumerate(texts):
        digest = hashlib.sha256(text.encode()).digest()
        data.append({"object": "embedding", "index": i, "embedding": [b / 255 - 0.5 for b in digest[:DIMENSION]]})
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def chunk(delta: dict[str, Any], finish: str | None = None, model: str = MODEL) -> bytes:
    event = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def stream_events(text: str) -> list[bytes]:
    words = text.split(" ")
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
    return parts + [chunk({}, finish="stop"), b"data: [DONE]\n\n"]


class OpenAIStub:
    def __init__(self, *, chunk_delay: float = 0.0, key: str | None = None):
        self.chunk_delay = chunk_delay
        self.key = key  # when set, a request without "Authorization: Bearer <key>" is a 401
        self.received: list[Received] = []
        self.script: list[Any] = []
        self.sent_at: list[float] = []
        self.disconnected = threading.Event()
        self._stop = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path != "/v1/models":
                    return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                stub.received.append(Received(self.path, dict(self.headers), b""))
                if not stub._authorised(self.headers):
                    return self._json(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "library"}]})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stub.received.append(Received(self.path, dict(self.headers), raw))
                if self.path not in ("/v1/chat/completions", "/v1/embeddings"):
                    return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                if not stub._authorised(self.headers):
                    return self._json(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
                body = json.loads(raw)
                scripted = stub.script.pop(0) if stub.script else None
                if callable(scripted):
                    scripted = scripted(body)
                if self.path == "/v1/embeddings" and not isinstance(scripted, (int, bytes)):
                    return self._json(200, embeddings(body["input"], body["model"]))
                if isinstance(scripted, str) and scripted not in _SCRIPT_WORDS:
                    return self._json(200, completion(scripted))
                if isinstance(scripted, tuple):  # (status, message): an error with that message
                    return self._json(scripted[0], {"error": {"message": scripted[1], "type": "x"}})
                if isinstance(scripted, int):
                    return self._json(scripted, {"error": {"message": f"stub failed with {scripted}", "type": "x"}})
                if scripted == "401-quoting-key":
                    message = f"Incorrect API key provided: {self.headers.get('Authorization')}"
                    return self._json(401, {"error": {"message": message, "type": "invalid_request_error"}})
                if scripted == "hang":
                    stub._stop.wait()
                    return
                stream = body.get("stream") is True
                if isinstance(scripted, bytes):
                    if stream:
                        return self._stream([scripted])
                    return self._send(200, "application/json", scripted)
                last = [m for m in body["messages"] if m["role"] == "user"][-1]
                content = last["content"] if isinstance(last["content"], str) else "(parts)"
                text = reply_to(user_said(content))
                if not stream:
                    return self._json(200, completion(text))
                events = stream_events(text)
                if scripted in ("hang-midway", "drop-midway"):
                    return self._stream(events[:2], then=scripted)
                self._stream(events)

            def _json(self, status: int, body: Any) -> None:
                self._send(status, "application/json", json.dumps(body).encode())

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, events: Iterable[bytes], then: str | None = None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for i, event in enumerate(events):
                        if i and stub.chunk_delay:
                            time.sleep(stub.chunk_delay)
                        self.wfile.write(event)
                        self.wfile.flush()
                        stub.sent_at.append(time.monotonic())
                    if then == "hang-midway":
                        stub._stop.wait()
                    elif then == "drop-midway":
                        return
                except (BrokenPipeError, ConnectionResetError):
                    stub.disconnected.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        # shutdown() waits for serve_forever's next poll: 0.5 s by default, paid by every test
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def _authorised(self, headers: Any) -> bool:
        return self.key is None or headers.get("Authorization") == f"Bearer {self.key}"

    def chats(self) -> list[Received]:
        return [r for r in self.received if r.path == "/v1/chat/completions"]

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
