"""The official OpenAI client, opened the one way every OpenAI-compatible provider (embedder, summariser,
extractor) opens it, the one ladder from what it raises to brain's errors, and the bounded read of an answer.

"OpenAI-compatible" is any server with OpenAI's ``/v1`` routes: llama.cpp's server, vLLM, LM Studio, Ollama's
``/v1``, hosted APIs. The key (``BRAIN_OPENAI_API_KEY``) is a secret: it is sent as the bearer token and nowhere
else, and a server's error text that quotes it is scrubbed before it reaches a message or a log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import openai
import pydantic

from brain.model.errors import BrainError
from brain.model.provider_names import DEFAULT_SUMMARY_MODEL, model_name_problem

#: what replaces the key wherever a server's message repeats it
_SCRUBBED = "[BRAIN_OPENAI_API_KEY]"
#: the read size of a bounded answer
_CHUNK = 65536
#: the longest a health probe of the server waits (seconds)
PING_TIMEOUT = 3.0


def secret_text(key: pydantic.SecretStr | str | None) -> str | None:
    """The key's text (None or blank: no key)."""
    if isinstance(key, pydantic.SecretStr):
        key = key.get_secret_value()
    return key.strip() or None if isinstance(key, str) else None


def open_openai_client(base_url: str, key: str | None, timeout: float) -> openai.OpenAI:
    """The official client for ``base_url``: no retries of its own (the callers retry with back-off and
    deadlines of their own), and nothing taken from the environment. With no key no Authorization header is
    sent: a local server needs none, and an ``OPENAI_API_KEY`` meant for another service must never reach this
    one."""
    hooks = {"request": [_without_env_headers] if key else [_without_env_headers, _without_authorization]}
    return openai.OpenAI(
        base_url=base_url,
        api_key=key or "unused",  # the client wants one; with no key the header is taken off each request
        organization="",
        project="",
        timeout=timeout,
        max_retries=0,
        # the client's own HTTP library (httpx, or httpx2 in openai 3), with the hooks that take headers off
        http_client=openai.DefaultHttpxClient(timeout=timeout, event_hooks=hooks),
    )


def _without_authorization(request: Any) -> None:
    request.headers.pop("Authorization", None)


def _without_env_headers(request: Any) -> None:
    # organisation and project are OpenAI's own; left blank above so none comes from the environment
    for name in ("OpenAI-Organization", "OpenAI-Project"):
        if not request.headers.get(name):
            request.headers.pop(name, None)


def scrub(text: str, key: str | None) -> str:
    """``text`` with every occurrence of ``key`` replaced, and no longer than a message needs."""
    if key:
        text = text.replace(key, _SCRUBBED)
    text = " ".join(text.split())
    return text if len(text) <= 500 else text[:500] + " …"


class AnswerTooLong(Exception):
    """The server sent more than the caller's bound: the answer was not read further."""

    def __init__(self, limit: int):
        super().__init__(f"the answer was longer than {limit:,} bytes")
        self.limit = limit


