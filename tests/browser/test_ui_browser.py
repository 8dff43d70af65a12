"""The memory browser in a real headless Chromium (Debian's, driven by Playwright), against brain served by
uvicorn in this process on a real embedded store with the real embedder."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import httpx
import pytest

from brain.app.core import Brain, open_store
from brain.shells.api import create_app
from tests.conftest import LiveServer, api_settings

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_executable() -> str | None:
    if CHROMIUM.exists():
        return str(CHROMIUM)
    return shutil.which("chromium")


try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None

if sync_playwright is None or chromium_executable() is None:
    pytest.skip(
        "browser tests need Playwright and Debian's Chromium at /usr/bin/chromium (apt-get install chromium)",
        allow_module_level=True,
    )

ADMIN = "admin-token-0123456789abcdef"

CAT = "The user's cat is called Miso and sleeps on the radiator"
DOG = "The user's dog is called Rex and hates the postman"
TEA = "The user prefers green tea over coffee in the morning"
ALPS = "The user went hiking in the Alps last summer"
PYRENEES = "The user went hiking in the Pyrenees last summer"


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        except PlaywrightError as exc:  # present but unable to start (a broken install)
            pytest.skip(f"Chromium did not start: {str(exc).splitlines()[0]}")
        yield launched
        launched.close()


class Served:
    """brain over a real store, served in this process, with a browser page on it."""

    def __init__(self, brain: Brain, server: LiveServer, page):
        self.brain, self.store, self.server, self.page = brain, brain.store, server, page
        self.url = server.url
        self.requests: list = []
        page.on("request", lambda request: self.requests.append(request))

    def api(self, method: str, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {ADMIN}"} if self.store.settings.api_token else {}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kwargs)

    def open(self, view: str = "memories") -> None:
        self.page.goto(f"{self.url}/ui#{view}")

    def memory_rows(self):
        return self.page.locator("#memory-list li.memory")

    def row(self, doc_id: str):
        return self.page.locator(f'#memory-list li.memory[data-id="{doc_id}"]')

    def search(self, query: str) -> None:
        self.page.get_by_label("Search").fill(query)
        self.page.get_by_role("button", name="Show").click()
        expect(self.page.locator("#memories-note")).to_contain_text("ranked by score")


@pytest.fixture
def serve(tmp_path, local_embedder, browser):
    """``serve(**settings)``: a fresh store and server, and a new browser context (empty sessionStorage)."""
    with contextlib.ExitStack() as stack:

        def start(memories=(), **overrides) -> Served:
            settings = api_settings(tmp_path, **overrides)
            store = stack.enter_context(open_store(settings, embedder=local_embedder))
            brain = stack.enter_context(Brain(store))
            ids = store.upsert_docs([{"type": "memory", **m} for m in memories]) if memories else []
            server = stack.enter_context(LiveServer(create_app(settings, brain=brain)))
            context = browser.new_context()
            stack.callback(context.close)
            page = context.new_page()
            page.set_default_timeout(20_000)
            served = Served(brain, server, page)
            served.ids = ids
            return served

        yield start


SEEDED = [
    {"text": CAT, "importance": 3, "tags": ["pets"]},
    {"text": DOG, "importance": 3, "tags": ["pets"]},
    {"text": TEA, "importance": 2, "tags": ["food"]},
    {"text": ALPS, "importance": 2, "tags": ["travel"]},
    {"text": PYRENEES, "importance": 2, "tags": ["travel"]},
]


# ---- memories ---------------------------------------------------------------------------------------


def test_the_page_loads_and_lists_the_memories_offline(serve):
    served = serve(SEEDED + [{"text": "<img src=x onerror=\"document.title='owned'\"> is a tag", "importance": 1}])
    served.open()
    expect(served.page.locator("#app")).to_be_visible()
    expect(served.page.locator("#login")).to_be_hidden()
    expect(served.memory_rows()).to_have_count(6)
    # text from the store is shown as text, never run as HTML
    expect(served.page.get_by_text("<img src=x onerror")).to_be_visible()
    assert served.page.title() != "owned" and served.page.locator("#memory-list img").count() == 0
    row = served.row(served.ids[0])
    expect(row.locator(".facts .importance")).to_have_text("importance 3")
    expect(row.locator(".tags")).to_contain_text("pets")
    expect(row.locator(".created")).to_contain_text("created 20")
    expect(row.locator(".last-used")).to_have_text("last used never")
    # every request the page made went to brain itself: no CDN, nothing remote
    assert served.requests and all(r.url.startswith(served.url) for r in served.requests)


def test_a_search_shows_the_expected_memory_first_with_its_score_parts(serve):
    served = serve(SEEDED)
    served.open()
    served.search("what is the name of my cat?")
    expect(served.memory_rows().first).to_contain_text(CAT)
    [best, *_] = served.store.retrieve_memories("what is the name of my cat?", 50)
    assert best.text == CAT
    first = served.memory_rows().first
    for part in ("similarity", "importance", "recency"):
        value = getattr(best, f"{part}_part")
        expect(first.locator(f'.legend[data-part="{part}"]')).to_have_text(f"{part} {value:.3f}")
    expect(first.locator(".score-total")).to_have_text(f"score {best.score:.3f}")
    bar = first.locator(".scorebar")
    expect(bar).to_have_attribute("aria-label", re.compile(rf"^score {best.score:.3f} = similarity "))
    widths = [
        bar.locator(f".part.{p}").evaluate("e => e.getBoundingClientRect().width")
        for p in ("similarity", "importance", "recency")
    ]
    assert widths[0] > 0 and widths[1] > 0  # the bar is drawn, in proportion to the parts
    assert widths[0] / widths[1] == pytest.approx(best.similarity_part / best.importance_part, rel=0.05)


def test_editing_importance_in_place_changes_the_order(serve):
    served = serve(SEEDED)
    served.open()
    query = "hiking in the mountains"
    served.search(query)
    ranked = [h.id for h in served.store.retrieve_memories(query, 2)]
    expect(served.memory_rows().first).to_have_attribute("data-id", ranked[0])
    second = served.row(ranked[1])
    second.get_by_role("button", name="Edit").click()
    second.get_by_label("Importance", exact=True).select_option("5")
    second.get_by_role("button", name="Save").click()
    expect(served.page.locator("#memories-note")).to_have_text("Saved.")
    expect(served.memory_rows().first).to_have_attribute("data-id", ranked[1])
    expect(served.memory_rows().first.locator(".facts .importance")).to_have_text("importance 5")
    assert served.store.retrieve_memories(query, 1)[0].id == ranked[1]
    assert served.store.get([ranked[1]])[0].metadata["importance"] == 5


def test_editing_text_and_tags_goes_through_the_validated_write_path(serve):
    served = serve(SEEDED)
    served.open()
    row = served.row(served.ids[2])
    row.get_by_role("button", name="Edit").click()
    row.get_by_label("Text").fill("The user prefers black coffee, never tea")
    row.get_by_label("Tags (comma-separated)").fill("food, drinks")
    row.get_by_role("button", name="Save").click()
    expect(served.page.locator("#memories-note")).to_have_text("Saved.")
    [doc] = served.store.get([served.ids[2]])
    assert doc.text == "The user prefers black coffee, never tea" and doc.metadata["tags"] == ["food", "drinks"]
    served.search("coffee")  # re-embedded: the new text is what ranks
    expect(served.memory_rows().first).to_have_attribute("data-id", served.ids[2])


def test_a_refused_edit_shows_the_apis_message_and_changes_nothing(serve):
    served = serve(SEEDED)
    served.open()
    too_long = "x" * 300
    refused = served.api("PATCH", f"/v1/memories/{served.ids[0]}", json={"tags": [too_long]})
    assert refused.status_code == 422
    row = served.row(served.ids[0])
    row.get_by_role("button", name="Edit").click()
    row.get_by_label("Tags (comma-separated)").fill(too_long)
    row.get_by_role("button", name="Save").click()
    expect(row.get_by_role("alert")).to_have_text(refused.json()["message"])
    assert served.store.get([served.ids[0]])[0].metadata["tags"] == ["pets"]


def test_retracting_a_memory_in_place_takes_it_out_of_search(serve):
    served = serve(SEEDED)
    served.open()
    row = served.row(served.ids[0])
    row.get_by_role("button", name="Edit").click()
    row.get_by_label("Status").select_option("retracted")
    row.get_by_role("button", name="Save").click()
    expect(served.row(served.ids[0])).to_have_count(0)  # the list shows current memories
    served.page.get_by_label("Status").first.select_option("history")
    served.page.get_by_role("button", name="Show").click()
    expect(served.row(served.ids[0]).locator(".status")).to_have_text("status retracted")
    assert served.store.get([served.ids[0]])[0].metadata["status"] == "retracted"
    served.page.get_by_role("button", name="Clear").click()
    served.search("what is the name of my cat?")
    expect(served.page.locator("#memory-list")).to_contain_text("No memory is relevant enough to this search")
    expect(served.row(served.ids[0])).to_have_count(0)
    assert served.ids[0] not in [h.id for h in served.store.retrieve_memories("cat", 50, relevance=False)]


def test_delete_asks_first_then_the_memory_is_gone_everywhere(serve):
    served = serve(SEEDED)
    served.open()
    served.search("what is the name of my cat?")
    cat = served.ids[0]
    row = served.row(cat)
    row.get_by_role("button", name="Delete").click()
    row.get_by_role("button", name="Cancel").click()  # asked, not done
    expect(row).to_be_visible()
    assert served.store.get([cat])
    row.get_by_role("button", name="Delete").click()
    row.get_by_role("button", name="Yes, delete").click()
    expect(served.page.locator("#memories-note")).to_have_text("Deleted.")
    expect(served.row(cat)).to_have_count(0)
    assert cat not in [h.id for h in served.store.retrieve_memories("what is the name of my cat?", 50, relevance=False)]
    assert cat not in served.store.mirror.ids() and served.store.mirror.get([cat]) == []
    assert served.store.get([cat]) == []


def test_the_keyboard_alone_can_search_edit_and_change_views(serve):
    served = serve(SEEDED)
    served.open()
    expect(served.memory_rows()).to_have_count(5)
    served.page.get_by_label("Search").focus()
    served.page.keyboard.type("green tea")
    served.page.keyboard.press("Enter")
    expect(served.memory_rows().first).to_contain_text(TEA)
    first = served.memory_rows().first
    first.get_by_role("button", name="Edit").focus()
    served.page.keyboard.press("Enter")
    expect(first.get_by_label("Text")).to_be_focused()
    served.page.keyboard.press("Tab")
    expect(first.get_by_label("Importance", exact=True)).to_be_focused()
    # the views are real buttons in the tab order
    served.page.get_by_role("button", name="Memories").focus()
    for _ in range(5):
        served.page.keyboard.press("Tab")
    expect(served.page.get_by_role("button", name="Store health")).to_be_focused()
    served.page.keyboard.press("Enter")
    expect(served.page.locator("#view-health")).to_be_visible()
    expect(served.page.locator("#view-memories")).to_be_hidden()


def test_without_a_query_the_list_is_newest_first_and_filters_apply(serve):
    served = serve(
        [
            {"text": f"memory number {n}", "importance": 1 + n % 5, "timestamp": f"2026-01-{n + 1:02d}T10:00:00+00:00"}
            for n in range(6)
        ]
    )
    served.open()
    expect(served.memory_rows().first).to_contain_text("memory number 5")
    expect(served.memory_rows().last).to_contain_text("memory number 0")
    served.page.locator("#f-importance").select_option("5")
    served.page.get_by_role("button", name="Show").click()
    expect(served.memory_rows()).to_have_count(1)
    expect(served.memory_rows().first).to_contain_text("memory number 4")


def test_a_superseded_memory_opens_its_history_oldest_first_with_the_current_one_marked(serve):
    paris = "The user lives in Paris"
    served = serve([{"text": paris, "importance": 4, "timestamp": "2025-01-10T09:00:00+00:00"}, {"text": CAT}])
    old_id = served.ids[0]
    berlin = served.store.supersede(old_id, "The user moved to Berlin", kind="update", at="2025-06-01T12:00:00+00:00")
    munich = served.store.supersede(
        berlin.new.id, "The user lives in Munich, never in Berlin", kind="contradict", at="2025-07-01T12:00:00+00:00"
    )
    expected = [d.text for d in served.store.history(old_id)]
    assert expected == [paris, "The user moved to Berlin", "The user lives in Munich, never in Berlin"]
    served.open()
    expect(served.memory_rows()).to_have_count(2)  # the current ones: Munich and the cat
    served.page.locator("#f-status").select_option("history")
    served.page.get_by_role("button", name="Show").click()
    expect(served.memory_rows()).to_have_count(4)
    # only a memory that is part of a chain offers its history
    expect(served.row(served.ids[1]).get_by_role("button", name="History")).to_have_count(0)
    # the superseded memory is listed (not ranked) and its history is one click away
    served.page.locator("#f-status").select_option("superseded")
    served.page.get_by_role("button", name="Show").click()
    expect(served.memory_rows()).to_have_count(2)
    row = served.row(old_id)
    expect(row.locator(".status")).to_have_text("status superseded")
    row.get_by_role("button", name="History").click()
    expect(row.get_by_role("button", name="History")).to_have_attribute("aria-expanded", "true")
    versions = row.locator(".history .chain > li")
    expect(versions).to_have_count(3)
    expect(versions.locator(".text")).to_have_text(expected)
    expect(versions.nth(0).locator(".valid-from")).to_have_text("valid from 2025-01-10 09:00:00 UTC")
    expect(versions.nth(0).locator(".valid-until")).to_have_text("valid until 2025-06-01 12:00:00 UTC")
    expect(versions.nth(0).locator(".change")).to_have_text("first version")
    expect(versions.nth(0).locator(".this")).to_have_text("this memory")
    expect(versions.nth(1).locator(".change")).to_have_text("change update")
    expect(versions.nth(1).locator(".valid-until")).to_have_text("valid until 2025-07-01 12:00:00 UTC")
    expect(versions.nth(2).locator(".change")).to_have_text("change contradict")
    expect(versions.nth(2).locator(".valid-from")).to_have_text("valid from 2025-07-01 12:00:00 UTC")
    expect(versions.nth(2).locator(".valid-until")).to_have_text("still holds")
    expect(versions.locator(".status")).to_have_text(["status superseded", "status superseded", "status active"])
    # exactly one version is current: the last one
    expect(row.locator('.chain > li[aria-current="true"]')).to_have_count(1)
    expect(versions.nth(2)).to_have_attribute("aria-current", "true")
    expect(versions.nth(2).locator(".current-badge")).to_have_text("current")
    expect(versions.nth(2)).to_have_attribute("data-id", munich.new.id)
    # closing hides it again
    row.get_by_role("button", name="History").click()
    expect(row.locator(".history")).to_be_hidden()


def test_the_current_memory_of_a_chain_shows_the_same_history(serve):
    served = serve([{"text": "The user's favourite colour is blue"}])
    done = served.store.supersede(served.ids[0], "The user's favourite colour is green")
    served.open()
    row = served.row(done.new.id)
    row.get_by_role("button", name="History").click()
    versions = row.locator(".history .chain > li")
    expect(versions.locator(".text")).to_have_text(
        ["The user's favourite colour is blue", "The user's favourite colour is green"]
    )
    expect(versions.nth(1)).to_have_attribute("aria-current", "true")
    expect(versions.nth(1).locator(".this")).to_have_text("this memory")
    expect(versions.nth(0)).not_to_have_attribute("aria-current", "true")


# ---- conversations ----------------------------------------------------------------------------------


def record_conversation(served: Served, exchanges: int = 3) -> str:
    conversation = "conv-ui-test"
    for n in range(1, exchanges + 1):
        served.brain.chat.record_exchange(
            conversation, f"question number {n} about the garden", f"answer number {n} about the roses"
        )
    assert served.brain.chat.wait_for_summaries(60)
    return conversation


def test_opening_a_conversation_shows_its_turns_in_order_with_summaries_between(serve):
    served = serve(summary_every_n=2)  # a summary every 4 turns; the summariser is unreachable: extractive fallbacks
    conversation = record_conversation(served)
    served.open("conversations")
    served.page.get_by_label("Open a conversation by id").fill(conversation)
    served.page.get_by_role("button", name="Open", exact=True).click()
    items = served.page.locator("#conversation-items > li")
    expect(served.page.locator("#conversation-title")).to_have_text(f"Conversation {conversation}")
    expect(items).to_have_count(7)
    texts = items.locator(".label").all_inner_texts()
    assert [t.split(" ")[0] for t in texts[:4]] == ["1.", "2.", "3.", "4."]
    assert texts[4].startswith("Summary of turns 1–4") and "extractive fallback" in texts[4]
    assert [t.split(" ")[0] for t in texts[5:]] == ["5.", "6."]
    expect(items.nth(0)).to_contain_text("question number 1 about the garden")
    expect(items.nth(1)).to_contain_text("answer number 1 about the roses")
    expect(items.nth(4)).to_have_class(re.compile(r"\bfallback\b"))


def test_an_unknown_conversation_shows_the_apis_message(serve):
    served = serve()
    served.open("conversations")
    served.page.get_by_label("Open a conversation by id").fill("conv-nobody")
    served.page.get_by_role("button", name="Open", exact=True).click()
    message = served.api("GET", "/v1/conversations/conv-nobody/turns").json()["message"]
    expect(served.page.locator("#conversations-error")).to_have_text(message)


def test_conversations_are_listed_by_last_activity(serve):
    served = serve(summary_every_n=2)
    older = record_conversation(served)
    served.brain.chat.record_exchange("conv-newer", "a newer question", "a newer answer")
    served.open("conversations")
    buttons = served.page.locator("#conversation-list .open-conversation")
    expect(buttons).to_have_count(2)
    expect(buttons.nth(0)).to_have_text("conv-newer")
    expect(buttons.nth(1)).to_have_text(older)
    buttons.nth(1).click()
    expect(served.page.locator("#conversation-items > li")).to_have_count(7)


def seed_formation(store, error: str) -> None:
    """conv-forming: 8 turns, its windows 1-2 done, 3-4 failed and 5-6 pending; conv-quiet: none of them."""
    for n in range(4):
        store.upsert_turn("conv-forming", f"question {n}", f"answer {n}", user_ts=f"2026-03-0{n + 1}T10:00:00+00:00")
    store.upsert_turn("conv-quiet", "hello", "hi", user_ts="2026-03-01T09:00:00+00:00")
    for index, (first, state, extra) in enumerate(
        [
            (1, "done", {"formation_facts": 2}),
            (3, "failed", {"formation_attempts": 3, "formation_error": error}),
            (5, "pending", {}),
        ],
        start=1,
    ):
        store.upsert_summary(
            "conv-forming",
            f"summary of turns {first}-{first + 1}",
            turn_range=f"{first}-{first + 1}",
            summary_index=index,
            formation=state,
            **extra,
        )


def test_conversations_show_their_pending_and_failed_memory_formation(serve):
    served = serve()
    store = served.store
    error = "the model answered 'not json' (not JSON): ..."
    seed_formation(store, error)
    served.open("conversations")
    listed = served.page.locator("#conversation-list > li")
    expect(listed).to_have_count(2)
    forming = served.page.locator('#conversation-list > li[data-id="conv-forming"]')
    expect(forming.locator('.formation .badge[data-state="pending"]')).to_have_text("1 pending")
    expect(forming.locator('.formation .badge[data-state="failed"]')).to_have_text("1 failed")
    # a conversation with nothing pending or failed has no formation line
    expect(served.page.locator('#conversation-list > li[data-id="conv-quiet"] .formation')).to_have_count(0)
    forming.get_by_role("button", name="conv-forming").click()
    badges = served.page.locator("#conversation-items li.summary .badge.formation")
    expect(badges).to_have_text(
        ["memories formed: 2", "memory formation failed after 3 attempts", "memory formation pending"]
    )
    expect(served.page.locator("#conversation-items .formation-error")).to_have_text(error)
    # formation is off on this server: the button says so in the API's words
    served.page.get_by_role("button", name="Form memories now").click()
    message = served.api("POST", "/v1/conversations/conv-forming/extract").json()["message"]
    expect(served.page.locator("#formation-result")).to_have_text(message)
    # a conversation with nothing pending or failed has no button
    served.page.locator('#conversation-list .open-conversation[data-id="conv-quiet"]').click()
    expect(served.page.locator("#conversation-title")).to_have_text("Conversation conv-quiet")
    expect(served.page.get_by_role("button", name="Form memories now")).to_be_hidden()


def test_forming_memories_from_the_browser_runs_the_pending_and_failed_batches(serve):
    # formation on, its model unreachable: each batch waits for it, and the page says why
    served = serve(formation=True, formation_retries=0)
    seed_formation(served.store, "an earlier failure")
    served.open("conversations")
    served.page.locator('#conversation-list .open-conversation[data-id="conv-forming"]').click()
    served.page.get_by_role("button", name="Form memories now").click()
    result = served.page.locator("#formation-result")
    expect(result).to_contain_text("2 batches: 0 done, 0 failed, 2 waiting for the model; 0 added")
    expect(result).to_contain_text("3-4: ")
    expect(result).to_contain_text("OLLAMA_HOST")  # the unreachable model's error, as the API reported it
    forming = served.page.locator('#conversation-list > li[data-id="conv-forming"]')
    expect(forming.locator('.formation .badge[data-state="pending"]')).to_have_text("2 pending")
    expect(forming.locator('.formation .badge[data-state="failed"]')).to_have_count(0)
    expect(served.page.locator("#conversation-items li.summary .badge.formation")).to_have_text(
        ["memories formed: 2", "memory formation waiting for the model", "memory formation waiting for the model"]
    )


# ---- try a message ----------------------------------------------------------------------------------

LONG = [
    {"text": f"The user's {thing} " + "and some more words to make this memory long " * 2, "importance": 4}
    for thing in ("bicycle is a red one from 1984", "bicycle needs a new chain", "bicycle lives in the hall")
]


def test_trying_a_message_shows_the_sections_and_what_the_budget_dropped(serve):
    served = serve(LONG, context_max_chars=300)
    body = {"user_message": "tell me about my bicycle"}
    expected = served.api("POST", "/v1/context", json=body).json()
    assert expected["dropped"] and expected["sections"]["memory"]
    served.open("try")
    served.page.get_by_label("User message").fill(body["user_message"])
    served.page.get_by_role("button", name="Build context").click()
    memory = served.page.locator('.context-section[data-section="memory"] li')
    expect(memory).to_have_count(len(expected["sections"]["memory"]))
    expect(memory.first.locator(".text")).to_have_text(expected["sections"]["memory"][0]["text"])
    expect(memory.first.locator(".score-total")).to_have_text(
        f"score {expected['sections']['memory'][0]['scores']['score']:.3f}"
    )
    rows = served.page.locator(".dropped tbody tr")
    expect(rows).to_have_count(len(expected["dropped"]))
    expect(rows.first).to_contain_text(expected["dropped"][0]["id"])
    expect(rows.first).to_contain_text("character budget (RAG_CONTEXT_MAX_CHARS)")
    served.page.get_by_text("The prompt as rendered").click()
    expect(served.page.locator(".prompt pre")).to_have_text(expected["prompt"])


def test_a_refused_message_shows_the_apis_message(serve):
    served = serve()
    served.open("try")
    served.page.get_by_label("User message").fill("hello")
    served.page.locator("#view-try").get_by_label("Entity", exact=True).fill(" spaced ")  # trimmed by the page: valid
    served.page.get_by_label("Conversation id").fill("not a conversation id")
    served.page.get_by_role("button", name="Build context").click()
    message = served.api(
        "POST",
        "/v1/context",
        json={"user_message": "hello", "entity": "spaced", "conversation_id": "not a conversation id"},
    ).json()["message"]
    expect(served.page.locator("#try-error")).to_have_text(message)


# ---- the token --------------------------------------------------------------------------------------


def test_with_a_token_only_the_prompt_loads_until_the_token_is_given(serve):
    served = serve(SEEDED, api_token=ADMIN)
    responses = []
    served.page.on("response", lambda response: responses.append(response))
    served.open()
    expect(served.page.get_by_label("API token")).to_be_focused()
    expect(served.page.locator("#app")).to_be_hidden()
    api_calls = [r for r in responses if "/v1/" in r.url]
    assert api_calls and all(r.status == 401 for r in api_calls)
    assert CAT not in served.page.content() and served.memory_rows().count() == 0
    # a wrong token is refused and nothing loads
    served.page.get_by_label("API token").fill("wrong-token-0123456789abcdef")
    served.page.keyboard.press("Enter")
    expect(served.page.locator("#login-error")).to_contain_text("refused")
    expect(served.page.locator("#app")).to_be_hidden()
    assert all(r.status == 401 for r in responses if "/v1/" in r.url)
    # the right one: kept in this tab's sessionStorage, sent as a header, never in a URL
    served.page.get_by_label("API token").fill(ADMIN)
    served.page.keyboard.press("Enter")
    expect(served.memory_rows()).to_have_count(5)
    assert served.page.evaluate("() => Object.values(sessionStorage)") == [ADMIN]
    assert not any(ADMIN in r.url for r in served.requests)
    sent = [r for r in served.requests if "/v1/memories" in r.url]
    assert sent and all(r.headers.get("authorization") == f"Bearer {ADMIN}" for r in sent)
    # asked once: a reload in the same tab goes straight in
    served.page.reload()
    expect(served.memory_rows()).to_have_count(5)
    expect(served.page.locator("#login")).to_be_hidden()
    # and forgetting it brings the prompt back
    served.page.get_by_role("button", name="Forget token").click()
    expect(served.page.locator("#login")).to_be_visible()
    assert served.page.evaluate("() => Object.values(sessionStorage)") == []


# ---- views served by newer endpoints ----------------------------------------------------------------


def test_health_shows_the_embedder_mirror_and_summariser(serve):
    served = serve()
    served.open("health")
    # the fixture's Ollama summariser is unreachable, and optional: ok, in the ok colour, and a note says so
    status = served.page.locator(".status-line")
    expect(status).to_contain_text("Status: ok")
    expect(status).to_have_class(re.compile(r"\bok\b"))
    expect(served.page.locator(".health-note")).to_contain_text("optional summary model")
    expect(served.page.locator('.health-part[data-part="summariser"] dd[data-key="optional"]')).to_have_text("true")
    expect(served.page.locator('.health-part[data-part="notes"]')).to_have_count(0)
    embedder = served.page.locator('.health-part[data-part="embedder"]')
    expect(embedder).to_contain_text(served.store.embedder.name)
    expect(served.page.locator('.health-part[data-part="mirror"] dd[data-key="status"]').first).to_have_text("ok")
    expect(served.page.locator('.health-part[data-part="summariser"] dd[data-key="reachable"]')).to_be_visible()
    # memory formation: off here (BRAIN_FORMATION is false), and health says why
    formation = served.page.locator('.health-part[data-part="formation"]')
    expect(formation.locator("h3")).to_have_text("Memory formation")
    expect(formation.locator('dd[data-key="enabled"]')).to_have_text("false")
    expect(formation.locator('dd[data-key="off_reason"]')).to_contain_text("BRAIN_FORMATION")


def test_health_shows_counts_per_type_and_the_mirror_verify(serve):
    served = serve(SEEDED)
    served.open("health")
    counts = served.page.locator('.health-part[data-part="counts"]')
    expect(counts.locator('dd[data-key="memory"]')).to_have_text("5")
    expect(served.page.locator('.health-part[data-part="mirror"] dd[data-key="verify"]')).to_be_visible()


def test_knowledge_and_persona_are_shown_by_file_topic_and_section(serve, tmp_path):
    served = serve()
    served.store.upsert_docs(
        [{"type": "faq", "text": "Reset the router by holding the button", "kb_file": "net.md", "topic": "Router"}]
    )
    served.open("knowledge")
    details = served.page.locator(".kb-file")
    expect(details).to_have_count(1)
    expect(details.locator("summary")).to_contain_text("net.md")
    details.locator("summary").click()
    expect(details.locator("h4")).to_have_text("Router")
    expect(details.locator(".kb-docs li")).to_have_text("Reset the router by holding the button")


def test_forgetting_a_person_asks_first_and_shows_the_counts(serve):
    served = serve(
        [
            {"text": "Ann's sister lives in Lyon", "entity": "ann"},
            {"text": "Ann is vegetarian", "entity": "ann"},
            {"text": CAT},
        ]
    )
    served.open("forget")
    served.page.get_by_label("Entity name").fill("ann")
    served.page.get_by_role("button", name="Forget…").click()
    served.page.get_by_role("button", name="Cancel").click()
    assert len(served.store.get(served.ids)) == 3
    served.page.get_by_role("button", name="Forget…").click()
    served.page.get_by_role("button", name="Yes, forget").click()
    expect(served.page.locator("#forget-result")).to_contain_text("Forgot ann.")
    expect(served.page.locator('#forget-result dd[data-key="memory"]').first).to_have_text("2")
    assert [d.id for d in served.store.get(served.ids)] == [served.ids[2]]


def test_views_say_so_when_this_server_lacks_their_endpoint(tmp_path, local_embedder, browser):
    """An older brain without the listing endpoints: each view says what is missing instead of failing."""
    settings = api_settings(tmp_path)
    newer = {"/v1/conversations", "/v1/knowledge", "/v1/persona", "/v1/entities/{name:path}"}
    with open_store(settings, embedder=local_embedder) as store:
        app = create_app(settings, store=store)
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") not in newer]
        with LiveServer(app) as server:
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{server.url}/ui#conversations")
            expect(page.locator("#conversations-note")).to_contain_text("cannot list conversations")
            page.get_by_role("button", name="Knowledge & persona").click()
            expect(page.locator("#persona-note")).to_contain_text("cannot show the persona")
            expect(page.locator("#knowledge-note")).to_contain_text("cannot list the knowledge base")
            page.get_by_role("button", name="Forget a person").click()
            page.get_by_label("Entity name").fill("ann")
            page.get_by_role("button", name="Forget…").click()
            page.get_by_role("button", name="Yes, forget").click()
            expect(page.locator("#forget-error")).to_contain_text("cannot forget a person")
            context.close()


def test_trying_a_message_says_why_each_memory_is_there_and_what_the_floor_kept_out(serve):
    served = serve(SEEDED)
    served.open("try")
    body = {"user_message": "what is the name of my cat?"}
    expected = served.api("POST", "/v1/context", json=body).json()
    served.page.get_by_label("User message").fill(body["user_message"])
    served.page.get_by_role("button", name="Build context").click()
    section = served.page.locator('.context-section[data-section="memory"]')
    expect(section.locator("li").first.locator(".why")).to_have_text(expected["sections"]["memory"][0]["why"])
    gate = expected["relevance"]["memory"]
    expect(section.locator(".gate")).to_contain_text(
        f"{gate['below_floor']} of {gate['candidates']} below the relevance floor {gate['floor']:.3f}"
    )
    served.page.get_by_label("User message").fill("What is the boiling point of nitrogen?")
    served.page.get_by_role("button", name="Build context").click()
    expect(section.locator(".gate")).to_have_text(
        f"{len(SEEDED)} of {len(SEEDED)} below the relevance floor {gate['floor']:.3f}: "
        "nothing relevant to this message"
    )
    expect(section.locator("li")).to_have_count(0)


def test_the_browsers_search_lists_memories_in_the_order_of_the_prompt(serve):
    """What the memory section of a prompt shows for a message, the browser's search shows first, in that order."""
    served = serve(
        [
            {"text": "Alice is allergic to peanuts", "importance": 5, "scope": "entity:alice"},
            {"text": "Alice's passport expires in March 2027", "importance": 5, "scope": "entity:alice"},
            {"text": "Alice loves peanut butter cookies", "importance": 2, "scope": "entity:alice"},
            {"text": "Peanut oil is used in the office kitchen", "importance": 3},
            {"text": "Bob is allergic to peanuts", "importance": 5, "scope": "entity:bob"},
        ]
    )
    message = "Tell me what you know about peanuts"
    prompt = [i.id for i in served.brain.chat.build_context(None, message, entity="alice").memory]
    assert len(prompt) >= 2
    served.open()
    served.page.locator("#f-entity").fill("alice")
    served.search(message)
    expect(served.memory_rows()).to_have_count(len(prompt))
    assert [served.memory_rows().nth(i).get_attribute("data-id") for i in range(len(prompt))] == prompt


def test_trying_a_message_for_a_person_shows_what_is_always_kept_in_mind(serve):
    served = serve(
        [
            {"text": "Alice is allergic to peanuts", "importance": 5, "scope": "entity:alice"},
            {"text": "Alice likes jazz", "importance": 2, "scope": "entity:alice"},
        ]
    )
    served.open("try")
    served.page.get_by_label("User message").fill("What about dessert? Something with nuts?")
    served.page.locator("#try-entity").fill("alice")
    served.page.get_by_role("button", name="Build context").click()
    core = served.page.locator('.context-section[data-section="core"]')
    expect(core.locator("h3")).to_contain_text("Always kept in mind about this person")
    expect(core.locator("li")).to_have_count(1)
    expect(core.locator("li").first).to_contain_text("Alice is allergic to peanuts")
