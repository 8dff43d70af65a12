"""Memory formation through the shells: the conversations listing's formation counts, the HTTP route that
re-runs a conversation's batches (with entity-bound tokens), ``brain memory extract``, and the formation
figures of ``brain stats`` and ``brain health``. The model is the Ollama test server answering from a script."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

import brain
import brain.store.facade
from brain.app.browse import list_conversations
from brain.app.core import Brain, open_store
from brain.config import Settings
from brain.features.chat import ChatMemory
from brain.model.errors import Forbidden
from brain.ops import Caller, ServedOperations
from brain.ops.served import ServerLink
from brain.shells.api import create_app
from brain.shells.cli import cli
from tests.conftest import LiveServer
from tests.http.test_api_security import ADMIN, TOKENS, write_tokens

MODEL = "llama3.2:3b"  # the test server's chat model
PEANUTS = "Alice is allergic to peanuts"


def _summary(store, conversation: str, first: int, index: int, state: str | None, **extra) -> str:
    meta = {"formation": state, **extra} if state is not None else extra
    return store.upsert_summary(
        conversation,
        f"summary of turns {first}-{first + 1}",
        turn_range=f"{first}-{first + 1}",
        summary_index=index,
        **meta,
    )


def answer(*facts: dict) -> str:
    return json.dumps({"facts": list(facts)})


def fact(text: str, entity: str, **fields) -> dict:
    return {
        "text": text,
        "importance": 4,
        "tags": ["health"],
        "entity": entity,
        "action": "add",
        "turns": [1],
        **fields,
    }


class Model:
    """The test server's chat answers: a summary request gets a fixed summary, a formation request (the one
    sent with a JSON schema as ``format``) the next of :attr:`answers` (none left: no facts)."""

    def __init__(self, stub):
        self.answers: list[str] = []
        self.asked: list[dict] = []
        stub.chat_script = [self.reply] * 500

    def reply(self, body: dict) -> str:
        if not body.get("format"):
            return "The user talked about food."
        self.asked.append(body)
        return self.answers.pop(0) if self.answers else answer()


def formation_settings(tmp_path, stub, **overrides) -> Settings:
    fields = dict(
        data_dir=tmp_path / "data",
        ollama_host=stub.url,
        summary_model=MODEL,
        formation=True,
        formation_model=MODEL,
        formation_retries=0,
        summary_retries=0,
        summary_backoff_seconds=0,
        summary_every_n=1,
    )
    return Settings(**{**fields, **overrides})


# ---- the conversations listing -------------------------------------------------------------------


def test_the_listing_counts_each_conversations_windows_by_formation_state(embedded_store):
    store = embedded_store
    store.upsert_turn("conv-a", "hi", "hello", user_ts="2026-01-02T00:00:00Z")
    store.upsert_turn("conv-b", "hi", "hello", user_ts="2026-01-01T00:00:00Z")
    for index, state in enumerate(["done", "failed", "pending", "pending", None], start=1):
        _summary(store, "conv-a", 2 * index - 1, index, state)
    listed = {c.conversation_id: c for c in list_conversations(store)}
    assert listed["conv-a"].formation == {"pending": 2, "failed": 1, "done": 1}
    assert listed["conv-a"].summaries == 5  # a window formation never ran for is a summary, not a batch
    assert listed["conv-b"].formation == {"pending": 0, "failed": 0, "done": 0}
    assert listed["conv-a"].to_dict()["formation"] == {"pending": 2, "failed": 1, "done": 1}


# ---- HTTP ----------------------------------------------------------------------------------------


@pytest.fixture
def forming(tmp_path, local_embedder, stub):
    """A server with formation on (the test server as its model), the admin token and entity-bound tokens."""
    path = tmp_path / "tokens"
    write_tokens(path)
    settings = formation_settings(tmp_path, stub, api_token=ADMIN, api_tokens_file=path)
    model = Model(stub)
    with open_store(settings, embedder=local_embedder) as store:
        chat = ChatMemory(store, settings, start_worker=False)
        try:
            with LiveServer(create_app(settings, store=store, chat=chat)) as server:
                clients = {
                    who: httpx.Client(
                        base_url=server.url,
                        timeout=60,
                        headers={"Authorization": f"Bearer {ADMIN if who == 'admin' else TOKENS[who]}"},
                    )
                    for who in ("admin", *TOKENS)
                }
                try:
                    yield store, chat, model, clients
                finally:
                    for client in clients.values():
                        client.close()
        finally:
            chat.close()


def ok(response: httpx.Response, status: int = 200) -> dict:
    assert response.status_code == status, response.text
    return response.json()


def test_a_failed_batch_is_listed_in_health_and_re_run_over_http_by_its_owner(forming):
    store, chat, model, c = forming
    alice, bob, admin = c["alice"], c["bob"], c["admin"]
    conversation = ok(
        alice.post(
            "/v1/exchanges",
            json={"user_text": "I am allergic to peanuts.", "assistant_text": "Noted: no peanuts for you."},
        ),
        201,
    )["conversation_id"]
    model.answers += ["this is not JSON", "still not JSON"]  # the answer and its one repair
    assert chat.wait_for_summaries(60)  # the summary, then its window's formation: failed
    [listed] = ok(alice.get("/v1/conversations"))["conversations"]
    assert listed["formation"] == {"pending": 0, "failed": 1, "done": 0}
    health = ok(admin.get("/v1/health"))["formation"]
    assert health["enabled"] is True and health["model"] == f"ollama/{MODEL}"
    assert (health["pending"], health["failed"], health["done"]) == (0, 1, 0) and health["last_error"]
    # a token bound to an entity learns whether formation is on, not which batches failed nor why
    assert ok(bob.get("/v1/health"))["formation"] == {"enabled": True, "model": f"ollama/{MODEL}", "off_reason": None}
    # another entity's token cannot run it, nor can the admin acting for that entity: not found, nothing asked
    asked = len(model.asked)
    for refused in (
        bob.post(f"/v1/conversations/{conversation}/extract"),
        admin.post(f"/v1/conversations/{conversation}/extract", params={"entity": "bob"}),
        alice.post("/v1/conversations/conv-nobody/extract"),
    ):
        assert refused.status_code == 404 and refused.json()["error"] == "not_found", refused.text
    assert alice.post(f"/v1/conversations/{conversation}/extract", params={"entity": "bob"}).status_code == 403
    assert alice.post("/v1/conversations/not-an-id/extract").status_code == 422
    assert len(model.asked) == asked
    good = answer(fact(PEANUTS, "alice", importance=5))
    model.answers.append(good)
    report = ok(alice.post(f"/v1/conversations/{conversation}/extract"))
    assert (report["done"], report["failed"], report["added"], report["updated"]) == (1, 0, 1, 0)
    [batch] = report["batches"]
    assert batch["status"] == "done" and batch["turn_range"] == "1-2" and batch["facts"] == 1
    assert report["eval_tokens"] == len(good.split()) and report["prompt_tokens"] > 0
    assert report["mirror_status"] == "ok"
    [formed] = store.retrieve_memories("what is Alice allergic to?", entity="alice", relevance=False)
    assert formed.text == PEANUTS and formed.metadata["scope"] == "entity:alice"
    assert formed.metadata["source"] == "chat" and formed.metadata["conversation_id"] == conversation
    assert ok(alice.get("/v1/conversations"))["conversations"][0]["formation"] == {"pending": 0, "failed": 0, "done": 1}
    # nothing pending or failed: nothing to run; again: the done window once more (the same fact: merged)
    assert ok(alice.post(f"/v1/conversations/{conversation}/extract"))["batches"] == []
    model.answers.append(good)
    again = ok(admin.post(f"/v1/conversations/{conversation}/extract", params={"again": "true"}))
    assert (again["done"], again["added"], again["merged"]) == (1, 0, 1)
    assert len(store.get(type="memory")) == 1


def test_the_cli_beside_a_server_runs_formation_through_it(forming):
    """What `brain memory extract` does while `brain serve` holds the store: the server runs the batches
    (:class:`ServedOperations`), one conversation or each in turn, and the reports add up."""
    store, chat, model, c = forming
    conversations = [
        ok(c["alice"].post("/v1/exchanges", json={"user_text": text, "assistant_text": "Noted."}), 201)[
            "conversation_id"
        ]
        for text in ("I am allergic to peanuts.", "I moved to Lisbon.")
    ]
    model.answers += ["not JSON"] * 4  # both windows fail first (answer and repair each)
    assert chat.wait_for_summaries(60)
    server_url = str(c["admin"].base_url).rstrip("/")
    with ServedOperations(ServerLink(server_url, token=ADMIN)) as served:
        model.answers.append(answer(fact(PEANUTS, "alice")))
        one = served.conversations.extract(conversations[0])
        assert (one.done, one.failed, one.added) == (1, 0, 1) and [b.turn_range for b in one.batches] == ["1-2"]
        model.answers.append(answer(fact("Alice lives in Lisbon", "alice")))
        every = served.conversations.extract()
        assert (every.done, every.added, len(every.batches)) == (1, 1, 1)
        assert every.batches[0].conversation_id == conversations[1] and every.eval_tokens > 0
        # a bound caller's rules hold on the client's side too
        with pytest.raises(Forbidden, match="needs the admin"):
            served.bound_to(Caller("alice")).conversations.extract()
    assert sorted(m.text for m in store.get(type="memory")) == [PEANUTS, "Alice lives in Lisbon"]


def test_extract_with_formation_off_is_a_503_naming_the_setting(tmp_path, local_embedder, stub):
    settings = formation_settings(tmp_path, stub, formation=False)
    Model(stub)
    with open_store(settings, embedder=local_embedder) as store:
        with Brain(store) as opened:
            opened.chat.record_exchange("conv-off", "I am allergic to peanuts.", "Noted.")
            with LiveServer(create_app(settings, brain=opened)) as server:
                refused = httpx.post(f"{server.url}/v1/conversations/conv-off/extract", timeout=60)
                health = httpx.get(f"{server.url}/v1/health", timeout=60).json()["formation"]
    assert refused.status_code == 503 and refused.json()["error"] == "not_configured"
    assert "BRAIN_FORMATION" in refused.json()["message"]
    assert health["enabled"] is False and "BRAIN_FORMATION" in health["off_reason"]


# ---- the CLI -------------------------------------------------------------------------------------


@pytest.fixture
def cli_forming(tmp_path, monkeypatch, local_embedder, stub):
    """The CLI's settings from the environment, formation on with the test server as its model; returns
    (the model's script, a function recording one exchange and running its window as a server would)."""
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "defaults.env").touch()
    env = {
        "BRAIN_DATA_DIR": str(tmp_path / "data"),
        "OLLAMA_HOST": stub.url,
        "BRAIN_SUMMARY_MODEL": MODEL,
        "BRAIN_FORMATION": "true",
        "BRAIN_FORMATION_MODEL": MODEL,
        "BRAIN_FORMATION_RETRIES": "0",
        "BRAIN_SUMMARY_RETRIES": "0",
        "BRAIN_SUMMARY_BACKOFF_SECONDS": "0",
        "BRAIN_SUMMARY_EVERY_N": "1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    model = Model(stub)

    def record(conversation: str, user: str, *answers: str) -> None:
        model.answers += answers
        with brain.open(start_worker=False) as opened:
            opened.chat.record_exchange(conversation, user, "Noted.", entity="alice")
            assert opened.chat.wait_for_summaries(60)

    return model, record


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_memory_extract_re_runs_a_failed_batch_and_reports_it(cli_forming):
    model, record = cli_forming
    record("conv-peanuts", "I am allergic to peanuts.", "not JSON", "not JSON either")
    stats = json.loads(run("--json", "stats").stdout)["formation"]
    assert (stats["pending"], stats["failed"], stats["done"]) == (0, 1, 0)
    # failing again: the report says why, exit 1 naming the command that re-runs it
    model.answers += ["still not JSON", "nor this"]
    failed = run("memory", "extract", "--conversation", "conv-peanuts")
    assert failed.exit_code == 1
    assert "1 batch: 0 done, 1 failed" in failed.stdout and "conv-peanuts turns 1-2: failed" in failed.stdout
    assert failed.stderr.strip() == (
        "error: 1 batch not formed; re-run `brain memory extract --conversation conv-peanuts` once the model answers"
    )
    model.answers.append(answer(fact(PEANUTS, "alice")))
    done = run("memory", "extract", "--conversation", "conv-peanuts")
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "1 batch: 1 done, 0 failed, 0 waiting for the model; 1 memory added, 0 merged, 0 updated, 0 contradicted"
    )
    assert lines[1].startswith("model: ") and "prompt tokens" in lines[1]
    assert lines[2] == "  conv-peanuts turns 1-2: done, 1 fact, 3 attempts, accepted"  # attempts: over every run
    assert [m["text"] for m in json.loads(run("--json", "memory", "list").stdout)] == [PEANUTS]
    # nothing left to run, in this conversation or any
    assert run("memory", "extract").stdout.startswith("no formation batch to run")
    model.answers.append(answer(fact(PEANUTS, "alice")))
    again = json.loads(run("--json", "memory", "extract", "--again").stdout)
    assert (again["done"], again["merged"], again["added"]) == (1, 1, 0)
    totals = json.loads(run("--json", "stats").stdout)["formation"]
    assert (totals["pending"], totals["failed"], totals["done"], totals["facts"]) == (0, 0, 1, 1)
    assert "formation   batches 0 pending, 0 failed, 1 done; 1 fact;" in run("stats").stdout


