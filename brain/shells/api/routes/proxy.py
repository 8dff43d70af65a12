"""The chat proxy: OpenAI's ``/v1/chat/completions`` and ``/v1/models``, and Ollama's ``/api/chat``, answered by
the chat model at ``BRAIN_CHAT_UPSTREAM`` with brain's context in its prompt and the exchange recorded after the
answer (:mod:`brain.shells.api.chat_proxy` holds the rules; :mod:`brain.shells.api.ollama_format` the
translation of Ollama's format).

Outcomes that are not an answer: the upstream's own error (its status and body passed back, the upstream's key
taken out of it; a refusal of that key, 401 or 403, is brain's 502, as the client's own credentials are not in
question); nothing answering (502); no answer head within ``BRAIN_CHAT_UPSTREAM_TIMEOUT`` (504); an answer longer
than ``BRAIN_CHAT_UPSTREAM_MAX_BYTES`` (502, read no further; a stream is cut there with an error event); a stream
that stops or stalls midway (it ends with an error event and no end marker); a client that goes away midway (the
upstream request is closed). None of them records anything: an exchange is recorded only with the whole answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from brain.model.errors import BrainError, ConfigError, UpstreamRefused, ValidationError
from brain.model.ids import is_own_form, own_conversation_id
from brain.ops.error_table import wire_of
from brain.ops.values import SHOWN_KEY
from brain.shells.api import ollama_format
from brain.shells.api.chat_proxy import (
    CONVERSATION_HEADER,
    ENTITY_HEADER,
    RECORDED_CHARS,
    ChatPlan,
    PendingRecords,
    StreamedAnswer,
    checked_messages,
    completion_text,
    header_conversation,
    is_own_conversation,
    plan_chat,
    previous_user_text,
    recorded_text,
    requested_entity,
)
from brain.shells.api.models import documented_responses
from brain.shells.api.request_context import acting_of, ops_of
from brain.shells.api.upstream import (
    Upstream,
    UpstreamError,
    UpstreamUnreachable,
    passed_headers,
)
from brain.shells.web.error_responses import brain_error_response

log = logging.getLogger("brain.proxy")
#: on a plain answer whose recorded text was cut to RECORDED_CHARS: how much of it was recorded
RECORDED_HEADER = "X-Brain-Recorded"

_PROXY_RESPONSES = documented_responses(403, 413, 422, 502, 503, 504)
_HEADERS = [
    {
        "name": ENTITY_HEADER,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": "the entity the request acts for (a bound token: its own only)",
    },
    {
        "name": CONVERSATION_HEADER,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": "conv-<id>: the conversation (without it: one whose recorded turns match, or a new one)",
    },
]


def _chat_request(what: str, **read: object) -> dict[str, object]:
    """The OpenAPI of a proxied chat request. Its body is the chat API's own and goes to the model as it is (the
    model checks it); what brain reads of it, and so checks, is the messages (one a user message with text) and
    ``read``."""
    message = {"type": "object", "required": ["role"], "properties": {"role": {"type": "string"}}}
    text = {"type": "string", "pattern": "\\S"}
    part = {"type": "object", "required": ["type", "text"], "properties": {"type": {"const": "text"}, "text": text}}
    asked = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"role": {"const": "user"}, "content": {"anyOf": [text, {"type": "array", "contains": part}]}},
    }
    body = {
        "type": "object",
        "description": what,
        "required": ["messages"],
        "properties": {"messages": {"type": "array", "minItems": 1, "items": message, "contains": asked}, **read},
        "additionalProperties": True,
    }
    return {
        "parameters": _HEADERS,
        "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
    }


def _answers(stream_type: str) -> dict[int | str, dict[str, object]]:
    """A proxied chat's responses: the model's answer (JSON, or a stream of ``stream_type``) and brain's errors."""
    answer = {"description": "the chat model's answer, as it sent it"}
    content = {"application/json": {"schema": {"type": "object"}}, stream_type: {"schema": {"type": "string"}}}
    return {**_PROXY_RESPONSES, 200: {**answer, "content": content}}


