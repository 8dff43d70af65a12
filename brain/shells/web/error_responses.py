"""Every error the API answers is JSON ``{"error": kind, "message": text, "problems": [...]}``: brain's
named exceptions by the table of :mod:`brain.ops.error_table` (which the served client reads back), and
pydantic's validation errors reworded in brain's terms (the field as the caller sent it, never a model's class
name)."""

from __future__ import annotations

import reprlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from brain.model.errors import BrainError, Problem, joined
from brain.ops.error_table import HTTP_KINDS, body_of, wire_of

ONE_DOC, DOC_BATCH = "one-document", "document-batch"  # the API's body union tags: never field names


def error_response(
    status: int,
    kind: str,
    message: str,
    problems: list[dict[str, object]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, object] = {"error": kind, "message": message}
    if problems:
        body["problems"] = problems
    return JSONResponse(status_code=status, content=body, headers=headers)


_short = reprlib.Repr()  # inputs are echoed in messages: short, and safe however deep they nest
_short.maxstring, _short.maxother, _short.maxlevel, _short.maxlist, _short.maxdict = 60, 60, 2, 4, 4


def _field_of(loc: tuple[object, ...]) -> str:
    return (
        ".".join(str(p) for p in loc[1:] if p not in (ONE_DOC, DOC_BATCH))
        if loc[:1] in (("body",), ("query",), ("path",))
        else ".".join(str(p) for p in loc)
    )


def _problem(err: dict[str, Any]) -> Problem:
    """One pydantic/FastAPI error as a Problem in brain's words: the field as the caller sent it, never a
    model's class name."""
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    field = _field_of(tuple(err.get("loc", ()))) or "body"
    got = _short.repr(err.get("input"))
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if kind == "json_invalid":
        return Problem("body", f"body is not valid JSON: {ctx.get('error', msg)}")
    if kind == "missing":
        message = "a JSON body is required" if field == "body" else f"{field} is required"
    elif kind == "extra_forbidden":
        message = f"{field} is not a field of this request"
    elif kind in ("model_attributes_type", "model_type", "dict_type"):
        message = (
            f"{field} must be a JSON object sent with 'Content-Type: application/json'"
            if isinstance(err.get("input"), (bytes, bytearray))
            else f"{field} must be a JSON object, got {got}"
        )
    elif kind == "literal_error":
        message = f"{field} must be one of {ctx.get('expected')}, got {got}"
    elif kind in ("int_type", "int_parsing", "int_from_float"):
        message = f"{field} must be an integer, got {got}"
    elif kind in ("string_type", "bool_type", "list_type", "float_type"):
        message = f"{field}: {msg.lower().removeprefix('input ')}, got {got}"
    elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        message = f"{field}: {msg.lower().removeprefix('input ')}, got {got}"
    elif kind == "repeated":
        message = f"{field} {msg}"
    elif kind == "value_error" and msg.startswith(field.split(".")[-1]):
        message = msg  # the library's own sentence names the field
    elif kind == "value_error":
        message = f"{field} {msg}"
    else:
        message = f"{field}: {msg}"
    return Problem(field, message)


def brain_error_response(exc: BrainError, headers: dict[str, str] | None = None) -> JSONResponse:
    """``exc`` as the API sends it: the status and kind of :mod:`brain.ops.error_table`."""
    return JSONResponse(status_code=wire_of(exc).status, content=body_of(exc), headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [_problem(err) for err in exc.errors()]
        # a request's problems are located by their field path alone (it holds any batch index): no item
        return error_response(
            422, "validation_error", joined(problems), [{"field": p.field, "message": p.message} for p in problems]
        )

    @app.exception_handler(BrainError)
    async def _brain_error(request: Request, exc: BrainError) -> JSONResponse:
        return brain_error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # Starlette names the methods of one route; a path may have several
            headers = {**(headers or {}), "Allow": ", ".join(_methods_of(request.app, request.url.path))}
        return error_response(
            exc.status_code, HTTP_KINDS.get(exc.status_code, "error"), str(exc.detail), headers=headers
        )


def _methods_of(app: FastAPI, path: str) -> list[str]:
    """The methods of the documented path ``path`` is: a literal path (``/v1/memories/search``) before
    a template it also matches (``/v1/memories/{doc_id}``)."""
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    matching = [r for r in routes if r.path == path] or [r for r in routes if r.path_regex.match(path)]
    return sorted({method for route in matching for method in route.methods or ()})
