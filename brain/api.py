"""The HTTP API: a thin FastAPI shell over :class:`~brain.rag_store.RagStore` and :class:`~brain.chat.ChatMemory`.

``brain serve`` runs :data:`app` (or :func:`create_app` with explicit settings) under uvicorn in one
process: the embedded Chroma store is single-process (threads are fine, and FastAPI runs the
handlers below in its thread pool). More processes need a Chroma server (``BRAIN_CHROMA_URL``).

Errors are JSON ``{"error": kind, "message": text, "problems": [...]}``: invalid input 422 naming the
field, unknown id 404, body over ``BRAIN_API_MAX_BODY_BYTES`` 413, missing or wrong bearer token 401,
store or embedder unavailable 503 with the reason. Bad input never gives a 500.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from brain import __version__
from brain.config import Settings
from brain.errors import (
    BrainError,
    ConfigError,
    EmbedderError,
    NotFound,
    StoreUnavailable,
    ValidationError,
)
from brain.rag_store import RagStore
from brain.schemas import DOC_TYPES, DocType, get_all_schemas, schema_info, valid_conversation_id

log = logging.getLogger(__name__)


# ---- request bodies ------------------------------------------------------------------------------

class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContextRequest(_Body):
    user_message: str = Field(min_length=1, description="the user's new message")
    conversation_id: str | None = Field(None, description="conv-...; none for a new conversation")
    entity: str | None = Field(None, description="whose memories may be used (plus global ones)")


class ExchangeRequest(_Body):
    user_text: str = Field(min_length=1)
    assistant_text: str = Field(min_length=1)
    conversation_id: str | None = Field(None, description="conv-...; generated when absent")
    entity: str | None = None
    timestamp: str | None = Field(None, description="ISO 8601 time of the exchange; now when absent")
    metadata: dict[str, Any] | None = None


class MemoryCreate(_Body):
    text: str = Field(min_length=1)
    importance: int = 3
    tags: list[str] | None = None
    entity: str | None = Field(None, description="who the memory is about; scopes it to that entity unless scope is given")
    scope: str | None = Field(None, description="'global' or 'entity:<name>'")
    metadata: dict[str, Any] | None = None


# keys of a memory that have their own place in a request body (or are set by the store)
_MEMORY_FIELDS = frozenset({"text", "type", "id", "embedding", "importance", "tags", "entity", "scope", "source",
                            "timestamp", "ts_epoch", "conversation_id"})


class MemoryPatch(_Body):
    text: str | None = Field(None, min_length=1)
    importance: int | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    replace_metadata: bool = False


class DocCreate(_Body):
    text: str = Field(min_length=1)
    type: str = Field(description=f"one of {', '.join(DOC_TYPES)}")
    id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class DocsCreate(_Body):
    docs: list[DocCreate] = Field(min_length=1)


# ---- errors --------------------------------------------------------------------------------------

def _error(status: int, kind: str, message: str, problems: list[dict[str, Any]] | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": kind, "message": message}
    if problems:
        body["problems"] = problems
    return JSONResponse(status_code=status, content=body, headers=headers)


def _request_problems(exc: RequestValidationError) -> list[dict[str, Any]]:
    problems = []
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc", ()) if part not in ("body",)]
        problems.append({"field": ".".join(loc) or "body", "message": err.get("msg", "invalid")})
    return problems


#: brain's errors other than ValidationError -> (HTTP status, error kind); Starlette picks the handler of
#: the nearest class in an exception's MRO, so BrainError is only the fallback
_BRAIN_ERRORS: dict[type[BrainError], tuple[int, str]] = {
    NotFound: (404, "not_found"),
    StoreUnavailable: (503, "store_unavailable"),
    EmbedderError: (503, "embedder_unavailable"),
    ConfigError: (503, "not_configured"),
    BrainError: (400, "bad_request"),
}


def _status_handler(status: int, kind: str):
    async def handler(request: Request, exc: Exception) -> JSONResponse:
        return _error(status, kind, str(exc))

    return handler


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = _request_problems(exc)
        message = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        return _error(422, "validation_error", message, problems)

    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: ValidationError) -> JSONResponse:
        return _error(422, "validation_error", str(exc), exc.problems)

    for error_class, (status, kind) in _BRAIN_ERRORS.items():
        app.add_exception_handler(error_class, _status_handler(status, kind))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
            exc.status_code, "error")
        return _error(exc.status_code, kind, str(exc.detail), headers=getattr(exc, "headers", None))


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


# ---- the services behind the routes --------------------------------------------------------------

@dataclass
class Services:
    settings: Settings
    store: RagStore
    chat: Any  # brain.chat.ChatMemory
    specialists: Any = None  # brain.specialists.SpecialistRegistry, on first use


def _services(request: Request) -> Services:
    services = getattr(request.app.state, "brain", None)
    if services is None:
        raise StoreUnavailable("the store is not open (the server is starting or shutting down)")
    return services


_registry_lock = threading.Lock()


def _specialists(request: Request) -> Any:
    """The specialist registry, registered from BRAIN_SPECIALISTS_PATH on first use."""
    services = _services(request)
    with _registry_lock:
        if services.specialists is None:
            from brain.specialists import SpecialistRegistry

            registry = SpecialistRegistry.from_settings(services.store, services.settings)
            registry.register()
            services.specialists = registry
        return services.specialists


def _check_token(request: Request) -> None:
    settings: Settings = request.app.state.settings
    if settings.api_token is None:
        return
    expected = settings.api_token.get_secret_value().encode()
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
        raise StarletteHTTPException(
            401, "missing or wrong bearer token: send 'Authorization: Bearer <BRAIN_API_TOKEN>'",
            headers={"WWW-Authenticate": "Bearer"},
        )


def _visible_to(doc_metadata: dict[str, Any], entity: str | None) -> bool:
    """Entity scoping for a single memory fetched by id: another entity's memory is not found."""
    scope = doc_metadata.get("scope", "global")
    return entity is None or scope == "global" or scope == f"entity:{entity}"


