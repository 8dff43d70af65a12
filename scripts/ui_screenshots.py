#!/usr/bin/env python3
"""Screenshots of the memory browser's main views, for the README: builds a demo store in a temporary
directory (the sample persona and knowledge base, a few memories, two conversations), serves it on a free
loopback port, drives Debian's Chromium with Playwright and writes PNGs to docs/img/.

Usage: .venv/bin/python scripts/ui_screenshots.py [--out docs/img] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import uvicorn
from playwright.sync_api import expect, sync_playwright

from brain.shells.api import create_app
from brain.config import Settings
from brain.app.core import Brain
from brain.app.core import open as open_brain
from brain.shells.cli.reports import ingest_text
from brain.features.ingest import ingest_paths
from brain.app.startup import startup

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TOKEN = "screenshot-token-0123456789"
VIEWPORT = {"width": 1280, "height": 860}

MEMORIES = [
    {"text": "The user commutes by train to Porto every weekday", "importance": 3, "tags": ["travel", "routine"]},
    {"text": "The user's passport expires in March 2027", "importance": 5, "tags": ["documents"]},
    {"text": "The user prefers answers in short bullet points", "importance": 4, "tags": ["preferences"]},
    {"text": "The user is learning Portuguese on the train", "importance": 2, "tags": ["travel", "languages"]},
    {"text": "The user's train pass renews on the first of each month", "importance": 3, "tags": ["travel"]},
    {"text": "Alice keeps her receipts as photos on her phone", "importance": 3, "tags": ["documents"],
     "entity": "alice"},
    {"text": "Alice is allergic to peanuts", "importance": 5, "tags": ["health"], "entity": "alice"},
    {"text": "Bruno plays the cello on Thursday evenings", "importance": 2, "tags": ["hobbies"], "entity": "bruno"},
    {"text": "The user once lived in Lisbon", "importance": 2, "tags": ["places"], "status": "retracted"},
]
EXCHANGES = [
    ("I'm off to Porto again tomorrow morning.", "Safe travels! Want me to check the train times?"),
    ("Yes please, the earliest one after seven.", "The 7:09 Alfa Pendular gets you there at 9:55."),
    ("Can you remind me to renew my train pass?", "I will remind you on the first of next month."),
    ("Also, my passport: when does it expire?", "March 2027, so you have plenty of time."),
    ("Great. Anything I should pack?", "Your pass, a charger and the book you are reading."),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(app):
    """uvicorn serving ``app`` in a thread of this process on a free loopback port; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def seed(brain: Brain) -> None:
    startup(brain=brain, persona_path=ROOT / "persona.md")
    report = ingest_paths(brain.store, [ROOT / "config" / "kb"])
    if not report.ok:
        raise SystemExit(ingest_text(report))
    ids = brain.store.upsert_docs([{"type": "memory", "source": "chat", **m} for m in MEMORIES])
    # a fact that changed, so a memory has a history to show
    brain.store.supersede(ids[0], "The user commutes to Porto by bus since the line closed for works", kind="update")
    for user, assistant in EXCHANGES:
        brain.chat.record_exchange("conv-porto-trip", user, assistant)
    brain.chat.record_exchange("conv-alice-receipts", "Where did I put the receipt for the printer?",
                               "You keep receipts as photos on your phone: look in the album from May.",
                               entity="alice")
    brain.chat.wait_for_summaries(120)


def shoot(url: str, token_url: str, out: Path, chromium: str) -> list[Path]:
    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(20_000)

        def save(name: str, *, full_page: bool = False) -> None:
            path = out / f"ui-{name}.png"
            page.screenshot(path=str(path), full_page=full_page)
            written.append(path)

        page.goto(f"{url}/ui#memories")
        expect(page.locator("#memory-list li.memory").first).to_be_visible()
        save("memories")

        page.get_by_label("Search").fill("when do I travel by train?")
        page.get_by_label("Entity", exact=True).first.fill("alice")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#memories-note")).to_contain_text("ranked by score")
        save("search")

        second = page.locator("#memory-list li.memory").nth(1)
        second.get_by_role("button", name="Edit").click()
        save("edit")

        page.goto(f"{url}/ui#memories")
        page.reload()  # the search above is still in the form: the plain list, newest first
        changed = page.locator("#memory-list li.memory").filter(has=page.get_by_role("button", name="History")).first
        changed.get_by_role("button", name="History").click()
        expect(changed.locator(".chain > li")).to_have_count(2)
        changed.evaluate("row => row.scrollIntoView({block: 'center'})")
        save("history")

        page.goto(f"{url}/ui#conversations")
        page.get_by_label("Open a conversation by id").fill("conv-porto-trip")
        page.get_by_role("button", name="Open", exact=True).click()
        expect(page.locator("#conversation-items li.summary").first).to_be_visible()
        save("conversations")

        page.goto(f"{url}/ui#knowledge")
        page.wait_for_load_state("networkidle")
        for summary in page.locator(".kb-file summary").all()[:1]:
            summary.click()
        save("knowledge")

        page.goto(f"{url}/ui#try")
        page.get_by_label("User message").fill("Which train should I take, and is my pass still valid?")
        page.locator("#try-conversation").fill("conv-porto-trip")
        page.get_by_role("button", name="Build context").click()
        expect(page.locator(".dropped")).to_be_visible()
        save("try", full_page=True)

        page.goto(f"{url}/ui#forget")
        page.get_by_label("Entity name").fill("bruno")
        page.get_by_role("button", name="Forget…").click()
        page.get_by_role("button", name="Yes, forget").click()
        expect(page.locator("#forget-result, #forget-error").filter(has_text=re.compile(r"\S"))).to_be_visible()
        save("forget")

        page.goto(f"{url}/ui#health")
        expect(page.locator(".status-line")).to_be_visible()
        save("health")

        locked = browser.new_page(viewport={"width": 1280, "height": 520})
        locked.goto(f"{token_url}/ui")
        expect(locked.get_by_label("API token")).to_be_focused()
        path = out / "ui-token.png"
        locked.screenshot(path=str(path))
        written.append(path)
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="brain-ui-") as tmp:
        # the summariser is unreachable on purpose: the conversation shows extractive fallback summaries
        demo = {"data_dir": Path(tmp) / "data", "ollama_host": "http://127.0.0.1:9", "summary_retries": 0,
                "summary_backoff_seconds": 0, "summary_every_n": 2, "context_max_chars": 1500}
        settings = Settings(**demo)
        with open_brain(settings) as brain:
            seed(brain)
            locked = create_app(Settings(**demo, api_token=TOKEN), brain=brain)
            with serving(create_app(settings, brain=brain)) as url, serving(locked) as token_url:
                for path in shoot(url, token_url, args.out, args.chromium):
                    print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
