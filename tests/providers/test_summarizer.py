"""Summarisers: the Ollama chat summariser against a real loopback server, and the extractive fallback."""

from __future__ import annotations

import time

import pytest

from brain.config import Settings
from brain.providers.summarizers import (
    ExtractiveSummarizer,
    OllamaSummarizer,
    SummarizerError,
    SummarizerUnavailable,
    TurnText,
    transcript,
)
from brain.providers.summarizers.base import MAX_SUMMARY_CHARS, clean_summary
from brain.wiring import get_summarizer
from tests.ollama_stub import dead_url, stub_chat_reply

TURNS = [
    TurnText(1, "user", "I moved to Lisbon in May 2023.  My cat is called Miso."),
    TurnText(2, "assistant", "Nice! How do you like Lisbon so far?"),
    TurnText(3, "user", "ok thanks"),
    TurnText(4, "assistant", "You're welcome."),
]


def test_ollama_summary_comes_from_the_chat_endpoint(stub):
    summarizer = OllamaSummarizer("llama3.2:3b", host=stub.url, timeout=5)
    text = summarizer.summarize(TURNS)
    (request,) = stub.chat_requests()
    assert request.body["model"] == "llama3.2:3b"
    assert request.body["stream"] is False
    assert request.body["options"]["temperature"] == 0
    user = request.body["messages"][-1]["content"]
    assert "turns 1 to 4" in user and transcript(TURNS) in user
    assert "User: I moved to Lisbon in May 2023. My cat is called Miso." in user  # whitespace collapsed
    assert text == stub_chat_reply(request.body["messages"])
    assert summarizer.name == "ollama/llama3.2:3b"


def test_ollama_down_is_unavailable_with_what_to_do():
    summarizer = OllamaSummarizer(host=dead_url(), timeout=2)
    with pytest.raises(SummarizerUnavailable, match="ollama serve"):
        summarizer.summarize(TURNS)
    with pytest.raises(SummarizerUnavailable, match="cannot reach"):
        summarizer.ping()


