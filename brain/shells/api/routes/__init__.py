"""The routes, one module per area; :func:`add_routes` registers them in the order the OpenAPI schema
lists them."""

from __future__ import annotations

from fastapi import FastAPI

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
    service.add_routes(app)
    chat.add_routes(app)
    proxy.add_routes(app)
    browse.add_routes(app)
    memories.add_routes(app)
    specialists.add_routes(app)
    documents.add_routes(app)
    operator.add_routes(app)
    maintenance.add_routes(app)
    operations.add_routes(app)
    ui.add_routes(app)
    api_docs.add_routes(app)
