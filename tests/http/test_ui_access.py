"""The memory browser's shell over real HTTP: the page and its assets load without a token (they hold no
data), and nothing else does. Real uvicorn on a loopback port, a real embedded store, raw sockets where an
HTTP client would tidy the path."""

from __future__ import annotations

import re
import socket
from importlib import resources
from urllib.parse import unquote

import httpx
import pytest

from brain.app.core import open_store
from brain.shells.api import create_app
from brain.shells.web.middleware import is_ui_shell
from tests.conftest import LiveServer, api_settings

ADMIN = "admin-token-0123456789abcdef"
ASSETS = ("ui.js", "ui.css")


@pytest.fixture
def guarded(tmp_path, local_embedder):
    """A server with a token, holding one memory (so a leak would have something to leak)."""
    settings = api_settings(tmp_path, api_token=ADMIN)
    with open_store(settings, embedder=local_embedder) as store:
        store.upsert_docs([{"type": "memory", "text": "The user's PIN is 4711", "importance": 5}])
        app = create_app(settings, store=store)
        with LiveServer(app) as server:
            yield server, app


def raw_get(url: str, path: bytes, method: bytes = b"GET") -> bytes:
    """The status line and body of a request sent byte for byte (no client normalises ``..`` or ``//``)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(method + b" " + path + b" HTTP/1.1\r\nHost: brain\r\nConnection: close\r\n\r\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_page_and_its_assets_load_without_a_token(guarded):
    server, _ = guarded
    page = httpx.get(f"{server.url}/ui", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    referenced = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert referenced and all(ref.startswith("/ui/static/") for ref in referenced), referenced  # nothing remote
    for ref in referenced:
        asset = httpx.get(f"{server.url}{ref}", timeout=30)
        assert asset.status_code == 200, ref
        assert "4711" not in asset.text
    assert "4711" not in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy and "script-src 'self'" in policy
    assert page.headers["referrer-policy"] == "no-referrer"
    assert httpx.head(f"{server.url}/ui/static/ui.js", timeout=30).status_code == 200


@pytest.mark.slow
def test_nothing_else_is_reachable_without_the_token(guarded):
    server, app = guarded
    paths = set()
    for route in app.routes:
        path = getattr(route, "path", "")
        if path and not path.startswith("/ui"):
            paths.add(re.sub(r"\{[^}]+\}", "conv-x", path))
    assert {"/v1/memories", "/v1/health", "/openapi.json", "/docs"} <= paths
    for path in sorted(paths):
        for method in ("GET", "POST", "PATCH", "DELETE", "HEAD"):
            response = httpx.request(method, f"{server.url}{path}", timeout=30)
            assert response.status_code == 401, (method, path, response.status_code)
    # the shell's paths, bent to reach something else, or asked with a method that could change something
    tricks = [b"/ui/../v1/memories", b"/ui/static/../../v1/memories", b"/ui/static/..%2f..%2fv1/memories",
              b"/ui/static/%2e%2e/%2e%2e/v1/health", b"/ui//v1/memories", b"/ui/v1/memories", b"/uix",
              b"/ui/", b"/UI", b"/ui/static", b"/ui/static/", b"/v1/memories?next=/ui", b"/ui?x=/v1/memories",
              b"/ui/static/..\\..\\v1\\health", b"/ui%2f../v1/memories"]
    for path in tricks:
        answer = raw_get(server.url, path)
        assert b"4711" not in answer, path
        status = answer.split(b" ", 2)[1]
        # the page itself (whatever its query string) or a missing asset; anything else is refused (the
        # server matches the percent-decoded path)
        expected = (b"200", b"404") if is_ui_shell("GET", unquote(path.decode().split("?")[0])) else (b"401",)
        assert status in expected, (path, answer[:200])
    for method in (b"POST", b"PUT", b"DELETE", b"PATCH"):
        assert raw_get(server.url, b"/ui", method).startswith(b"HTTP/1.1 401")
        assert raw_get(server.url, b"/ui/static/ui.js", method).startswith(b"HTTP/1.1 401")
    # with the token, the same API answers
    assert httpx.get(f"{server.url}/v1/memories", headers={"Authorization": f"Bearer {ADMIN}"},
                     timeout=30).json()["memories"][0]["text"] == "The user's PIN is 4711"


@pytest.mark.parametrize(("method", "path", "shell"), [
    ("GET", "/ui", True), ("HEAD", "/ui", True), ("GET", "/ui/static/ui.js", True),
    ("POST", "/ui", False), ("GET", "/ui/", False), ("GET", "/ui/static/../x", False),
    ("GET", "/ui/static/a/../../v1/health", False), ("GET", "/ui/static", False), ("GET", "/uix", False),
    ("GET", "/v1/health", False), ("GET", "/ui/static/..\\v1", False),
])
def test_which_requests_are_the_shell(method, path, shell):
    assert is_ui_shell(method, path) is shell


def test_the_assets_ship_inside_the_package():
    ui = resources.files("brain.shells.api").joinpath("ui")
    assert ui.joinpath("index.html").is_file()
    for name in ASSETS:
        assert ui.joinpath("static", name).is_file()


def test_the_page_is_not_part_of_the_api_schema(tmp_path):
    schema = create_app(api_settings(tmp_path)).openapi()
    assert not [path for path in schema["paths"] if path.startswith("/ui")]
