"""The HTTP API: a thin FastAPI shell over one :class:`~brain.core.Brain` (its store, chat layer and
specialists) and :class:`~brain.access.Access` (memories and conversations under the caller's identity).

``brain serve`` runs :func:`create_app` under uvicorn in one process: the embedded Chroma store is
single-process (threads are fine, and FastAPI runs the handlers below in its thread pool). More
processes need a Chroma server (``BRAIN_CHROMA_URL``). For uvicorn itself,
``uvicorn --factory brain.api:create_app`` (or ``brain.api:app``, built from the settings when first
asked for, so that importing this module never reads them). The specialists are registered when the
server starts, so a request never writes them.

Every request passes :class:`Authenticate` first (bearer token -> :class:`~brain.access.Caller`, see
:mod:`brain.auth`), then :class:`BodyLimit`, then routing and body parsing, so an unauthenticated
caller gets 401 and learns nothing else. Errors are JSON ``{"error": kind, "message": text,
"problems": [...]}``: invalid input 422 naming the field (malformed JSON too, with line and column),
missing or wrong token 401, a token bound to another entity 403, unknown id 404, body over
``BRAIN_API_MAX_BODY_BYTES`` 413, store or embedder unavailable 503 with the reason. Bad input never
gives a 500. The OpenAPI schema documents each of them and the constraints the server enforces.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import reprlib
import typing
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import orjson
from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, WithJsonSchema
from starlette.exceptions import HTTPException as StarletteHTTPException

from brain import __version__
from brain.access import Access, Caller, check_entity_name
from brain.auth import TokenTable
from brain.config import Settings
from brain.core import Brain
from brain.core import open as open_brain
from brain.errors import (
    BrainError,
    ConfigError,
    EmbedderError,
    Forbidden,
    NotFound,
    Problem,
    StoreUnavailable,
    ValidationError,
    joined,
)
from brain.schemas import (
    CONVERSATION_ID_MAX_LENGTH,
    CONVERSATION_ID_PATTERN,
    DOC_TYPES,
    ENTITY_MAX_LENGTH,
    ENTITY_PATTERN,
    check_conversation_id,
    check_scope,
    get_all_schemas,
    schema_info,
)
from brain.store import RagStore

log = logging.getLogger(__name__)

#: JSON nesting deeper than this is refused before validation (bodies need 5 levels)
MAX_JSON_DEPTH = 32
#: the largest ``offset`` a listing takes (Chroma counts in 32 bits)
MAX_OFFSET = 2**31 - 1


# ---- field types: each checked by the library's rule, documented with the constraint it enforces ----

def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("is empty or only spaces" if value else "is empty")
    return value


def _entity(value: str) -> str:
    return check_entity_name(value)  # wrapped: pydantic would pass its ValidationInfo as the field name


Text = Annotated[str, AfterValidator(_non_blank), WithJsonSchema({"type": "string", "minLength": 1, "pattern": r"\S"})]
Entity = Annotated[str, AfterValidator(_entity), WithJsonSchema({
    "type": "string", "minLength": 1, "maxLength": ENTITY_MAX_LENGTH, "pattern": ENTITY_PATTERN,
    "description": "an entity name: 1 to 128 characters, no control characters, no space at either end"})]
ConversationId = Annotated[str, AfterValidator(check_conversation_id), WithJsonSchema({
    "type": "string", "pattern": CONVERSATION_ID_PATTERN, "maxLength": CONVERSATION_ID_MAX_LENGTH, "description": "conv-<id>"})]
Scope = Annotated[str, AfterValidator(check_scope), WithJsonSchema({
    "type": "string", "pattern": "^(global|entity:" + ENTITY_PATTERN[1:-1] + ")$",
    "description": "'global' or 'entity:<name>'"})]
DocTypeName = Literal[DOC_TYPES]  # type: ignore[valid-type]
Importance = Annotated[int, Field(ge=1, le=5, description="1 (trivia) .. 5 (essential)")]
Metadata = dict[str, Any]


# ---- request bodies ------------------------------------------------------------------------------

class _Body(BaseModel):
    # strict: "importance": true or "5" is refused, not read as 1 or 5
    model_config = ConfigDict(extra="forbid", strict=True)


class ContextRequest(_Body):
    user_message: Text = Field(description="the user's new message")
    conversation_id: ConversationId | None = Field(None, description="the caller's conversation; none: a new one")
    entity: Entity | None = Field(None, description="whose memories may be used (and global ones); a bound token's own")


class ExchangeRequest(_Body):
    user_text: Text
    assistant_text: Text
    conversation_id: ConversationId | None = Field(None, description="generated when absent")
    entity: Entity | None = Field(None, description="whose conversation it is; a bound token's own")
    timestamp: str | None = Field(None, description="ISO 8601 time of the exchange; now when absent")
    metadata: Metadata | None = None


class MemoryCreate(_Body):
    text: Text
    importance: Importance = 3
    tags: list[str] | None = None
    entity: Entity | None = Field(None, description="whose memory it is (scope entity:<name>); a bound token's own")
    scope: Scope | None = Field(None, description="'global' or 'entity:<name>' (admin; must agree with entity)")
    conversation_id: ConversationId | None = Field(None, description="the conversation the memory came from")
    timestamp: str | None = Field(None, description="ISO 8601 time of the memory; now when absent")
    metadata: Metadata | None = None


class MemoryPatch(_Body):
    text: Text | None = None
    importance: Importance | None = None
    tags: list[str] | None = None
    metadata: Metadata | None = Field(None, description="extra keys to add or change (not brain's own keys)")
    replace_metadata: bool = False


class DocCreate(_Body):
    text: Text
    type: DocTypeName = Field(description="the document type")
    id: Text | None = None
    metadata: Metadata = Field(default_factory=dict)


class DocsCreate(_Body):
    docs: list[DocCreate] = Field(min_length=1)


_ONE_DOC, _DOC_BATCH = "one-document", "document-batch"  # union tags: never field names (see _field_of)


def _doc_body_kind(value: Any) -> str:
    return _DOC_BATCH if isinstance(value, dict) and "docs" in value else _ONE_DOC


DocsBody = Annotated[Annotated[DocCreate, Tag(_ONE_DOC)] | Annotated[DocsCreate, Tag(_DOC_BATCH)],
                     Discriminator(_doc_body_kind)]


# ---- response bodies (documentation: the routes return plain dicts) ------------------------------

class ErrorBody(BaseModel):
    error: str = Field(description="validation_error, unauthorized, forbidden, not_found, too_large, ...")
    message: str
    problems: list[Problem] | None = None


class DocumentOut(BaseModel):
    id: str
    text: str
    metadata: dict[str, Any]


class MemoryList(BaseModel):
    memories: list[DocumentOut]
    limit: int
    offset: int


class MemoryHitOut(DocumentOut):
    score: float
    similarity: float
    similarity_part: float
    importance_part: float
    recency_part: float


class MemorySearch(BaseModel):
    query: str
    entity: str | None
    results: list[MemoryHitOut]


class Deleted(BaseModel):
    deleted: str


class ExchangeOut(BaseModel):
    conversation_id: str
    user_turn_id: str
    assistant_turn_id: str
    user_turn_index: int
    assistant_turn_index: int
    summaries_scheduled: list[str]


class TurnsOut(BaseModel):
    conversation_id: str
    turns: list[DocumentOut]


class SummariesOut(BaseModel):
    conversation_id: str
    summaries: list[DocumentOut]


class IdsOut(BaseModel):
    ids: list[str]


_ERROR_TEXT = {
    400: "a request the store refused for another reason",
    401: "missing or wrong bearer token",
    403: "a token bound to one entity asked for another's data, or for an admin-only route",
    404: "no such id (or not the caller's)",
    413: "body over BRAIN_API_MAX_BODY_BYTES",
    422: "invalid input, naming the field",
    503: "the store or the embedder is unavailable",
}


def _responses(*codes: int, ok: tuple[int, type[BaseModel]] | None = None, links: dict | None = None) -> dict:
    out: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody, "description": _ERROR_TEXT[code]}
                                           for code in (401, *codes)}
    if ok is not None:
        out[ok[0]] = {"model": ok[1], "description": "success"}
        if links:
            out[ok[0]]["links"] = links
    return out


def _link(operation_id: str, **parameters: str) -> dict[str, Any]:
    return {"operationId": operation_id, "parameters": parameters}


# ---- errors --------------------------------------------------------------------------------------

def _error(status: int, kind: str, message: str, problems: list[dict[str, Any]] | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": kind, "message": message}
    if problems:
        body["problems"] = problems
    return JSONResponse(status_code=status, content=body, headers=headers)


_short = reprlib.Repr()  # inputs are echoed in messages: short, and safe however deep they nest
_short.maxstring, _short.maxother, _short.maxlevel, _short.maxlist, _short.maxdict = 60, 60, 2, 4, 4


def _field_of(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc[1:] if p not in (_ONE_DOC, _DOC_BATCH)) if loc[:1] in (
        ("body",), ("query",), ("path",)) else ".".join(str(p) for p in loc)


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
        message = (f"{field} must be a JSON object sent with 'Content-Type: application/json'"
                   if isinstance(err.get("input"), (bytes, bytearray)) else f"{field} must be a JSON object, got {got}")
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


#: brain's errors other than ValidationError -> (HTTP status, error kind); Starlette picks the handler of
#: the nearest class in an exception's MRO, so BrainError is only the fallback
_BRAIN_ERRORS: dict[type[BrainError], tuple[int, str]] = {
    Forbidden: (403, "forbidden"),
    NotFound: (404, "not_found"),
    StoreUnavailable: (503, "store_unavailable"),
    EmbedderError: (503, "embedder_unavailable"),
    ConfigError: (503, "not_configured"),
    BrainError: (400, "bad_request"),
}
_HTTP_KINDS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 413: "too_large"}


def _status_handler(status: int, kind: str):
    async def handler(request: Request, exc: Exception) -> JSONResponse:
        return _error(status, kind, str(exc))

    return handler


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [_problem(err) for err in exc.errors()]
        # a request's problems are located by their field path alone (it holds any batch index): no item
        return _error(422, "validation_error", joined(problems),
                      [{"field": p.field, "message": p.message} for p in problems])

    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: ValidationError) -> JSONResponse:
        return _error(422, "validation_error", str(exc), [p.to_dict() for p in exc.problems])

    for error_class, (status, kind) in _BRAIN_ERRORS.items():
        app.add_exception_handler(error_class, _status_handler(status, kind))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # Starlette names the methods of one route; a path may have several
            headers = {**(headers or {}), "Allow": ", ".join(_methods_of(request.app, request.url.path))}
        return _error(exc.status_code, _HTTP_KINDS.get(exc.status_code, "error"), str(exc.detail), headers=headers)


def _methods_of(app: FastAPI, path: str) -> list[str]:
    """The methods of the documented path ``path`` is: a literal path (``/v1/memories/search``) before
    a template it also matches (``/v1/memories/{doc_id}``)."""
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    matching = [r for r in routes if r.path == path] or [r for r in routes if r.path_regex.match(path)]
    return sorted({method for route in matching for method in route.methods or ()})


# ---- reading JSON bodies ---------------------------------------------------------------------------

def _too_deep(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json_body(body: bytes) -> Any:
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
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json_body(await self.body())
        return self._json


class _Route(APIRoute):
    """Routes whose JSON bodies are read by :func:`parse_json_body`, and whose single-valued query
    parameters are refused when given twice (``?entity=a&entity=b`` is ambiguous, not "the last one")."""

    def get_route_handler(self):
        handler = super().get_route_handler()
        single = {field.alias for field in self.dependant.query_params
                  if typing.get_origin(field.field_info.annotation) not in (list, tuple, set, frozenset)}

        async def route(request: Request):
            names = [name for name, _ in request.query_params.multi_items()]
            repeated = sorted({name for name in names if name in single and names.count(name) > 1})
            if repeated:
                raise RequestValidationError([{"type": "repeated", "loc": ("query", name), "input": None,
                                               "msg": "is given more than once; send it once"} for name in repeated])
            return await handler(_JsonRequest(request.scope, request.receive))

        return route


# ---- middleware: identity first, then the body size --------------------------------------------

def _local_client(scope: dict) -> bool:
    """Whether the peer is on this machine: a loopback address, a Unix socket, or an in-process client."""
    client = scope.get("client")
    if not client:
        return True
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return True  # not an IP: an in-process transport, never a network peer
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


class Authenticate:
    """Pure ASGI: who is calling, before the body is read or a route matched. A request without a valid
    bearer token gets 401 (with no token configured, non-loopback clients too); the caller is put in
    ``scope["brain.caller"]`` for the routes."""

    def __init__(self, app: Any, tokens: TokenTable | None):
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.tokens is None:
            caller = Caller() if _local_client(scope) else None
            reason = ("this server has no token configured and answers loopback clients only: set "
                      "BRAIN_API_TOKEN or BRAIN_API_TOKENS_FILE")
        else:
            header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            caller = self.tokens.identify(header)
            reason = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"
        if caller is None:
            response = _error(401, "unauthorized", reason, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        scope["brain.caller"] = caller
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse bodies over ``limit`` bytes with 413: at once by Content-Length, else by reading the body
    (at most ``limit`` bytes are buffered) before the app sees it."""

    def __init__(self, app: Any, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self.limit:
                await self._too_large(scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server stops reading at Content-Length
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, receive, send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: dict, receive: Any, send: Any) -> None:
        response = _error(413, "too_large",
                          f"request body is larger than {self.limit} bytes (BRAIN_API_MAX_BODY_BYTES)")
        await response(scope, receive, send)


# ---- the Brain behind the routes -----------------------------------------------------------------

def _brain(request: Request) -> Brain:
    opened = getattr(request.app.state, "brain", None)
    if opened is None:
        raise StoreUnavailable("the store is not open (the server is starting or shutting down)")
    return opened


def _caller(request: Request) -> Caller:
    return request.scope["brain.caller"]


def _access(request: Request, entity: str | None = None) -> Access:
    """The request's view of memories and conversations: its caller, acting for ``entity``."""
    opened = _brain(request)
    return Access(opened.store, opened.chat, _caller(request), entity)


# ---- the app -------------------------------------------------------------------------------------

def create_app(settings: Settings | None = None, *, brain: Brain | None = None, store: RagStore | None = None,
               chat: Any | None = None, tokens: TokenTable | None = None) -> FastAPI:
    """The API over ``brain`` (the caller's to close), or over a Brain wired at start-up around
    ``store`` and ``chat`` (the caller's too), or opened from ``settings`` (closed at shutdown).
    ``tokens`` defaults to the tables of the settings (:class:`ConfigError` for a malformed tokens file)."""
    if brain is not None and (store is not None or chat is not None):
        raise ConfigError("create_app: give a brain, or a store (and chat), not both")
    given = brain.store if brain is not None else store
    settings = settings or (given.settings if given is not None else Settings())
    tokens = tokens if tokens is not None else TokenTable.from_settings(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if brain is not None:
            opened, own = brain, False
        elif store is not None:
            opened, own = Brain(store, chat=chat), True  # closes only the chat layer it builds
        else:
            opened, own = open_brain(settings), True
        try:
            try:
                opened.register_specialists()  # now, at start-up: reading them never writes
            except BrainError as exc:  # kept by the Brain: /v1/specialists answers with it
                log.warning("specialists unavailable: %s", exc)
            app.state.brain = opened
            yield
        finally:
            app.state.brain = None
            if own:
                opened.close()

    # the documentation routes are served like every other route: behind the token when one is set
    app = FastAPI(title="brain", version=__version__, summary="The memory layer of a chat assistant",
                  lifespan=lifespan)
    app.router.route_class = _Route
    app.state.settings = settings
    app.state.brain = None
    _install_error_handlers(app)
    _routes(app)
    _document_security(app, tokens is not None)
    app.add_middleware(BodyLimit, limit=settings.api_max_body_bytes)
    app.add_middleware(Authenticate, tokens=tokens)  # added last: runs first
    return app


def _document_security(app: FastAPI, protected: bool) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            if protected:
                schema.setdefault("components", {})["securitySchemes"] = {
                    "bearer": {"type": "http", "scheme": "bearer",
                               "description": "BRAIN_API_TOKEN (admin) or a token of BRAIN_API_TOKENS_FILE"}}
                schema["security"] = [{"bearer": []}]
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


ConversationPath = Annotated[ConversationId, Path(description="conv-<id>")]
EntityQuery = Annotated[Entity | None, Query(description="act for this entity (a bound token: its own only)")]


def _routes(app: FastAPI) -> None:
    # -- schema ----------------------------------------------------------------------------------
    def schema(doc_type: Annotated[DocTypeName | None, Query(description="one type; all when absent")] = None) -> Any:
        if doc_type is None:
            return {name: schema_info(name) for name in get_all_schemas()}
        return schema_info(doc_type)

    app.get("/v1/schema", tags=["schema"], responses=_responses(422), operation_id="schema")(schema)
    app.get("/api/schema", tags=["schema"], responses=_responses(422), operation_id="schema_legacy")(schema)

    # -- health ----------------------------------------------------------------------------------
    @app.get("/v1/health", tags=["health"], responses={
        **_responses(), 503: {"description": "the store is down (the report says why)",
                              "content": {"application/json": {"schema": {"type": "object"}}}}})
    def health(request: Request) -> JSONResponse:
        # how much the store holds, and where, is the operator's business
        report = _brain(request).health(detail=_caller(request).is_admin)
        status = 503 if report["status"] == "unavailable" else 200
        return JSONResponse(status_code=status, content={"version": __version__, **report})

    # -- chat ------------------------------------------------------------------------------------
    conversation_links = {
        "turns": _link("conversation_turns", conversation_id="$response.body#/conversation_id"),
        "summaries": _link("conversation_summaries", conversation_id="$response.body#/conversation_id"),
    }

    @app.post("/v1/context", tags=["chat"], operation_id="context",
              responses=_responses(400, 403, 404, 413, 422, 503))
    def context(body: ContextRequest, request: Request) -> Any:
        built = _access(request, body.entity).build_context(body.conversation_id, body.user_message)
        return built.to_dict()

    @app.post("/v1/exchanges", tags=["chat"], status_code=201, operation_id="record_exchange",
              responses=_responses(400, 403, 404, 413, 422, 503, ok=(201, ExchangeOut), links=conversation_links))
    def exchanges(body: ExchangeRequest, request: Request) -> Any:
        exchange = _access(request, body.entity).record_exchange(
            body.conversation_id, body.user_text, body.assistant_text, timestamp=body.timestamp,
            metadata=body.metadata)
        return exchange.to_dict()

    @app.get("/v1/conversations/{conversation_id}/turns", tags=["chat"], operation_id="conversation_turns",
             responses=_responses(400, 403, 404, 422, 503, ok=(200, TurnsOut)))
    def conversation_turns(conversation_id: ConversationPath, request: Request, entity: EntityQuery = None,
                           k: int | None = Query(None, ge=1, le=1000, description="only the last k turns")) -> Any:
        conversation_id, docs = _access(request, entity).conversation_turns(conversation_id, k)
        return {"conversation_id": conversation_id, "turns": [d.to_dict() for d in docs]}

    @app.get("/v1/conversations/{conversation_id}/summaries", tags=["chat"], operation_id="conversation_summaries",
             responses=_responses(400, 403, 404, 422, 503, ok=(200, SummariesOut)))
    def conversation_summaries(conversation_id: ConversationPath, request: Request, entity: EntityQuery = None) -> Any:
        conversation_id, docs = _access(request, entity).conversation_summaries(conversation_id)
        return {"conversation_id": conversation_id, "summaries": [d.to_dict() for d in docs]}

    # -- memories --------------------------------------------------------------------------------
    memory_links = {
        "get": _link("get_memory", doc_id="$response.body#/id"),
        "patch": _link("patch_memory", doc_id="$response.body#/id"),
        "delete": _link("delete_memory", doc_id="$response.body#/id"),
    }

    @app.post("/v1/memories", tags=["memories"], status_code=201, operation_id="create_memory",
              responses=_responses(400, 403, 413, 422, 503, ok=(201, DocumentOut), links=memory_links))
    def create_memory(body: MemoryCreate, request: Request) -> Any:
        created = _access(request, body.entity).create_memory(
            body.text, scope=body.scope, importance=body.importance, tags=body.tags,
            conversation_id=body.conversation_id, timestamp=body.timestamp, metadata=body.metadata)
        return created.to_dict()

    @app.get("/v1/memories", tags=["memories"], operation_id="list_memories",
             responses=_responses(400, 403, 422, 503, ok=(200, MemoryList)))
    def list_memories(request: Request, entity: EntityQuery = None, tags: list[str] = Query([]),
                      limit: int = Query(100, ge=1, le=1000),
                      offset: int = Query(0, ge=0, le=MAX_OFFSET)) -> Any:
        docs = _access(request, entity).list_memories(tags=tags, limit=limit, offset=offset)
        return {"memories": [d.to_dict() for d in docs], "limit": limit, "offset": offset}

    # declared before /v1/memories/{doc_id} so that "search" is not taken for an id
    @app.get("/v1/memories/search", tags=["memories"], operation_id="search_memories",
             responses=_responses(400, 403, 422, 503, ok=(200, MemorySearch)))
    def search_memories(request: Request, q: str = Query(min_length=1), k: int | None = Query(None, ge=1, le=100),
                        entity: EntityQuery = None, tags: list[str] = Query([])) -> Any:
        access = _access(request, entity)
        hits = access.search_memories(q, k, tags=tags)
        return {"query": q, "entity": access.entity, "results": [h.to_dict() for h in hits]}

    @app.get("/v1/memories/{doc_id}", tags=["memories"], operation_id="get_memory",
             responses=_responses(400, 403, 404, 422, 503, ok=(200, DocumentOut)))
    def get_memory(doc_id: str, request: Request, entity: EntityQuery = None) -> Any:
        return _access(request, entity).get_memory(doc_id).to_dict()

    @app.patch("/v1/memories/{doc_id}", tags=["memories"], operation_id="patch_memory",
               responses=_responses(400, 403, 404, 413, 422, 503, ok=(200, DocumentOut)))
    def patch_memory(doc_id: str, body: MemoryPatch, request: Request, entity: EntityQuery = None) -> Any:
        updated = _access(request, entity).update_memory(
            doc_id, body.text, importance=body.importance, tags=body.tags, metadata=body.metadata,
            replace_metadata=body.replace_metadata)
        return updated.to_dict()

    @app.delete("/v1/memories/{doc_id}", tags=["memories"], operation_id="delete_memory",
                responses=_responses(400, 403, 404, 422, 503, ok=(200, Deleted)))
    def delete_memory(doc_id: str, request: Request, entity: EntityQuery = None) -> Any:
        _access(request, entity).delete_memory(doc_id)
        return {"deleted": doc_id}

    # -- specialists -----------------------------------------------------------------------------
    @app.get("/v1/specialists", tags=["specialists"], operation_id="specialists",
             responses=_responses(400, 422, 503))
    def find_specialists(request: Request, q: str | None = Query(None, min_length=1),
                         k: int = Query(3, ge=1, le=50)) -> Any:
        registry = _brain(request).specialists
        if q is None:
            return {"specialists": [s.to_dict() for s in registry.list_specialists()]}
        return {"request": q, "results": [m.to_dict() for m in registry.find_specialists(q, k)]}

    # -- any document (admin only) ---------------------------------------------------------------
    @app.post("/v1/docs", tags=["documents"], status_code=201, operation_id="create_docs",
              responses=_responses(400, 403, 413, 422, 503, ok=(201, IdsOut)))
    def create_docs(body: DocsBody, request: Request) -> Any:
        _access(request).require_unrestricted("writing documents of any type (/v1/docs)")
        docs = body.docs if isinstance(body, DocsCreate) else [body]
        ids = _brain(request).store.upsert_docs([{**d.metadata, "text": d.text, "type": d.type, "id": d.id} for d in docs])
        return {"ids": ids}


def __getattr__(name: str) -> Any:
    """``app``: the API over the settings of the environment, built on first access (uvicorn's
    ``brain.api:app``), so that a bad setting fails there and not at ``import brain.api``."""
    if name == "app":
        built = globals().get("_app")
        if built is None:
            built = globals()["_app"] = create_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- serving -------------------------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(settings: Settings | None = None, *, host: str | None = None, port: int | None = None) -> None:
    """Run the API under uvicorn in this process (one process: see the module docstring)."""
    import uvicorn

    settings = settings or Settings()
    host = host or settings.api_host
    port = port or settings.api_port
    tokens = TokenTable.from_settings(settings)  # a malformed tokens file stops here, before the store opens
    if not is_loopback(host) and tokens is None:
        raise ConfigError(
            f"refusing to listen on {host} without a token: set BRAIN_API_TOKEN (clients then send "
            f"'Authorization: Bearer <token>') or BRAIN_API_TOKENS_FILE, or bind 127.0.0.1"
        )
    if not settings.chroma_url:
        log.warning("embedded Chroma store: serving from this one process (threads); for several processes "
                    "run a Chroma server and set BRAIN_CHROMA_URL")
    # opened here, before uvicorn starts, so that a locked or unreachable store is a clear error
    with open_brain(settings) as opened:
        uvicorn.run(create_app(settings, brain=opened, tokens=tokens), host=host, port=port, workers=1,
                    log_level="info")
