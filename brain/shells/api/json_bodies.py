"""Reading JSON bodies and query strings strictly: orjson with brain's error messages, a depth limit,
and single-valued query parameters refused when repeated."""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.responses import Response

#: JSON nesting deeper than this is refused before validation (bodies need 5 levels)
MAX_JSON_DEPTH = 32


def _too_deep(value: object, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json_body(body: bytes) -> object:
    """The body as JSON, or :class:`json.JSONDecodeError` saying what is wrong and where: malformed JSON,
    invalid UTF-8, a number too large for a double (e.g. 5,000 digits), nesting deeper than
    :data:`MAX_JSON_DEPTH`. FastAPI turns the error into a 422 naming the body."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise json.JSONDecodeError(f"{exc.msg} at line {exc.lineno}, column {exc.colno}", exc.doc, exc.pos) from None
    if _too_deep(value, MAX_JSON_DEPTH):
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", "", 0)
    return value


class _JsonRequest(Request):
    async def json(self) -> object:
        if not hasattr(self, "_json"):
            self._json = parse_json_body(await self.body())
        return self._json


def _query_params(dependant: Dependant) -> list[Any]:
    """A route's query parameters, those of its dependencies too (a shared set of filters)."""
    return [*dependant.query_params, *(p for d in dependant.dependencies for p in _query_params(d))]


class JsonRoute(APIRoute):
    """Routes whose JSON bodies are read by :func:`parse_json_body`, and whose single-valued query
    parameters are refused when given twice (``?entity=a&entity=b`` is ambiguous, not "the last one")."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        single = {
            field.alias
            for field in _query_params(self.dependant)
            if typing.get_origin(field.field_info.annotation) not in (list, tuple, set, frozenset)
        }

        async def route(request: Request) -> Response:
            names = [name for name, _ in request.query_params.multi_items()]
            repeated = sorted({name for name in names if name in single and names.count(name) > 1})
            if repeated:
                raise RequestValidationError(
                    [
                        {
                            "type": "repeated",
                            "loc": ("query", name),
                            "input": None,
                            "msg": "is given more than once; send it once",
                        }
                        for name in repeated
                    ]
                )
            return await handler(_JsonRequest(request.scope, request.receive))

        return route
