"""The MCP server over streamable HTTP, standalone (``brain mcp --http``) or inside ``brain serve`` at
``/mcp``. Either way the request passes brain's own middleware first, so the token rule is the HTTP API's:
a bearer token names the caller (an entity-bound token acts for its entity only), no token is configured
only on loopback, and an unauthenticated request gets 401 before the MCP session sees a byte."""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from brain.config import Settings
from brain.ops import LocalOperations
from brain.ops.serving import Brain, prepare_to_serve
from brain.shells.mcp.server import create_server, plain_logs_off_a_terminal
from brain.shells.web.middleware import Authenticate, BodyLimit
from brain.shells.web.tokens import TokenTable, check_listen_address

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"


def streamable_app(server: MCPServer, host: str, path: str = MCP_PATH) -> Starlette:
    """The SDK's streamable HTTP app for ``server``; it guards against DNS rebinding when ``host`` is loopback."""
    return server.streamable_http_app(streamable_http_path=path, host=host)


def http_app(
    brain: Brain, *, tokens: TokenTable | None, host: str, entity: str | None = None, max_body_bytes: int | None = None
) -> Any:
    """The standalone MCP app: brain's authentication and body limit around the SDK's streamable HTTP app."""
    app = streamable_app(create_server(brain, entity=entity), host)
    limit = max_body_bytes if max_body_bytes is not None else brain.settings.api_max_body_bytes
    return Authenticate(BodyLimit(app, limit=limit), tokens)


class MountedMcp:
    """The MCP endpoint inside the HTTP API: the route exists when the app is built, the server once the
    API's Brain is open (its lifespan calls :meth:`run`)."""

    def __init__(self, host: str, entity: str | None = None):
        self.host = host
        self.entity = entity
        self._endpoint: Any = None

    def run(self, brain: Brain) -> Any:
        """An async context manager serving MCP sessions for ``brain`` while it is entered."""
        server = create_server(brain, entity=self.entity)
        app = streamable_app(server, self.host)
        route = app.routes[0]
        assert isinstance(route, Route)  # the SDK's one route: its ASGI endpoint, which the session manager serves
        self._endpoint = route.app
        return server.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._endpoint is None:  # only before start-up or after shutdown
            from brain.shells.web.error_responses import error_response

            await error_response(503, "unavailable", "the MCP endpoint is not running")(scope, receive, send)
            return
        await self._endpoint(scope, receive, send)


def listen_tokens(settings: Settings, host: str) -> TokenTable | None:
    """The tokens to serve ``host`` with; :class:`ConfigError` for a malformed tokens file or a
    non-loopback address without a token. Called before the store opens, so a refusal costs nothing."""
    tokens = TokenTable.from_settings(settings)
    check_listen_address(host, tokens)
    return tokens


def serve_http(
    target: LocalOperations | Brain, *, tokens: TokenTable | None, host: str, port: int, entity: str | None = None
) -> None:
    """Serve MCP over streamable HTTP at ``http://host:port/mcp`` until interrupted, on a store this process
    opened (a server itself: never beside another one)."""
    import uvicorn

    brain = target.brain if isinstance(target, LocalOperations) else target
    check_listen_address(host, tokens)
    plain_logs_off_a_terminal()  # start-up's own lines (the persona, the mirror) are records too
    prepare_to_serve(brain)
    log.info(
        "MCP over streamable HTTP at http://%s:%d%s%s",
        host,
        port,
        MCP_PATH,
        "" if tokens else " (loopback only, no token)",
    )
    uvicorn.run(http_app(brain, tokens=tokens, host=host, entity=entity), host=host, port=port, log_level="info")


__all__ = ["MCP_PATH", "MountedMcp", "http_app", "listen_tokens", "serve_http", "streamable_app"]