def upstream_of(request: Request) -> Upstream:
    upstream: Upstream | None = getattr(request.app.state, "upstream", None)
    if upstream is None:
        raise ConfigError(
            "the chat proxy is off: set BRAIN_CHAT_UPSTREAM to the base URL of an OpenAI-compatible API "
            "(e.g. http://127.0.0.1:11434/v1 for Ollama) and restart `brain serve`"
        )
    return upstream


def pending_of(request: Request) -> PendingRecords:
    pending = getattr(request.app.state, "pending_records", None)
    if pending is None:
        pending = request.app.state.pending_records = PendingRecords()
    return pending


async def _json_object(request: Request) -> dict[str, object]:
    try:
        body = await request.json()
    except json.JSONDecodeError as exc:  # the body is read here, not by a model: say what FastAPI would
        raise ValidationError.of("body", f"body is not valid JSON: {exc.msg}") from None
    if not isinstance(body, dict):
        raise ValidationError.of("body", "the body must be a JSON object (a chat request)")
    return body


async def _plan(request: Request, body: Mapping[str, object], user: object = None) -> ChatPlan:
    messages = checked_messages(body)
    entity = acting_of(request, requested_entity(request.headers.get(ENTITY_HEADER), user))
    upstream = upstream_of(request)
    pending = pending_of(request)
    ops = ops_of(request)
    header = request.headers.get(CONVERSATION_HEADER)
    conversation_id = None
    if header and header.strip():
        conversation_id = header_conversation(header)
        # whose conversation it is comes first: a wait is only ever on the entity's own
        if entity is not None and not (
            is_own_form(conversation_id, entity) or pending.is_pending(conversation_id, entity)
        ):
            if not await run_in_threadpool(is_own_conversation, ops, conversation_id, entity):
                conversation_id = own_conversation_id(conversation_id, entity)
        await pending.wait(conversation_id, entity, upstream.timeout)
    else:
        previous = previous_user_text(messages)
        if previous is not None:
            await pending.wait_for_message(previous, entity, upstream.timeout)
    settings = request.app.state.settings
    return await run_in_threadpool(
        plan_chat,
        ops,
        messages,
        entity=entity,
        conversation_id=conversation_id,
        budget_chars=settings.context_max_chars,
    )


def _recorder(
    request: Request, plan: ChatPlan, answer: Callable[[], str | None], stream: AsyncGenerator[bytes] | None = None
) -> BackgroundTask:
    """Records the exchange once the response is sent, if ``answer()`` then gives the whole answer's text.
    ``stream`` (the response's body) is closed first: a client gone midway leaves it suspended, and closing it
    closes the upstream request."""
    ops = ops_of(request)
    pending = pending_of(request)
    started = pending.start(plan.conversation_id, plan.entity, plan.user_text)

    async def record() -> None:
        try:
            if stream is not None:
                await stream.aclose()
            text = answer()
            if text is None:
                return
            await run_in_threadpool(
                ops.conversations.record,
                plan.conversation_id,
                plan.user_text,
                recorded_text(text),
                entity=plan.entity,
                metadata={SHOWN_KEY: plan.shown} if plan.shown else None,
            )
        except BrainError as exc:  # the client has its answer; the exchange's loss is the operator's to see
            log.warning("the exchange of %s was not recorded: %s", plan.conversation_id, exc)
        finally:
            pending.finish(plan.conversation_id, started)

    return BackgroundTask(record)


def _recorded_headers(text: str | None) -> dict[str, str]:
    if text is None or len(text) <= RECORDED_CHARS:
        return {}
    return {RECORDED_HEADER: f"the first {RECORDED_CHARS} of {len(text)} characters of the answer"}


def _refused(status: int) -> UpstreamError | None:
    """The upstream refusing the proxy's own key, as brain's error: the client's credentials are not in question,
    and the upstream's words about the key are not the client's to see."""
    if status not in (401, 403):
        return None
    log.warning("the chat model refused the proxy's request with %d: check BRAIN_CHAT_UPSTREAM_KEY", status)
    return UpstreamRefused(
        f"the chat model refused the proxy's credentials ({status}): the operator's BRAIN_CHAT_UPSTREAM_KEY "
        "needs to be set or changed; nothing was recorded"
    )


