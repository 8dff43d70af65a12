"""The routes, one module per area; :func:`add_routes` registers them in the order the OpenAPI schema
lists them.

The routes are built once per process and every app shares them. Building a route's validators takes FastAPI
about 3 ms, and an app has about 45 routes, so building them per app made each app cost about 0.13 s.
Sharing them is safe because a route reads what it serves (the brain, the settings, the upstream) from
``request.app.state`` and never from the app it was built for. One consequence: FastAPI's
``app.dependency_overrides`` does not reach them."""

from __future__ import annotations

import functools

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute

from brain.shells.api.json_bodies import JsonRoute
from brain.shells.api.routes import (
    api_docs,
    browse,
    chat,
    documents,
    maintenance,
    memories,
    operations,
    operator,
    proxy,
    service,
    specialists,
    ui,
)


def add_routes(app: FastAPI) -> None:
    """Every route on ``app``, and the proxy's error handler."""
    proxy.add_error_handler(app)
    app.router.routes.extend(_routes())


@functools.cache
def _routes() -> tuple[BaseRoute, ...]:
    router = APIRouter(route_class=JsonRoute)
    service.add_routes(router)
    chat.add_routes(router)
    proxy.add_routes(router)
    browse.add_routes(router)
    memories.add_routes(router)
    specialists.add_routes(router)
    documents.add_routes(router)
    operator.add_routes(router)
    maintenance.add_routes(router)
    operations.add_routes(router)
    ui.add_routes(router)
    api_docs.add_routes(router)
    return tuple(router.routes)
