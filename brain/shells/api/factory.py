"""The app factory: :func:`create_app` wires the error handlers, the routes and the middleware around a
:class:`~brain.app.core.Brain` opened (or given) for the app's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from brain.config import Settings
from brain.model.errors import ConfigError
from brain.model.version import __version__
from brain.ops.consistency import track_request_writes
from brain.ops.serving import Brain, Store, open_brain, prepare_to_serve
from brain.shells.api.read_your_writes import ReadYourWrites
from brain.shells.api.routes import add_routes
from brain.shells.api.routes.maintenance import IMPORT_PATH, import_too_large
from brain.shells.api.upstream import Upstream
from brain.shells.web.error_responses import install_error_handlers
from brain.shells.web.middleware import Authenticate, BodyLimit
from brain.shells.web.tokens import TokenTable


def create_app(
    settings: Settings | None = None,
    *,
    brain: Brain | None = None,
    store: Store | None = None,
    chat: Any | None = None,
    tokens: TokenTable | None = None,
    host: str | None = None,
) -> FastAPI:
    """The API over ``brain`` (the caller's to close), or over a Brain wired at start-up around
    ``store`` and ``chat`` (the caller's too), or opened from ``settings`` (closed at shutdown).
    ``tokens`` defaults to the tables of the settings (:class:`ConfigError` for a malformed tokens file);
    ``host`` is the address served (default ``BRAIN_API_HOST``), which the MCP endpoint guards against
    DNS rebinding when it is loopback."""
    if brain is not None and (store is not None or chat is not None):
        raise ConfigError("create_app: give a brain, or a store (and chat), not both")
    given = brain.store if brain is not None else store
    settings = settings or (given.settings if given is not None else Settings())
    tokens = tokens if tokens is not None else TokenTable.from_settings(settings)

    mounted = _mcp_endpoint(host or settings.api_host) if settings.api_mcp else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if brain is not None:
            opened, own = brain, False
        elif store is not None:
            opened, own = Brain(store, chat=chat), True  # closes only the chat layer it builds
        else:
            opened, own = open_brain(settings), True
        untrack = track_request_writes(opened)
        app.state.upstream = _chat_upstream(settings)
        try:
            prepare_to_serve(opened, catch_up=False)  # the mirror's catch-up is the server's (brain.shells.api.serve)
            app.state.brain = opened
            if mounted is None:
                yield
            else:
                async with mounted.run(opened):
                    yield
        finally:
            app.state.brain = None
            if app.state.upstream is not None:
                await app.state.upstream.aclose()
                app.state.upstream = None
            untrack()
            if own:
                opened.close()

    # the documentation routes are served like every other route: behind the token when one is set
    app = FastAPI(
        title="brain",
        version=__version__,
        summary="The memory layer of a chat assistant",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )  # /docs from local files: routes/api_docs.py
    app.state.settings = settings
    app.state.brain = None
    app.state.upstream = None
    install_error_handlers(app)
    add_routes(app)
    if mounted is not None:
        from brain.shells.mcp import MCP_PATH

        app.router.add_route(MCP_PATH, mounted, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    _document_security(app, tokens is not None)
    app.add_middleware(ReadYourWrites)  # after authentication and the body limit
    imports = (settings.import_max_bytes, import_too_large(settings.import_max_bytes))
    app.add_middleware(BodyLimit, limit=settings.api_max_body_bytes, streamed={("POST", IMPORT_PATH): imports})
    app.add_middleware(Authenticate, tokens=tokens)  # added last: runs first
    return app


def _chat_upstream(settings: Settings) -> Upstream | None:
    """The chat model the proxy routes stand in front of, when BRAIN_CHAT_UPSTREAM names one."""
    if settings.chat_upstream is None:
        return None
    key = settings.chat_upstream_key.get_secret_value() if settings.chat_upstream_key is not None else None
    return Upstream(
        settings.chat_upstream,
        key=key,
        timeout=settings.chat_upstream_timeout,
        max_bytes=settings.chat_upstream_max_bytes,
    )


def _mcp_endpoint(host: str) -> Any:
    from brain.shells.mcp import MountedMcp  # the MCP SDK is imported only when the endpoint is on

    return MountedMcp(host)


def _document_security(app: FastAPI, protected: bool) -> None:
    build = app.openapi

    def openapi() -> dict[str, object]:
        if app.openapi_schema is None:
            schema = build()
            if protected:
                schema.setdefault("components", {})["securitySchemes"] = {
                    "bearer": {
                        "type": "http",
                        "scheme": "bearer",
                        "description": "BRAIN_API_TOKEN (admin) or a token of BRAIN_API_TOKENS_FILE",
                    }
                }
                schema["security"] = [{"bearer": []}]
        assert app.openapi_schema is not None  # built above
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