def _upstream_failed(exc: UpstreamError, conversation_id: str | None = None) -> Response:
    headers = {CONVERSATION_HEADER: conversation_id} if conversation_id else None
    return brain_error_response(exc, headers=headers)


async def _open_stream(upstream: Upstream, path: str, payload: bytes) -> tuple[AsyncExitStack, Any]:
    stack = AsyncExitStack()
    try:
        response = await stack.enter_async_context(upstream.open("POST", path, payload))
    except BaseException:
        await stack.aclose()
        raise
    return stack, response


async def _open_answer(
    upstream: Upstream, plan: ChatPlan, payload: bytes, refusal: Callable[[Any, bytes], Response]
) -> tuple[AsyncExitStack, Any] | Response:
    """The upstream's streamed answer, open; or, when it failed or answered an error, the response the client
    gets for that (``refusal`` words an upstream error of its own, from its response and body, as passed on)."""
    try:
        stack, response = await _open_stream(upstream, "chat/completions", payload)
    except UpstreamError as exc:
        return _upstream_failed(exc, plan.conversation_id)
    if response.status_code < 400:
        return stack, response
    try:
        async with stack:
            content = await upstream.read(response)
    except UpstreamError as exc:
        return _upstream_failed(exc, plan.conversation_id)
    refused = _refused(response.status_code)
    if refused is not None:
        return _upstream_failed(refused, plan.conversation_id)
    return refusal(response, content)


def add_error_handler(app: FastAPI) -> None:
    """An upstream's failure, answered as the proxy's routes document it."""

    async def upstream_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UpstreamError)  # registered for that class alone
        return _upstream_failed(exc)

    app.add_exception_handler(UpstreamError, upstream_error)


def add_routes(router: APIRouter) -> None:
    @router.get("/v1/models", tags=["chat proxy"], operation_id="models", responses=documented_responses(502, 503, 504))
    async def models(request: Request) -> Response:
        """The upstream's models, as it lists them."""
        response, content = await upstream_of(request).send("GET", "models")
        refused = _refused(response.status_code)
        if refused is not None:
            raise refused
        return Response(content, status_code=response.status_code, headers=passed_headers(response))

    @router.post(
        "/v1/chat/completions",
        tags=["chat proxy"],
        operation_id="chat_completions",
        responses=_answers("text/event-stream"),
        openapi_extra=_chat_request("OpenAI's chat completions request", user={"type": ["string", "null"]}),
    )
    async def chat_completions(request: Request) -> Response:
        """OpenAI's chat completions (plain, or `stream: true` as server-sent events), answered by the upstream
        with brain's context for the last user message as a system message. The entity is the token's, or
        the `X-Brain-Entity` header's, or the body's `user`; the conversation is `X-Brain-Conversation`'s
        (every answer carries it). The exchange is recorded once the whole answer is out."""
        body = await _json_object(request)
        plan = await _plan(request, body, body.get("user"))
        upstream = upstream_of(request)
        payload = orjson.dumps({**body, "messages": plan.messages})
        if body.get("stream") is True:
            return await _stream_openai(request, upstream, plan, payload)
        try:
            response, content = await upstream.send("POST", "chat/completions", payload)
        except UpstreamError as exc:
            return _upstream_failed(exc, plan.conversation_id)
        refused = _refused(response.status_code)
        if refused is not None:
            return _upstream_failed(refused, plan.conversation_id)
        headers = {**passed_headers(response), CONVERSATION_HEADER: plan.conversation_id}
        if response.status_code >= 400:
            return Response(content, status_code=response.status_code, headers=headers)
        text = completion_text(content)
        return Response(
            content,
            status_code=response.status_code,
            headers={**headers, **_recorded_headers(text)},
            background=_recorder(request, plan, lambda: text),
        )

    @router.post(
        "/api/chat",
        tags=["chat proxy"],
        operation_id="ollama_chat",
        responses=_answers("application/x-ndjson"),
        openapi_extra=_chat_request("Ollama's chat request", options={"type": ["object", "null"]}),
    )
    async def ollama_chat(request: Request) -> Response:
        """Ollama's chat (plain, or NDJSON lines when `stream` is true or left out, as Ollama does), translated
        to and from the OpenAI-compatible upstream, with brain's context and recording as for
        `/v1/chat/completions`. The entity is the token's or the `X-Brain-Entity` header's."""
        body = await _json_object(request)
        translated = ollama_format.openai_request(body)
        plan = await _plan(request, translated)
        upstream = upstream_of(request)
        stream = body.get("stream", True) is not False
        payload = orjson.dumps({**translated, "messages": plan.messages, "stream": stream})
        if stream:
            return await _stream_ollama(request, upstream, plan, payload, str(body.get("model", "")))
        try:
            response, content = await upstream.send("POST", "chat/completions", payload)
        except UpstreamError as exc:
            return _upstream_failed(exc, plan.conversation_id)
        refused = _refused(response.status_code)
        if refused is not None:
            return _upstream_failed(refused, plan.conversation_id)
        headers = {CONVERSATION_HEADER: plan.conversation_id}
        if response.status_code >= 400:
            return ollama_format.error_response(response.status_code, content, headers)
        try:
            answer = ollama_format.ollama_answer(content, str(body.get("model", "")))
        except (ValueError, TypeError, AttributeError, IndexError):
            log.warning("the chat model at %s answered something not a chat completion", upstream.base_url)
            failed = UpstreamUnreachable("the chat model (BRAIN_CHAT_UPSTREAM) answered what is not a chat completion")
            return _upstream_failed(failed, plan.conversation_id)
        text = completion_text(content)
        return Response(
            orjson.dumps(answer),
            media_type="application/json",
            headers={**headers, **_recorded_headers(text)},
            background=_recorder(request, plan, lambda: text),
        )


