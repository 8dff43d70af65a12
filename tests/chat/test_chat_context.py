"""brain.features.chat.context: sections -> budget -> prompt with no store at all (the module is pure)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import brain.features.chat.context as context_module
from brain.features.chat import DROP_PRIORITY, SECTIONS, ContextItem, TokenCounter, assemble_context, render_prompt


def item(doc_id: str, text: str, similarity: float = 0.0, **meta) -> ContextItem:
    return ContextItem(doc_id, text, meta, {"similarity": similarity})


def ranked_sections() -> dict[str, list[ContextItem]]:
    """Each section best first, as the facade gathers them (recent turns newest first)."""
    return {
        "persona": [
            item("p2", "Be brief.", 0.9, heading="Tone", position=2),
            item("p1", "I am Brainy.", 0.1, position=1),
        ],
        "faq": [item("f1", "Open 9 to 17.", 0.8), item("f2", "Returns within 30 days.", 0.5)],
        "memory": [item("m1", "Alice is allergic to cats.", 0.7, entity="alice"), item("m2", "Likes tea.", 0.2)],
        "summary": [
            item("s2", "Talked about food.", 0.6, summary_index=2, turn_range="5-8"),
            item("s1", "Said hello.", 0.3, summary_index=1, turn_range="1-4"),
        ],
        "related": [item("t3", "My cat is Miso.", 0.5, role="user", turn_index=3, timestamp="2024-05-01T10:00:00")],
        "turn": [
            item("t10", "Sure.", role="assistant", turn_index=10),
            item("t9", "Can I eat?", role="user", turn_index=9),
        ],
    }


def test_everything_fits_in_reading_order():
    ctx = assemble_context(ranked_sections(), conversation_id="conv-x", entity="alice", max_chars=100_000)
    assert [i.id for i in ctx.persona] == ["p1", "p2"]  # file order, not similarity
    assert [i.id for i in ctx.summary] == ["s1", "s2"]  # conversation order
    assert [i.id for i in ctx.turn] == ["t9", "t10"]  # oldest first
    assert [i.id for i in ctx.faq] == ["f1", "f2"] and [i.id for i in ctx.memory] == ["m1", "m2"]  # best first
    assert ctx.dropped == [] and ctx.tokens is None
    assert ctx.prompt == render_prompt(ctx.sections()) and ctx.chars == len(ctx.prompt)
    assert (ctx.conversation_id, ctx.entity, ctx.enabled) == ("conv-x", "alice", True)
    assert "Tone:\nBe brief." in ctx.prompt and "- Alice is allergic to cats. (about alice)" in ctx.prompt
    assert "- (turns 1-4) Said hello." in ctx.prompt and "User (turn 3, 2024-05-01): My cat is Miso." in ctx.prompt
    assert ctx.prompt.endswith("## Recent turns\nUser: Can I eat?\nAssistant: Sure.")


def test_the_budget_drops_whole_items_weakest_first_by_section_priority():
    full = assemble_context(ranked_sections(), max_chars=100_000)
    keep = {"persona": full.persona, "turn": full.turn, "memory": full.memory[:1]}
    limit = len(render_prompt(keep))
    tight = assemble_context(ranked_sections(), max_chars=limit)
    assert tight.chars <= limit and tight.chars == len(tight.prompt) and tight.prompt == render_prompt(keep)
    assert [(d["section"], d["id"]) for d in tight.dropped] == [
        ("faq", "f2"),
        ("faq", "f1"),
        ("summary", "s1"),
        ("summary", "s2"),
        ("related", "t3"),
        ("memory", "m2"),
    ]
    assert {d["reason"] for d in tight.dropped} == {"max_chars"}
    nothing = assemble_context(ranked_sections(), max_chars=0)  # everything goes, persona last, oldest turn first
    order = [d["section"] for d in nothing.dropped]
    assert order == sorted(order, key=lambda s: -DROP_PRIORITY.index(s))
    assert [d["id"] for d in nothing.dropped if d["section"] == "turn"] == ["t9", "t10"]
    assert nothing.prompt == "" and nothing.chars == 0


def test_token_budget_counts_add_up_to_the_prompt():
    counter = TokenCounter()
    full = assemble_context(ranked_sections(), max_chars=100_000, max_tokens=100_000, counter=counter)
    assert full.tokens == counter.count([full.prompt])[0]
    tight = assemble_context(ranked_sections(), max_chars=100_000, max_tokens=full.tokens // 2, counter=counter)
    assert tight.tokens <= full.tokens // 2 and tight.tokens == counter.count([tight.prompt])[0]
    assert tight.dropped and {d["reason"] for d in tight.dropped} == {"max_tokens"}


def test_missing_sections_are_empty():
    ctx = assemble_context({"memory": [item("m1", "Likes tea.")]}, max_chars=1000)
    assert ctx.prompt == "## What you remember\n- Likes tea." and set(ctx.sections()) == set(SECTIONS)


@pytest.mark.parametrize("module", ["rag_store", "mirror", "store", "chromadb"])
def test_the_context_module_does_not_reach_the_store(module):
    tree = ast.parse(Path(context_module.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {name for name in imported if module in name.split(".")}
