"""The memory browser: one HTML page at ``/ui`` and its static assets under ``/ui/static/``.

The page and its assets hold no data, so they load without a token (see
:class:`~brain.shells.web.middleware.Authenticate`); everything the page shows comes from the JSON API, called by
the page's script with the token the user typed, which the browser keeps in ``sessionStorage``. Every asset
is served from the package, so the page works offline; the Content-Security-Policy lets it load nothing
from anywhere else."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from brain.shells.web.middleware import STATIC_PREFIX, UI_PATH  # the paths the token check lets through

UI_DIR = Path(__file__).resolve().parent.parent / "ui"

#: nothing from another origin, no inline script, no framing; the token never leaves in a Referer
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class _UiStatic(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def add_routes(router: APIRouter) -> None:
    @router.get(UI_PATH, include_in_schema=False)
    def ui_page() -> FileResponse:
        return FileResponse(UI_DIR / "index.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    router.mount(STATIC_PREFIX.rstrip("/"), _UiStatic(directory=UI_DIR / "static"), name="ui-static")