@contextmanager
def openai_errors(
    base_url: str,
    model: str,
    key: str | None,
    *,
    unavailable: type[BrainError],
    error: type[BrainError],
    timed_out: str,
    doing: str,
    model_setting: str,
    route: str,
) -> Iterator[None]:
    """Run one call of the OpenAI client to ``route`` of ``base_url`` and turn its failures into
    ``unavailable`` (the server cannot serve now: not running, too slow, the model not served, the key refused,
    rate limited, a server failure) or ``error`` (it answered, but not with something usable), each message
    saying what to do and none of them holding the key. ``timed_out`` is the timeout's message; ``doing``
    completes "refused to ..."; ``model_setting`` names the setting that names ``model``."""
    where = f"the OpenAI-compatible server at {base_url}"
    try:
        yield
    except openai.APITimeoutError:
        raise unavailable(timed_out) from None
    except openai.APIConnectionError as exc:
        cause = exc.__cause__
        # the client's HTTP library may be httpx or httpx2: its connection failure is known by name
        if cause is None or type(cause).__name__ == "ConnectError":
            raise unavailable(
                f"cannot reach {where}: start it, or set BRAIN_OPENAI_BASE_URL to the address it serves /v1 on"
            ) from None
        raise unavailable(f"the connection to {where} failed: {scrub(str(cause), key)}") from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise unavailable(
            f"{where} refused the key ({exc.status_code}): set BRAIN_OPENAI_API_KEY to a key it accepts"
            f"{'' if key else ' (none is set)'}"
        ) from None
    except openai.NotFoundError as exc:
        raise unavailable(
            f"{where} does not serve {model!r} on {route} ({scrub(_message(exc), key)}): set {model_setting} to "
            "a model its /v1/models lists"
        ) from None
    except openai.RateLimitError:
        raise unavailable(f"{where} is rate limiting requests (429): wait, or lower the load") from None
    except openai.APIStatusError as exc:
        said = scrub(_message(exc), key)
        if exc.status_code >= 500:
            failed = unavailable(f"{where} failed ({exc.status_code}): {said}")
        else:
            failed = error(f"{where} refused to {doing} with {model!r} ({exc.status_code}): {said}")
        # what the caller may act on: a server that does not know a field of the request says so in its words
        failed.upstream_status = exc.status_code  # type: ignore[attr-defined]
        failed.upstream_message = said  # type: ignore[attr-defined]
        raise failed from None
    except AnswerTooLong as exc:
        cut = error(f"{where} sent an answer longer than {exc.limit:,} bytes to {doing}: it was not read")
        cut.too_long = True  # type: ignore[attr-defined]  # an outcome of its own (formation counts it)
        raise cut from None
    except (ValueError, pydantic.ValidationError) as exc:  # a 200 whose body is not JSON, or not of the shape
        raise error(
            f"{where} answered {route} with something that is not an OpenAI response: {scrub(str(exc), key)}"
        ) from None


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def bounded_json(response: Any, limit: int, deadline: float) -> bytes:
    """The body of a streamed ``response`` (the client's ``with_streaming_response``), read up to ``limit``
    bytes and until the monotonic ``deadline``; past either the read stops (:class:`AnswerTooLong`,
    :class:`openai.APITimeoutError`): a server that sends without end holds neither memory nor the caller."""
    body = bytearray()
    for chunk in response.iter_bytes(_CHUNK):
        body += chunk
        if len(body) > limit:
            raise AnswerTooLong(limit)
        if time.monotonic() > deadline:
            raise openai.APITimeoutError(request=response.http_request)
    return bytes(body)


