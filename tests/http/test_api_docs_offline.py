"""/docs (Swagger UI) renders in a real headless Chromium with every request outside the server refused, as
on a machine without internet: its script and styles come from the server itself. /redoc is off."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from brain.shells.api import create_app
from tests.conftest import LiveServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None

executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
if sync_playwright is None or executable is None:
    pytest.skip("browser tests need Playwright and Debian's Chromium at /usr/bin/chromium (apt-get install chromium)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except PlaywrightError as exc:  # present but unable to start (a broken install)
            pytest.skip(f"Chromium did not start: {str(exc).splitlines()[0]}")
        yield launched
        launched.close()


@pytest.fixture
def offline_page(browser, api_store):
    """A page on brain's server that can reach nothing else; ``page.refused`` lists what it tried."""
    with LiveServer(create_app(api_store.settings, store=api_store)) as server:
        context = browser.new_context()
        page = context.new_page()
        page.refused = []
        page.base = server.url

        def only_the_server(route):
            if route.request.url.startswith(server.url + "/"):
                route.continue_()
            else:
                page.refused.append(route.request.url)
                route.abort("internetdisconnected")

        context.route("**/*", only_the_server)
        try:
            yield page
        finally:
            context.close()


@pytest.mark.browser
def test_swagger_ui_renders_every_operation_offline(offline_page):
    page = offline_page
    page.goto(f"{page.base}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("brain", timeout=30_000)
    context_operation = page.locator('.opblock-post:has(.opblock-summary-path[data-path="/v1/context"])')
    expect(context_operation).to_have_count(1)
    context_operation.locator(".opblock-summary").click()  # opened: the request body schema is rendered
    expect(context_operation.locator(".opblock-body")).to_contain_text("user_message")
    assert page.refused == []


def test_the_page_names_no_other_host_and_redoc_is_off(api_store):
    with LiveServer(create_app(api_store.settings, store=api_store)) as server:
        html = httpx.get(f"{server.url}/docs", timeout=30).text
        assert "http://" not in html and "https://" not in html
        script = httpx.get(f"{server.url}/docs/assets/swagger-ui-bundle.js", timeout=30)
        assert script.status_code == 200 and len(script.content) > 100_000
        assert httpx.get(f"{server.url}/redoc", timeout=30).status_code == 404
