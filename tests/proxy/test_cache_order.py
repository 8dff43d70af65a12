"""The proxy's prompt in cache order: each prompt starts exactly as the previous one did, so a model server that
keeps a prompt's beginning reads only what is new; the memory still reaches the model, each message gets the
part chosen for it, and a part sent before shows nothing that has since been forgotten."""

from __future__ import annotations

import httpx

from brain.app.core import open_store
from tests.conftest import api_settings
from tests.proxy.conftest import TOKENS, serve_proxy, wait_for
from tests.proxy.openai_stub import MODEL, brain_part, reply_to, user_said

FACTS = [
    ("Alice is allergic to peanuts", 5),
    ("Alice's sister Maria lives in Porto", 3),
    ("Alice plays the cello in an amateur orchestra", 3),
    ("Alice works night shifts as a nurse at the city hospital", 3),
    ("Alice is training for a half marathon in October", 3),
    ("Alice's cat is called Miso", 3),
]
MESSAGES = [
    "Hi! I need some ideas for dinner tonight.",
    "Could I make a satay sauce?",
    "I'm visiting my sister next month, any tips for the trip?",
    "What should I pack for the flight?",
    "My orchestra has a concert soon and I'm nervous.",
    "How long should I practise the cello each day?",
    "I'm exhausted after my shifts this week.",
    "How do I sleep well during the day?",
    "My running plan says 15 km on Sunday.",
    "What should I eat before a long run?",
    "My cat keeps waking me up at 5am.",
    "Thanks, that was helpful!",
]


def rendered(messages: list[dict]) -> str:
    """A prompt as a chat template lays it out: each message's role and content in order."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)


def shared_share(previous: str, current: str) -> float:
    """How much of the previous prompt the current one repeats from its beginning, byte for byte."""
    common = 0
    for a, b in zip(previous.encode(), current.encode()):
        if a != b:
            break
        common += 1
    return common / len(previous.encode())


def recorded_turns(server, conversation_id: str) -> int:
    answer = httpx.get(
        f"{server.url}/v1/conversations/{conversation_id}/turns",
        headers={"Authorization": f"Bearer {TOKENS['alice']}"},
        timeout=30,
    )
    return len(answer.json()["turns"]) if answer.status_code == 200 else 0  # 404 until the first is recorded


def converse(server, messages: list[str], conversation: str, *, recorded: int = 0) -> str:
    """Sends ``messages`` one at a time as a client that resends its history would, each after the previous
    exchange is recorded; returns the conversation's id."""
    history: list[dict] = []
    conversation_id = conversation
    for i, text in enumerate(messages):
        answer = httpx.post(
            server.url + "/v1/chat/completions",
            headers={"Authorization": f"Bearer {TOKENS['alice']}", "X-Brain-Conversation": conversation},
            json={"model": MODEL, "messages": [*history, {"role": "user", "content": text}]},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        conversation_id = answer.headers["x-brain-conversation"]
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply_to(text)}]
        wanted = recorded + 2 * (i + 1)
        wait_for(lambda c=conversation_id, n=wanted: recorded_turns(server, c) == n)
    return conversation_id


def test_each_prompt_repeats_the_previous_one_from_its_beginning(proxy_store, upstream):
    for text, importance in FACTS:
        proxy_store.upsert_memory(text, importance=importance, scope="entity:alice")
    proxy_store.upsert_memory("Bob's password hint is the name of his first boat", importance=5, scope="entity:bob")
    with serve_proxy(proxy_store, upstream) as server:
        converse(server, MESSAGES, "conv-cache-order")
    sent = upstream.chats()
    assert len(sent) == len(MESSAGES)
    prompts = [rendered(chat.messages) for chat in sent]
    shares = [shared_share(prompts[i - 1], prompts[i]) for i in range(1, len(prompts))]
    assert min(shares) >= 0.9, [round(s, 3) for s in shares]  # turns 2-12
    assert all(s == 1.0 for s in shares), [round(s, 3) for s in shares]  # nothing already sent is rewritten
    # the conversation is the recorded exchanges, as messages; the client's copy of them is not sent again
    last = sent[-1]
    assert last.said == [t for m in MESSAGES[:-1] for t in (m, reply_to(m))] + [MESSAGES[-1]]
    # each message got a part of its own, with the memory it needed; another entity's never
    parts = [brain_part(chat.messages[-1]["content"]) for chat in sent]
    assert "Alice is allergic to peanuts" in sent[0].system_text  # importance 5: kept in mind, in the stable part
    assert "sister Maria lives in Porto" in parts[2]
    assert "cello" in parts[4] or "cello" in parts[5]
    assert "night shifts" in parts[6] or "night shifts" in parts[7]
    assert all("boat" not in chat.body_text for chat in sent)


def test_a_part_sent_before_shows_nothing_since_forgotten(proxy_store, upstream):
    kept = proxy_store.upsert_memory("Alice's sister Maria lives in Porto", importance=3, scope="entity:alice")
    gone = proxy_store.upsert_memory("Alice's home address is 12 Rua das Flores", importance=3, scope="entity:alice")
    with serve_proxy(proxy_store, upstream) as server:
        converse(server, ["Where does my sister live, and what is my home address?"], "conv-forget")
        first = brain_part(upstream.chats()[-1].messages[-1]["content"])
        assert "Rua das Flores" in first and "Porto" in first
        proxy_store.delete([gone])
        converse(server, ["Thanks."], "conv-forget", recorded=2)
    again = upstream.chats()[-1]
    repeated = brain_part(again.messages[0]["content"])
    assert "Porto" in repeated and "Rua das Flores" not in again.body_text
    assert kept


def test_a_conversation_outgrowing_the_budget_moves_its_window_in_whole_steps(tmp_path, local_embedder, upstream):
    settings = api_settings(tmp_path, context_max_chars=600, summary_every_n=2)
    long = [f"Message {i}: " + "tell me more about the weather in the mountains " * 2 for i in range(10)]
    with open_store(settings, embedder=local_embedder) as store, serve_proxy(store, upstream) as server:
        converse(server, long, "conv-window")
    sent = upstream.chats()
    firsts = [user_said(next(m["content"] for m in chat.messages if m["role"] == "user")) for chat in sent]
    starts = sorted({long.index(f) for f in firsts})
    assert starts[0] == 0 and len(starts) > 1  # it moved
    assert all(s % 2 == 0 for s in starts)  # by whole summary windows (2 exchanges: 4 turns = 2 messages)
    prompts = [rendered(chat.messages) for chat in sent]
    moves = sum(shared_share(prompts[i - 1], prompts[i]) < 1.0 for i in range(1, len(prompts)))
    assert moves == len(starts) - 1  # the prompt changed its beginning only when the window moved
    assert all(len("".join(user_said(s) for s in chat.said)) <= 600 + len(long[0]) * 2 for chat in sent)
