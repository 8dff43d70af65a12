"""The proxy's rules without HTTP: the text of a message, the entity a request names, the history kept for a
conversation brain has not recorded, and an event stream read across chunk boundaries."""

from __future__ import annotations

import pytest

from brain.model.errors import ValidationError
from brain.shells.api.chat_proxy import (
    StreamedAnswer,
    _newest_fitting,
    last_user_index,
    message_text,
    requested_entity,
)
from brain.shells.api.ollama_format import StreamTranslator, openai_request
from tests.proxy.openai_stub import stream_events


def test_the_text_of_a_message_leaves_images_out():
    parts = [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    assert message_text({"role": "user", "content": parts}) == "What is this?"
    assert message_text({"role": "assistant", "content": None}) == ""


def test_the_last_user_message_with_text_is_the_question():
    messages = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "second"}, {"role": "tool", "content": "{}", "tool_call_id": "c"}]
    assert last_user_index(messages) == 2
    with pytest.raises(ValidationError, match="no user message with text"):
        last_user_index([{"role": "system", "content": "x"}])


def test_the_entity_named_by_header_or_user_must_agree():
    assert requested_entity(None, "alice") == "alice" and requested_entity("bob", None) == "bob"
    assert requested_entity("alice", "alice") == "alice" and requested_entity("  ", None) is None
    with pytest.raises(ValidationError, match="differ"):
        requested_entity("alice", "bob")


def test_the_history_kept_starts_at_a_user_message_and_fits_the_budget():
    history = [{"role": "user", "content": "u" * 50}, {"role": "assistant", "content": None, "tool_calls": []},
               {"role": "tool", "content": "t" * 10, "tool_call_id": "c"}, {"role": "assistant", "content": "a" * 10},
               {"role": "user", "content": "u" * 10}, {"role": "assistant", "content": "b" * 10}]
    assert _newest_fitting(history, 1000) == history
    assert _newest_fitting(history, 40) == history[4:]  # the tool result is not kept without its call
    assert _newest_fitting(history, 5) == []


def test_a_stream_read_in_pieces_of_any_size_gives_the_whole_text():
    raw = b"".join(stream_events("the whole answer, word by word"))
    for size in (1, 7, 64, len(raw)):
        answer = StreamedAnswer()
        for i in range(0, len(raw), size):
            answer.feed(raw[i : i + size])
        assert answer.done and answer.text == "the whole answer, word by word"
    cut = StreamedAnswer()
    cut.feed(raw[: len(raw) // 2])
    assert not cut.done


def test_ollama_lines_end_done_only_when_the_upstream_was_done():
    raw = b"".join(stream_events("one two"))
    whole = StreamTranslator("m")
    lines = whole.feed(raw) + whole.finish()
    assert b'"done":true' in lines.splitlines()[-1] and b'"done":true' not in lines.splitlines()[0]
    broken = StreamTranslator("m")
    tail = (broken.feed(raw[: len(raw) // 2]) + broken.finish()).splitlines()[-1]
    assert b'"error"' in tail and b'"done":true' not in tail


def test_ollama_options_map_to_openai_fields_and_bad_ones_are_named():
    body = openai_request({"model": "m", "messages": [{"role": "user", "content": "x"}], "format": "json",
                           "options": {"num_predict": 9, "top_k": 3}})
    assert body["max_tokens"] == 9 and "top_k" not in body and body["response_format"] == {"type": "json_object"}
    with pytest.raises(ValidationError, match="options"):
        openai_request({"model": "m", "messages": [{"role": "user", "content": "x"}], "options": [1]})