# ---- the app -------------------------------------------------------------------------------------

def create_app(settings: Settings | None = None, *, store: RagStore | None = None, chat: Any | None = None) -> FastAPI:
    """The API over ``store`` and ``chat`` (opened from ``settings`` at start-up when not given)."""
    settings = settings or (store.settings if store is not None else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        from brain.chat import ChatMemory  # imported here: the chat layer starts a summariser worker

        own_store = store is None
        opened_store = store or RagStore(settings)
        own_chat = chat is None
        try:
            opened_chat = chat or ChatMemory(opened_store, settings)
        except BaseException:
            if own_store:
                opened_store.close()
            raise
        app.state.brain = Services(settings, opened_store, opened_chat)
        try:
            yield
        finally:
            app.state.brain = None
            if own_chat:
                opened_chat.close()
            if own_store:
                opened_store.close()

    protected = settings.api_token is not None
    app = FastAPI(
        title="brain",
        version=__version__,
        summary="The memory layer of a chat assistant",
        lifespan=lifespan,
        dependencies=[Depends(_check_token)],
        # FastAPI's own documentation routes bypass route dependencies: with a token they are off
        docs_url=None if protected else "/docs",
        redoc_url=None if protected else "/redoc",
        openapi_url=None if protected else "/openapi.json",
    )
    app.state.settings = settings
    app.state.brain = None
    _install_error_handlers(app)
    _routes(app)
    app.add_middleware(BodyLimit, limit=settings.api_max_body_bytes)
    return app


def _routes(app: FastAPI) -> None:
    # -- schema ----------------------------------------------------------------------------------
    def schema(doc_type: str | None = None) -> Any:
        if doc_type is None:
            return {name: schema_info(name) for name in get_all_schemas()}
        if doc_type not in DOC_TYPES:
            raise NotFound(f"unknown doc_type {doc_type!r}; valid types: {', '.join(DOC_TYPES)}")
        return schema_info(doc_type)

    app.get("/v1/schema", tags=["schema"])(schema)
    app.get("/api/schema", tags=["schema"])(schema)

    # -- health ----------------------------------------------------------------------------------
    @app.get("/v1/health", tags=["health"])
    def health(request: Request) -> JSONResponse:
        services = _services(request)
        report: dict[str, Any] = {"version": __version__}
        healthy = True
        try:
            report["store"] = {"ok": True, "documents": services.store.col.count(),
                               "backend": services.settings.chroma_url or "embedded"}
        except Exception as exc:  # any Chroma failure means the store is down: report it, 503
            healthy = False
            report["store"] = {"ok": False, "error": str(exc)}
        report["embedder"] = {"ok": True, "name": services.store.embedder.name,
                              "dimension": int(services.store.embedder.dimension)}
        report["summariser"] = services.chat.health()
        report["mirror"] = services.store.mirror_health.to_dict()
        degraded = not report["mirror"]["ok"]  # a damaged mirror: reads and writes still work, from Chroma
        report["status"] = "unavailable" if not healthy else "degraded" if degraded else "ok"
        return JSONResponse(status_code=200 if healthy else 503, content=report)

    # -- chat ------------------------------------------------------------------------------------
    @app.post("/v1/context", tags=["chat"])
    def context(body: ContextRequest, request: Request) -> Any:
        services = _services(request)
        built = services.chat.build_context(body.conversation_id, body.user_message, entity=body.entity)
        return built.to_dict()

    @app.post("/v1/exchanges", tags=["chat"], status_code=201)
    def exchanges(body: ExchangeRequest, request: Request) -> Any:
        services = _services(request)
        exchange = services.chat.record_exchange(
            body.conversation_id, body.user_text, body.assistant_text,
            entity=body.entity, timestamp=body.timestamp, metadata=body.metadata,
        )
        return exchange.to_dict()

    @app.get("/v1/conversations/{conversation_id}/turns", tags=["chat"])
    def conversation_turns(conversation_id: str, request: Request,
                           k: int | None = Query(None, ge=1, le=1000, description="only the last k turns")) -> Any:
        store = _services(request).store
        conversation_id = valid_conversation_id(conversation_id)
        docs = store.get(type=DocType.TURN, where={"conversation_id": conversation_id})
        docs.sort(key=lambda d: d.metadata.get("turn_index") or 0)
        if k is not None:
            docs = docs[-k:]
        return {"conversation_id": conversation_id, "turns": [d.to_dict() for d in docs]}

    @app.get("/v1/conversations/{conversation_id}/summaries", tags=["chat"])
    def conversation_summaries(conversation_id: str, request: Request) -> Any:
        store = _services(request).store
        conversation_id = valid_conversation_id(conversation_id)
        docs = store.get(type=DocType.SUMMARY, where={"conversation_id": conversation_id})
        docs.sort(key=lambda d: d.metadata.get("summary_index") or 0)
        return {"conversation_id": conversation_id, "summaries": [d.to_dict() for d in docs]}

    # -- memories --------------------------------------------------------------------------------
    @app.post("/v1/memories", tags=["memories"], status_code=201)
    def create_memory(body: MemoryCreate, request: Request) -> Any:
        services = _services(request)
        clash = sorted(set(body.metadata or {}) & _MEMORY_FIELDS)
        if clash:
            raise ValidationError(
                f"metadata.{clash[0]}: {clash[0]!r} is a field of its own; send it at the top level of the body",
                [{"item": None, "field": f"metadata.{k}", "message": "a field of its own"} for k in clash],
            )
        if body.scope is None:  # the chat layer's rule: a memory about an entity is that entity's
            doc_id = services.chat.remember(body.text, importance=body.importance, tags=body.tags,
                                            entity=body.entity, source="system", metadata=body.metadata)
        else:  # an explicit scope, e.g. "global" for a shared memory that is about someone
            doc_id = services.store.upsert_memory(body.text, scope=body.scope, importance=body.importance,
                                                  tags=body.tags, entity=body.entity, **(body.metadata or {}))
        return services.store.get_one(doc_id).to_dict()

    @app.get("/v1/memories", tags=["memories"])
    def list_memories(request: Request, entity: str | None = None, tags: list[str] | None = Query(None),
                      limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0)) -> Any:
        store = _services(request).store
        where: dict[str, Any] = {}
        if entity is not None:
            where["entity"] = entity
        if tags:
            where["tags"] = tags
        docs = store.get(type=DocType.MEMORY, where=where or None, limit=limit, offset=offset)
        return {"memories": [d.to_dict() for d in docs], "limit": limit, "offset": offset}

    # declared before /v1/memories/{doc_id} so that "search" is not taken for an id
    @app.get("/v1/memories/search", tags=["memories"])
    def search_memories(request: Request, q: str = Query(min_length=1), k: int | None = Query(None, ge=1, le=100),
                        entity: str | None = None, tags: list[str] | None = Query(None)) -> Any:
        store = _services(request).store
        hits = store.retrieve_memories(q, k, entity=entity, tags=tags or None)
        return {"query": q, "entity": entity, "results": [h.to_dict() for h in hits]}

    @app.get("/v1/memories/{doc_id}", tags=["memories"])
    def get_memory(doc_id: str, request: Request, entity: str | None = None) -> Any:
        store = _services(request).store
        docs = store.get([doc_id], type=DocType.MEMORY)
        if not docs or not _visible_to(docs[0].metadata, entity):
            raise NotFound(f"no memory with id {doc_id!r}")
        return docs[0].to_dict()

    @app.patch("/v1/memories/{doc_id}", tags=["memories"])
    def patch_memory(doc_id: str, body: MemoryPatch, request: Request) -> Any:
        store = _services(request).store
        updated = store.update_memory(
            doc_id, body.text, importance=body.importance, tags=body.tags, metadata=body.metadata,
            replace_metadata=body.replace_metadata,
        )
        return updated.to_dict()

    @app.delete("/v1/memories/{doc_id}", tags=["memories"])
    def delete_memory(doc_id: str, request: Request) -> Any:
        store = _services(request).store
        if not store.delete([doc_id], type=DocType.MEMORY):
            raise NotFound(f"no memory with id {doc_id!r}")
        return {"deleted": doc_id}

    # -- specialists -----------------------------------------------------------------------------
    @app.get("/v1/specialists", tags=["specialists"])
    def find_specialists(request: Request, q: str | None = Query(None, min_length=1),
                         k: int = Query(3, ge=1, le=50)) -> Any:
        registry = _specialists(request)
        if q is None:
            return {"specialists": [s.to_dict() for s in registry.list_specialists()]}
        return {"request": q, "results": [m.to_dict() for m in registry.find_specialists(q, k)]}

    # -- any document ----------------------------------------------------------------------------
    @app.post("/v1/docs", tags=["documents"], status_code=201)
    def create_docs(body: DocCreate | DocsCreate, request: Request) -> Any:
        store = _services(request).store
        docs = body.docs if isinstance(body, DocsCreate) else [body]
        ids = store.upsert_docs([{**d.metadata, "text": d.text, "type": d.type, "id": d.id} for d in docs])
        return {"ids": ids}


app = create_app()


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
    if not is_loopback(host) and settings.api_token is None:
        raise ConfigError(
            f"refusing to listen on {host} without a token: set BRAIN_API_TOKEN (clients then send "
            f"'Authorization: Bearer <token>'), or bind 127.0.0.1"
        )
    if not settings.chroma_url:
        log.warning("embedded Chroma store: serving from this one process (threads); for several processes "
                    "run a Chroma server and set BRAIN_CHROMA_URL")
    # opened here, before uvicorn starts, so that a locked or unreachable store is a clear error
    with RagStore(settings) as store:
        uvicorn.run(create_app(settings, store=store), host=host, port=port, workers=1, log_level="info")