def test_slow_ollama_times_out_as_unavailable(stub):
    stub.chat_delay = 3.0
    summarizer = OllamaSummarizer(host=stub.url, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(SummarizerUnavailable, match="BRAIN_SUMMARY_TIMEOUT"):
        summarizer.summarize(TURNS)
    assert time.monotonic() - started < 2.5  # gave up at its timeout, not when the server answered


@pytest.mark.slow  # waits out a real timeout of seconds
def test_hung_ollama_times_out_at_the_callers_limit(stub):
    stub.hang = True  # accepts the connection, never answers
    summarizer = OllamaSummarizer(host=stub.url, timeout=120)
    started = time.monotonic()
    with pytest.raises(SummarizerUnavailable, match=r"timed out: no answer within 0\.5 s"):
        summarizer.summarize(TURNS, timeout=0.5)
    assert time.monotonic() - started < 30  # the call's limit, not the summariser's 120 s
    assert len(stub.chat_requests()) == 1
    with pytest.raises(SummarizerUnavailable, match=r"timed out: no answer to /api/tags"):
        summarizer.ping()


def test_a_longer_call_limit_than_the_summarizers_own_is_capped(stub):
    stub.chat_delay = 3.0
    summarizer = OllamaSummarizer(host=stub.url, timeout=0.3)
    with pytest.raises(SummarizerUnavailable, match=r"no answer within 0\.3 s"):
        summarizer.summarize(TURNS, timeout=60)


def test_the_extractive_summary_takes_a_timeout_too():
    assert ExtractiveSummarizer().summarize(TURNS, timeout=0.001) == ExtractiveSummarizer().summarize(TURNS)


@pytest.mark.parametrize("mode", ["not-json", "wrong-shape", "empty"])
def test_garbage_answers_are_summarizer_errors(stub, mode):
    stub.chat_mode = mode
    with pytest.raises(SummarizerError) as info:
        OllamaSummarizer(host=stub.url, timeout=5).summarize(TURNS)
    assert not isinstance(info.value, SummarizerUnavailable)  # it answered: the server is there


def test_server_error_is_unavailable(stub):
    stub.chat_mode = "error"
    with pytest.raises(SummarizerUnavailable, match="500"):
        OllamaSummarizer(host=stub.url, timeout=5).summarize(TURNS)


def test_model_not_pulled(stub):
    summarizer = OllamaSummarizer("qwen2.5:7b", host=stub.url, timeout=5)
    with pytest.raises(SummarizerUnavailable, match="ollama pull qwen2.5:7b"):
        summarizer.summarize(TURNS)
    with pytest.raises(SummarizerUnavailable, match="ollama pull qwen2.5:7b"):
        summarizer.ping()
    OllamaSummarizer("llama3.2:3b", host=stub.url).ping()  # the pulled one passes


def test_no_turns_is_an_error(stub):
    with pytest.raises(SummarizerError, match="no turns"):
        OllamaSummarizer(host=stub.url).summarize([])
    assert stub.chat_requests() == []


def test_clean_summary_drops_reasoning_and_caps_length():
    assert clean_summary("<think>\nlet me see\n</think>\n  The user  moved.\n") == "The user moved."
    long = " ".join(f"Sentence number {i} is here." for i in range(400))
    cut = clean_summary(long)
    assert len(cut) <= MAX_SUMMARY_CHARS and cut.endswith(".") and long.startswith(cut)


def test_the_summary_deadline_setting():
    from brain.model.errors import ConfigError

    assert Settings().summary_deadline_seconds == 60.0
    assert Settings(summary_deadline_seconds=5).summary_deadline_seconds == 5.0
    with pytest.raises(ConfigError, match="BRAIN_SUMMARY_DEADLINE_SECONDS"):
        Settings(summary_deadline_seconds=0)


def test_get_summarizer_reads_settings():
    summarizer = get_summarizer(
        Settings(summary_model="phi3:mini", ollama_host="http://127.0.0.1:1", summary_timeout=7)
    )
    assert (summarizer.model, summarizer.host, summarizer.timeout) == ("phi3:mini", "http://127.0.0.1:1", 7)


# ---- extractive ------------------------------------------------------------------------------------------
def test_extractive_is_deterministic_verbatim_and_bounded():
    summarizer = ExtractiveSummarizer(max_chars=120)
    first = summarizer.summarize(TURNS)
    assert first == summarizer.summarize(list(TURNS))
    assert len(first) <= 120
    sentences = [
        "I moved to Lisbon in May 2023.",
        "My cat is called Miso.",
        "Nice!",
        "How do you like Lisbon so far?",
        "ok thanks",
        "You're welcome.",
    ]
    picked = [s for s in sentences if s in first]
    assert picked and first.startswith("User: I moved to Lisbon in May 2023.")  # the most specific sentence, first
    assert "ok thanks" not in first  # small talk loses to facts
    positions = [first.index(s) for s in picked]
    assert positions == sorted(positions)  # conversation order


def test_extractive_keeps_everything_that_fits():
    text = ExtractiveSummarizer(max_chars=2000).summarize(TURNS)
    assert text == (
        "User: I moved to Lisbon in May 2023. User: My cat is called Miso. Assistant: Nice! "
        "Assistant: How do you like Lisbon so far? User: ok thanks Assistant: You're welcome."
    )


def test_extractive_cuts_a_single_long_sentence():
    long = TurnText(1, "user", "word " * 200)
    text = ExtractiveSummarizer(max_chars=60).summarize([long])
    assert len(text) <= 60 and text.startswith("User: word") and text.endswith("…")


def test_brain_summarizer_setting_chooses_the_summariser():
    from brain.config import Settings
    from brain.model.errors import ConfigError
    from brain.providers.summarizers import ExtractiveSummarizer, OllamaSummarizer

    assert isinstance(get_summarizer(Settings()), OllamaSummarizer)
    assert isinstance(get_summarizer(Settings(summarizer="extractive")), ExtractiveSummarizer)
    with pytest.raises(ConfigError, match="BRAIN_SUMMARIZER='gpt'"):
        Settings(summarizer="gpt")
