"""The context in cache order, its pure parts: where the conversation's window starts, what a recorded part
names, and which of those documents an earlier part shows again."""

from __future__ import annotations

from brain.features.chat.layout import (
    MAX_SHOWN,
    PART_CLOSING,
    PART_OPENING,
    Layout,
    parse_shown,
    parts_from_shown,
    shown_value,
    user_content,
    window_start,
)
from brain.model.results import Document


def test_the_window_starts_at_the_first_whole_step_from_which_the_turns_fit():
    assert window_start([10] * 8, 4, 100) == 0  # everything fits: from the start
    assert window_start([10] * 8, 4, 50) == 4  # the first step that fits
    assert window_start([10] * 8, 2, 50) == 4
    assert window_start([100] * 8, 4, 50) == 4  # none fits: the last step, so the latest turns are there
    assert window_start([], 4, 50) == 0
    # the same turns give the same start, and one more turn moves it only by a whole step
    starts = [window_start([10] * n, 4, 60) for n in range(1, 20)]
    assert all(s % 4 == 0 for s in starts) and starts == sorted(starts)


def test_a_recorded_part_is_read_back_and_anything_else_is_no_part():
    shown = [("memory", "doc-1"), ("faq", "doc-2"), ("related", "doc-3")]
    assert parse_shown(shown_value(shown)) == shown
    for junk in (None, 7, "", "not json", "{}", '[["memory"]]', '[["persona","doc-1"]]', '[["memory",""]]',
                 '[["memory",3]]'):
        assert parse_shown(junk) == [], junk
    many = shown_value([("memory", f"doc-{i}") for i in range(MAX_SHOWN + 50)])
    assert len(parse_shown(many)) == MAX_SHOWN  # a hand-written list is read no further than a part could be


def doc(doc_id: str, text: str, **metadata) -> Document:
    return Document(id=doc_id, text=text, metadata=metadata)


def test_an_earlier_part_shows_only_what_is_still_there_of_its_kind():
    documents = {
        "m1": doc("m1", "Alice keeps bees", type="memory", status="active"),
        "m2": doc("m2", "Alice lived in Paris", type="memory", status="superseded"),
        "f1": doc("f1", "Bees need water", type="faq"),
        "t1": doc("t1", "I love honey", type="turn", conversation_id="conv-1", role="user", turn_index=1),
        "t2": doc("t2", "elsewhere", type="turn", conversation_id="conv-2", role="user", turn_index=1),
        "x1": doc("x1", "typed as faq but a memory", type="memory"),
    }
    shown = [("memory", "m1"), ("memory", "m2"), ("memory", "gone"), ("faq", "f1"), ("faq", "x1"),
             ("related", "t1"), ("related", "t2")]
    sections = parts_from_shown(shown, documents, conversation_id="conv-1",
                                usable=lambda meta: meta.get("status") == "active")
    assert [i.id for i in sections["memory"]] == ["m1"]  # retired and deleted ones are left out
    assert [i.id for i in sections["faq"]] == ["f1"]  # an id of another type than its section is no part
    assert [i.id for i in sections["related"]] == ["t1"]  # another conversation's turn never


def test_a_user_message_carries_its_part_marked_and_the_messages_are_in_cache_order():
    assert user_content("", "hello") == "hello"
    assert user_content("## What you remember\n- x", "hello") == (
        f"{PART_OPENING}\n## What you remember\n- x\n{PART_CLOSING}\nhello"
    )
    layout = Layout(stable="## Persona\nBrain", conversation=[{"role": "user", "content": "hi"},
                                                             {"role": "assistant", "content": "hello"}],
                    part="## What you remember\n- x")
    messages = layout.messages("next")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"].endswith(f"{PART_CLOSING}\nnext")
    assert Layout.from_dict(layout.to_dict()) == layout