async def _stream_openai(request: Request, upstream: Upstream, plan: ChatPlan, payload: bytes) -> Response:
    conversation = {CONVERSATION_HEADER: plan.conversation_id}
    opened = await _open_answer(
        upstream,
        plan,
        payload,
        lambda failed, content: Response(
            content, status_code=failed.status_code, headers={**passed_headers(failed), **conversation}
        ),
    )
    if isinstance(opened, Response):
        return opened
    stack, response = opened
    headers = {**passed_headers(response), **conversation}
    answer = StreamedAnswer()
    finished = False

    async def body() -> AsyncGenerator[bytes]:
        nonlocal finished
        async with stack:
            try:
                async for chunk in upstream.chunks(response):
                    answer.feed(chunk)
                    yield chunk  # resumed only once the server has sent it
            except UpstreamError as exc:
                yield _sse_error(exc)
                return
            finished = answer.done

    stream = body()
    return StreamingResponse(
        stream,
        status_code=response.status_code,
        headers=headers,
        background=_recorder(request, plan, lambda: answer.text if finished and answer.text.strip() else None, stream),
    )


async def _stream_ollama(request: Request, upstream: Upstream, plan: ChatPlan, payload: bytes, model: str) -> Response:
    headers = {CONVERSATION_HEADER: plan.conversation_id}
    opened = await _open_answer(
        upstream,
        plan,
        payload,
        lambda failed, content: ollama_format.error_response(failed.status_code, content, headers),
    )
    if isinstance(opened, Response):
        return opened
    stack, response = opened
    lines = ollama_format.StreamTranslator(model)
    finished = False

    async def body() -> AsyncGenerator[bytes]:
        nonlocal finished
        async with stack:
            try:
                async for chunk in upstream.chunks(response):
                    out = lines.feed(chunk)
                    if out:
                        yield out
            except UpstreamError as exc:
                yield orjson.dumps({"error": str(exc)}) + b"\n"
                return
            tail = lines.finish()
            if tail:
                yield tail
            finished = lines.answer.done

    stream = body()
    return StreamingResponse(
        stream,
        media_type="application/x-ndjson",
        headers=headers,
        background=_recorder(
            request, plan, lambda: lines.answer.text if finished and lines.answer.text.strip() else None, stream
        ),
    )


def _sse_error(exc: UpstreamError) -> bytes:
    kind = wire_of(exc).kind
    return b"data: " + orjson.dumps({"error": {"message": str(exc), "type": kind}}) + b"\n\n"