class SharedClient:
    """The client of one provider, opened on first use and then kept (construction touches no network)."""

    def __init__(self, base_url: str, key: str | None, timeout: float):
        self.base_url, self._key, self._timeout = base_url, key, timeout
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    def get(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                self._client = open_openai_client(self.base_url, self._key, self._timeout)
            return self._client


@dataclass(frozen=True)
class ChatAnswer:
    """One chat completion: the message text, the tokens it read and wrote (``usage``; 0 when the server
    gives none), its wall time, and why it stopped (``length``: at the token limit, so cut)."""

    content: str
    prompt_tokens: int
    eval_tokens: int
    seconds: float
    finish_reason: str | None


class OpenAIChatModel:
    """A chat model on one OpenAI-compatible server (``name`` is ``openai/<model>``), its client opened on
    first use and kept; construction touches no network. Subclasses name their two errors (the model cannot
    serve now / answered something unusable) and the setting that names the model."""

    unavailable: type[BrainError] = BrainError
    error: type[BrainError] = BrainError
    #: the setting that names the model, for the messages
    model_setting = ""
    #: the longest answer read (bytes): far more than any summary or set of facts
    max_answer_bytes = 1_000_000

    def __init__(
        self,
        model: str = DEFAULT_SUMMARY_MODEL,
        *,
        base_url: str | None,
        api_key: pydantic.SecretStr | str | None = None,
        timeout: float = 120.0,
    ):
        if model_name_problem(model):
            raise self.error(
                f"invalid model name {model!r}: set {self.model_setting} to a model name the server lists, such as "
                f"{DEFAULT_SUMMARY_MODEL}"
            )
        if not base_url:
            raise self.unavailable(
                "no OpenAI-compatible server is configured: set BRAIN_OPENAI_BASE_URL, e.g. http://127.0.0.1:8080/v1"
            )
        self.model = model
        self.name = f"openai/{model}"
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._key = secret_text(api_key)
        self._client = SharedClient(self.base_url, self._key, timeout)

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def errors(self, timed_out: str, doing: str, route: str = "/chat/completions") -> Any:
        """:func:`openai_errors` for this model."""
        return openai_errors(
            self.base_url,
            self.model,
            self._key,
            unavailable=self.unavailable,
            error=self.error,
            timed_out=timed_out,
            doing=doing,
            model_setting=self.model_setting,
            route=route,
        )

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        timeout: float | None,
        max_tokens: int,
        timed_out: str,
        doing: str,
        response_format: Mapping[str, object] | None = None,
    ) -> ChatAnswer:
        """One chat completion at temperature 0, within ``timeout`` seconds (at most the model's own), its body
        read up to :attr:`max_answer_bytes`; failures as :meth:`errors` says."""
        limit = self.timeout if timeout is None else min(float(timeout), self.timeout)
        started = time.monotonic()
        body: dict[str, Any] = {"temperature": 0, "max_tokens": max_tokens}
        if response_format is not None:
            body["response_format"] = dict(response_format)
        client = self._client.get()
        with self.errors(timed_out, doing):
            with client.chat.completions.with_streaming_response.create(
                model=self.model,
                messages=[dict(m) for m in messages],  # type: ignore[misc]
                timeout=limit,
                **body,
            ) as response:
                raw = bounded_json(response, self.max_answer_bytes, started + limit)
            completion = openai.types.chat.ChatCompletion.model_validate_json(raw)
        seconds = time.monotonic() - started
        if not completion.choices:
            raise self.error(f"{self.base_url} answered {self.model!r} with no choices")
        choice = completion.choices[0]
        content = choice.message.content if choice.message is not None else None
        if not isinstance(content, str):
            raise self.error(f"the chat response of {self.model!r} at {self.base_url} has no message text")
        usage = completion.usage
        return ChatAnswer(
            content=content,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            eval_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            seconds=seconds,
            finish_reason=choice.finish_reason,
        )

    def ping(self, timeout: float = PING_TIMEOUT) -> None:
        """One short request to ``/models``: is the server up, does it take the key, and does it list the
        model? Every failure raises ``unavailable``."""
        limit = min(self.timeout, timeout)
        where = f"the OpenAI-compatible server at {self.base_url}"
        with openai_errors(
            self.base_url,
            self.model,
            self._key,
            unavailable=self.unavailable,
            error=self.unavailable,
            timed_out=f"{where} timed out: no answer to /models within {limit:.3g} s",
            doing="list its models",
            model_setting=self.model_setting,
            route="/models",
        ):
            client = self._client.get()
            with client.models.with_streaming_response.list(timeout=limit) as response:
                raw = bounded_json(response, self.max_answer_bytes, time.monotonic() + limit)
            listed = _ModelList.model_validate_json(raw)
        names = {m.id for m in listed.data}
        if names and self.model not in names:
            shown = ", ".join(sorted(names)[:10]) + (" …" if len(names) > 10 else "")
            raise self.unavailable(
                f"{where} does not list {self.model!r} (it lists {shown}): set {self.model_setting} to one of them"
            )


class _Listed(pydantic.BaseModel):
    id: str


class _ModelList(pydantic.BaseModel):
    data: list[_Listed] = pydantic.Field(default_factory=list)
