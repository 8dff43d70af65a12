"""Memory formation's model on any OpenAI-compatible server (``BRAIN_SUMMARIZER=openai``), its answer
constrained to the formation schema wherever the server can.

The request asks for ``response_format`` ``json_schema`` (the schema, strict), which vLLM, LM Studio, Ollama's
``/v1`` and OpenAI's API turn into constrained decoding. A server that refuses that form (a 400 or 422, or a 500
naming ``response_format``) is asked again at once with the next of :data:`FORMATS`: ``json_object`` with the
schema beside it (llama-cpp-python's server constrains its grammar to it), plain ``json_object`` (valid JSON,
the shape left to the prompt), then no ``response_format``; the form that worked is kept for the next calls. The
answer is checked by :mod:`brain.rules.formation` either way: what the constraint does not catch, the rules do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from brain.model.errors import ExtractorError, ExtractorUnavailable
from brain.providers.extractors.base import ModelAnswer
from brain.providers.openai_client import OpenAIChatModel

#: tokens the model may write: ample for the facts of a window, and a stop for a model that loops
MAX_TOKENS = 2048
#: the ways of asking for JSON, most constrained first: OpenAI's schema form (OpenAI, vLLM, LM Studio, Ollama's
#: /v1, llama.cpp's own server); JSON with the schema beside it (llama-cpp-python's server, which constrains its
#: grammar to it); any JSON; nothing
FORMATS = ("json_schema", "json_object_schema", "json_object", "none")


def response_format(kind: str, schema: Mapping[str, object]) -> dict[str, object] | None:
    """The ``response_format`` of the request for ``kind`` (one of :data:`FORMATS`)."""
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "facts", "schema": dict(schema), "strict": True}}
    if kind == "json_object_schema":
        return {"type": "json_object", "schema": dict(schema)}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


class OpenAIExtractor(OpenAIChatModel):
    """A chat model on an OpenAI-compatible server; ``name`` is ``openai/<model>``. Construction touches no
    network. ``format`` is the way of asking for JSON this server took last (see the module)."""

    unavailable = ExtractorUnavailable
    error = ExtractorError
    model_setting = "BRAIN_FORMATION_MODEL"
    #: set on the instance once a call finds the form this server takes (one assignment: no lock needed)
    format: str = FORMATS[0]

    def ask(
        self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, object], *, timeout: float | None = None
    ) -> ModelAnswer:
        """The model's answer to ``messages`` in the shape of ``schema``; ``timeout`` (seconds, at most the
        extractor's own) bounds each request."""
        if not messages:
            raise ExtractorError("nothing to ask: no messages given")
        timed_out = (
            f"{self.base_url} timed out while forming memories with {self.model!r}; raise BRAIN_FORMATION_TIMEOUT "
            "or use a smaller BRAIN_FORMATION_MODEL"
        )
        kind = self.format
        while True:
            try:
                answer = self.chat(
                    messages,
                    timeout=timeout,
                    max_tokens=MAX_TOKENS,
                    timed_out=timed_out,
                    doing="form memories",
                    response_format=response_format(kind, schema),
                )
            except ExtractorError as exc:  # ExtractorUnavailable too: a server may refuse a field with a 500
                weaker = _weaker(kind)
                if weaker is None or not _refused_format(exc):
                    raise
                kind = weaker
                continue
            self.format = kind
            return ModelAnswer(
                content=answer.content,
                prompt_tokens=answer.prompt_tokens,
                eval_tokens=answer.eval_tokens,
                seconds=answer.seconds,
                truncated=answer.finish_reason == "length",
            )


def _weaker(kind: str) -> str | None:
    at = FORMATS.index(kind)
    return FORMATS[at + 1] if at + 1 < len(FORMATS) else None


def _refused_format(exc: ExtractorError) -> bool:
    """Whether the server refused the request itself: a 400 or 422, or a 500 whose message names
    ``response_format`` (llama-cpp-python's server answers a form it does not know that way). The form of
    ``response_format`` is the one part of the request a server may not know."""
    status = getattr(exc, "upstream_status", None)
    if status in (400, 422):
        return True
    return status == 500 and "response_format" in str(getattr(exc, "upstream_message", ""))
