"""Ollama's ``/api/chat`` in OpenAI's terms and back, for the proxy in front of an OpenAI-compatible upstream.

The request (Ollama -> OpenAI):

* ``model``, ``tools``, ``stream`` (true when left out) and each message's ``role`` and ``content``: the same.
* a message's ``images`` (base64): content parts ``{"type": "image_url", "image_url": {"url": "data:...;base64,..."}}``
  after its text.
* a message's ``tool_calls``: given ids (``call_<message>_<n>``), their ``arguments`` as JSON text; a ``tool``
  message answers the first call not yet answered (of its ``tool_name``, when it names one).
* ``format``: ``"json"`` is ``response_format: json_object``, a JSON schema is ``json_schema``.
* ``options``: ``temperature``, ``top_p``, ``seed``, ``stop``, ``frequency_penalty``, ``presence_penalty`` by name,
  ``num_predict`` as ``max_tokens``.

Other options (``num_ctx``, ``top_k``, ...), ``keep_alive`` and ``think`` have no OpenAI field and are not sent.
The answer (OpenAI -> Ollama): ``message`` (``content``, ``tool_calls`` with their arguments as objects),
``done``, ``done_reason`` (the finish reason), ``prompt_eval_count`` and ``eval_count`` (the usage's tokens,
when the upstream gives them); streamed, one JSON line per text delta and a last line with ``done: true``.
An upstream error becomes Ollama's ``{"error": "..."}`` with the upstream's status.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi.responses import Response

from brain.model.errors import ValidationError
from brain.shells.api.chat_proxy import StreamedAnswer

_OPTIONS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "stop": "stop",
    "num_predict": "max_tokens",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
}
_IMAGE_TYPES = {b"\x89PNG": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF8": "image/gif", b"RIFF": "image/webp"}


def _image_url(image: object, where: str) -> dict[str, object]:
    if not isinstance(image, str):
        raise ValidationError.of(where, f"{where} must be a base64 string (Ollama's images)")
    try:
        head = base64.b64decode(image[:16] + "=" * (-len(image[:16]) % 4))
    except ValueError:
        raise ValidationError.of(where, f"{where} is not base64") from None
    kind = next((t for magic, t in _IMAGE_TYPES.items() if head.startswith(magic)), "image/png")
    return {"type": "image_url", "image_url": {"url": f"data:{kind};base64,{image}"}}


def _openai_message(message: Mapping[str, Any], i: int, calls: list[tuple[str, str]]) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise ValidationError.of(f"messages.{i}", f"messages.{i} must be an object with a 'role' and a 'content'")
    out = {k: v for k, v in message.items() if k not in ("images", "tool_calls", "tool_name", "thinking")}
    images = message.get("images") or []
    if not isinstance(images, list):
        raise ValidationError.of(f"messages.{i}.images", f"messages.{i}.images must be a list of base64 images")
    if images:
        text = message.get("content") or ""
        parts = [{"type": "text", "text": text}] if text else []
        out["content"] = parts + [_image_url(img, f"messages.{i}.images.{j}") for j, img in enumerate(images)]
    if message.get("tool_calls"):
        if not isinstance(message["tool_calls"], list):
            raise ValidationError.of(f"messages.{i}.tool_calls", f"messages.{i}.tool_calls must be a list of calls")
        out["tool_calls"] = []
        for j, call in enumerate(message["tool_calls"]):
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                where = f"messages.{i}.tool_calls.{j}"
                raise ValidationError.of(where, f"{where} must be an object with a 'function' object")
            function = dict(function)
            call_id = f"call_{i}_{j}"
            calls.append((call_id, str(function.get("name", ""))))
            arguments = function.get("arguments", {})
            function["arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
            out["tool_calls"].append({"id": call_id, "type": "function", "function": function})
    if message.get("role") == "tool" and "tool_call_id" not in message:
        name = message.get("tool_name")
        match = next((c for c in calls if name is None or c[1] == name), None)
        if match is not None:
            calls.remove(match)
            out["tool_call_id"] = match[0]
    return out


def openai_request(body: Mapping[str, object]) -> dict[str, object]:
    """An Ollama chat request as an OpenAI chat completions request (see the module's table)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValidationError.of("messages", "messages must be a non-empty list of chat messages")
    calls: list[tuple[str, str]] = []
    out: dict[str, object] = {
        "model": body.get("model"),
        "messages": [_openai_message(m, i, calls) for i, m in enumerate(messages)],
    }
    if body.get("tools"):
        out["tools"] = body["tools"]
    fmt = body.get("format")
    if fmt == "json":
        out["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, Mapping):
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    options = body.get("options")
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        raise ValidationError.of("options", "options must be an object (Ollama's model options)")
    for name, openai_name in _OPTIONS.items():
        if name in options:
            out[openai_name] = options[name]
    return out


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _ollama_tool_calls(calls: Any) -> list[dict[str, Any]]:
    out = []
    for call in calls or ():
        function = dict(call.get("function") or {})
        try:
            function["arguments"] = json.loads(function.get("arguments") or "{}")
        except (ValueError, TypeError):
            pass  # not JSON text: handed on as the model wrote it
        out.append({"function": function})
    return out


def ollama_answer(body: bytes, model: str, started: float | None = None) -> dict[str, object]:
    """An OpenAI chat completion as Ollama's chat answer."""
    data = json.loads(body)
    choice = (data.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    usage = data.get("usage") or {}
    out_message: dict[str, object] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out_message["tool_calls"] = _ollama_tool_calls(message["tool_calls"])
    answer: dict[str, object] = {
        "model": data.get("model") or model,
        "created_at": _now(),
        "message": out_message,
        "done": True,
        "done_reason": choice.get("finish_reason") or "stop",
    }
    if "prompt_tokens" in usage:
        answer["prompt_eval_count"] = usage["prompt_tokens"]
    if "completion_tokens" in usage:
        answer["eval_count"] = usage["completion_tokens"]
    if started is not None:
        answer["total_duration"] = int((time.monotonic() - started) * 1e9)
    return answer


def error_response(status: int, content: bytes, headers: Mapping[str, str]) -> Response:
    """The upstream's error (its status and body) in Ollama's shape ``{"error": "..."}``."""
    try:
        error = json.loads(content).get("error")
        message = error.get("message") if isinstance(error, Mapping) else error
    except (ValueError, AttributeError):
        message = None
    text = message if isinstance(message, str) else content.decode(errors="replace") or f"upstream answered {status}"
    return Response(
        orjson.dumps({"error": text}),
        status_code=status,
        media_type="application/json",
        headers=dict(headers),
    )


class StreamTranslator:
    """An OpenAI server-sent event stream, fed as it arrives, as Ollama's NDJSON lines."""

    def __init__(self, model: str):
        self.model = model
        self.answer = StreamedAnswer()
        self._pending = b""
        self._calls: dict[int, dict[str, Any]] = {}
        self._reason = "stop"
        self._usage: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> bytes:
        self.answer.feed(chunk)
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        out = []
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            try:
                event = json.loads(line[5:])
            except ValueError:
                continue
            self.model = event.get("model") or self.model
            self._usage = event.get("usage") or self._usage
            for choice in event.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                self._reason = choice.get("finish_reason") or self._reason
                delta = choice.get("delta") or {}
                for call in delta.get("tool_calls") or ():
                    self._add_call(call)
                if delta.get("content"):
                    out.append(self._line({"role": "assistant", "content": delta["content"]}, done=False))
        return b"".join(out)

    def _add_call(self, call: Mapping[str, Any]) -> None:
        held = self._calls.setdefault(int(call.get("index", 0)), {"function": {"name": "", "arguments": ""}})
        function = call.get("function") or {}
        held["function"]["name"] += function.get("name") or ""
        held["function"]["arguments"] += function.get("arguments") or ""

    def finish(self) -> bytes:
        """The last lines, once the upstream's stream ended: the tool calls, if any, then ``done: true`` (only
        when the upstream said it was done)."""
        out = b""
        if self._calls:
            calls = _ollama_tool_calls([self._calls[i] for i in sorted(self._calls)])
            out += self._line({"role": "assistant", "content": "", "tool_calls": calls}, done=False)
        if not self.answer.done:
            return out + orjson.dumps({"error": "the chat model's stream ended before it was done"}) + b"\n"
        last: dict[str, Any] = {"done_reason": self._reason}
        if "prompt_tokens" in self._usage:
            last["prompt_eval_count"] = self._usage["prompt_tokens"]
        if "completion_tokens" in self._usage:
            last["eval_count"] = self._usage["completion_tokens"]
        return out + self._line({"role": "assistant", "content": ""}, done=True, **last)

    def _line(self, message: Mapping[str, object], *, done: bool, **extra: object) -> bytes:
        line = {"model": self.model, "created_at": _now(), "message": message, "done": done, **extra}
        return orjson.dumps(line) + b"\n"
