"""The API's documentation page, ``/docs`` (Swagger UI), with its script, style sheet and icon served by
this server from the ``fastapi-offline`` package (under ``/docs/assets/``), so the page works on a machine
without internet; FastAPI's own page loads them from a CDN. ReDoc (``/redoc``) is off: its page loads
its logo from its vendor's CDN whatever it is given. Like ``/openapi.json``, the page is served behind
the token when one is set."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PREFIX = "/docs/assets"


def assets_dir() -> Path:
    """Where the installed ``fastapi-offline`` keeps Swagger UI's files."""
    return Path(str(files("fastapi_offline") / "static"))


def add_routes(router: APIRouter) -> None:
    """The page and its assets; the app must be built with ``docs_url=None, redoc_url=None``."""

    @router.get(DOCS_PATH, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        app = request.app
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} {app.version}",
            swagger_js_url=f"{ASSETS_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PREFIX}/favicon.png",
        )

    router.mount(ASSETS_PREFIX, StaticFiles(directory=assets_dir()), name="docs-assets")
