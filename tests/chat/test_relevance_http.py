"""The HTTP and MCP views of a context say why each item is there and what the relevance floor kept out."""

from __future__ import annotations


def test_the_context_over_http_says_why_and_what_was_below_the_floor(live):
    for text, importance in (("Alice is allergic to peanuts.", 1), ("Alice's passport expires in March 2027.", 5)):
        assert (
            live.post("/v1/memories", json={"text": text, "importance": importance, "entity": "alice"}).status_code
            == 201
        )
    context = live.post("/v1/context", json={"user_message": "Can I eat peanut butter?", "entity": "alice"}).json()
    memory = context["sections"]["memory"]
    assert [m["text"] for m in memory] == ["Alice is allergic to peanuts."]
    assert memory[0]["why"].startswith("relevance ") and "floor" in memory[0]["why"]
    gate = context["relevance"]["memory"]
    assert gate["candidates"] == 2 and gate["below_floor"] == 1 and gate["shown"] == 1 and gate["floor"] > 0
    nothing = live.post(
        "/v1/context", json={"user_message": "What is the boiling point of nitrogen?", "entity": "alice"}
    ).json()
    assert nothing["sections"]["memory"] == [] and nothing["relevance"]["memory"]["below_floor"] == 2