def test_memory_extract_without_formation_or_with_a_bad_id_says_what_to_change(cli_forming, monkeypatch):
    bad = run("memory", "extract", "--conversation", "not a conversation")
    assert bad.exit_code == 2 and "--conversation" in bad.stderr
    run("memory", "add", "One fact")  # a store to open
    unknown = run("memory", "extract", "--conversation", "conv-nobody")
    assert unknown.exit_code == 1 and unknown.stderr.startswith("error: no conversation 'conv-nobody' is stored")
    monkeypatch.setenv("BRAIN_FORMATION", "false")
    off = run("memory", "extract")
    assert (
        off.exit_code == 1
        and off.stderr.startswith("error: memory formation is off")
        and "BRAIN_FORMATION" in off.stderr
    )


def test_health_shows_formation_on_with_its_batches_or_off_with_why(cli_forming, monkeypatch):
    _, record = cli_forming
    record("conv-health", "I am allergic to peanuts.", "not JSON", "not JSON either")
    report = json.loads(run("--json", "health").stdout)
    assert report["formation"]["enabled"] is True and report["formation"]["failed"] == 1
    assert report["counts"]["summary"] == 1 and report["status"] in ("ok", "degraded")
    text = run("health").stdout
    assert f"formation   on, ollama/{MODEL}: batches 0 pending, 1 failed, 0 done;" in text
    assert "last failure: " in text and text.startswith("status      ")
    monkeypatch.setenv("BRAIN_FORMATION", "false")
    off = run("health")
    assert off.exit_code == 0 and "formation   off: BRAIN_FORMATION is false" in off.stdout


def test_the_health_line_says_when_the_batches_cannot_be_read():
    from brain.shells.cli.reports import formation_health_line

    down = {"enabled": True, "model": f"ollama/{MODEL}", "off_reason": None, "error": "the Chroma store is unreachable"}
    assert formation_health_line(down) == f"on, ollama/{MODEL}: batches unknown (the Chroma store is unreachable)"
