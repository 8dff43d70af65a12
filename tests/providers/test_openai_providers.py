"""The OpenAI-compatible providers (BRAIN_SUMMARIZER=openai, openai/<model> embedders) against a stand-in server
on 127.0.0.1 that speaks OpenAI's API: the requests they send, the key (sent as the bearer token and nowhere
else), the ladder from failures to brain's errors, the bounded answer and the fall-back of ``response_format``.
The real model's behaviour is the model tier's (tests/llm/)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from brain.config import Settings
from brain.model.errors import (
    EmbedderError,
    EmbedderUnavailable,
    ExtractorError,
    SummarizerError,
    SummarizerUnavailable,
)
from brain.providers.embeddings import OpenAIEmbedder
from brain.providers.extractors import OpenAIExtractor
from brain.providers.summarizers import OpenAISummarizer, TurnText
from brain.wiring import get_embedder, get_extractor, get_summarizer
from tests.proxy.openai_stub import DIMENSION, MODEL, OpenAIStub, completion

KEY = "sk-test-0123456789abcdef"
TURNS = [TurnText(1, "user", "I moved to Berlin last spring."), TurnText(2, "assistant", "Nice, how is it?")]
SCHEMA = {"type": "object", "properties": {"facts": {"type": "array"}}, "required": ["facts"]}
ASK = [{"role": "user", "content": "Which facts?"}]


@pytest.fixture
def stub():
    with OpenAIStub() as server:
        yield server


def test_the_summariser_sends_the_summary_request_and_cleans_the_answer(stub):
    stub.script = ["<think>hmm</think>  The user   moved to Berlin. "]
    summary = OpenAISummarizer(MODEL, base_url=stub.url).summarize(TURNS)
    assert summary == "The user moved to Berlin."
    body = stub.chats()[-1].body
    assert body["model"] == MODEL and body["temperature"] == 0 and body["max_tokens"] > 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "User: I moved to Berlin last spring." in body["messages"][1]["content"]


def test_the_key_is_the_bearer_token_and_nothing_comes_from_the_environment(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-meant-for-another-service")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-elsewhere")
    OpenAISummarizer(MODEL, base_url=stub.url, api_key=KEY).summarize(TURNS)
    OpenAISummarizer(MODEL, base_url=stub.url).summarize(TURNS)
    with_key, without = (r.headers for r in stub.chats()[-2:])
    lowered = [{k.lower(): v for k, v in h.items()} for h in (with_key, without)]
    assert lowered[0]["authorization"] == f"Bearer {KEY}"
    assert "authorization" not in lowered[1]  # no key set: none sent, not the environment's
    assert not any("openai-organization" in h or "openai-project" in h for h in lowered)
    assert KEY not in repr(OpenAISummarizer(MODEL, base_url=stub.url, api_key=KEY))


def test_a_refused_key_is_unavailable_and_a_message_quoting_it_is_scrubbed(stub, caplog):
    stub.key = KEY
    with pytest.raises(SummarizerUnavailable, match="refused the key.*BRAIN_OPENAI_API_KEY"):
        OpenAISummarizer(MODEL, base_url=stub.url, api_key="sk-wrong").summarize(TURNS)
    stub.key = None
    # a refusal whose text is shown (a 400 is the server's reason), quoting the key as some servers do
    stub.script = [(400, f"invalid request from Bearer {KEY}")] * 3
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(SummarizerError) as info:
            OpenAISummarizer(MODEL, base_url=stub.url, api_key=KEY).summarize(TURNS)
    assert "invalid request from Bearer [BRAIN_OPENAI_API_KEY]" in str(info.value)
    assert KEY not in str(info.value) and KEY not in caplog.text


def test_a_server_that_is_down_or_failing_is_unavailable_naming_what_to_set(stub):
    with pytest.raises(SummarizerUnavailable, match="cannot reach .* BRAIN_OPENAI_BASE_URL"):
        OpenAISummarizer(MODEL, base_url="http://127.0.0.1:9/v1").summarize(TURNS)
    stub.script = [503]
    with pytest.raises(SummarizerUnavailable, match=r"failed \(503\)"):
        OpenAISummarizer(MODEL, base_url=stub.url).summarize(TURNS)
    stub.script = [404]
    with pytest.raises(SummarizerUnavailable, match="does not serve 'llama3.2:3b'.*BRAIN_SUMMARY_MODEL"):
        OpenAISummarizer(MODEL, base_url=stub.url).summarize(TURNS)
    with pytest.raises(SummarizerUnavailable, match="set BRAIN_OPENAI_BASE_URL"):
        OpenAISummarizer(MODEL, base_url=None)


def test_ping_checks_the_server_lists_the_model(stub):
    OpenAISummarizer(MODEL, base_url=stub.url).ping()
    with pytest.raises(SummarizerUnavailable, match="does not list 'qwen-7b'.*llama3.2:3b.*BRAIN_SUMMARY_MODEL"):
        OpenAISummarizer("qwen-7b", base_url=stub.url).ping()


def test_formation_asks_for_the_schema_and_falls_back_when_the_server_refuses_it(stub):
    extractor = OpenAIExtractor(MODEL, base_url=stub.url)
    stub.script = ['{"facts": []}']
    assert extractor.ask(ASK, SCHEMA).content == '{"facts": []}'
    first = stub.chats()[-1].body["response_format"]
    assert first == {"type": "json_schema", "json_schema": {"name": "facts", "schema": SCHEMA, "strict": True}}
    # a server that does not know json_schema (400), then not json_object either (422): asked again at once
    stub.script = [400, (500, "1 validation error: body.response_format.schema: extra"), 422, '{"facts": []}']
    answer = extractor.ask(ASK, SCHEMA)
    assert answer.content == '{"facts": []}'
    formats = [r.body.get("response_format") for r in stub.chats()[-4:]]
    assert formats[:3] == [
        {"type": "json_schema", "json_schema": {"name": "facts", "schema": SCHEMA, "strict": True}},
        {"type": "json_object", "schema": SCHEMA},
        {"type": "json_object"},
    ] and formats[3] is None
    assert extractor.format == "none"  # remembered: the next call does not try the refused forms again
    stub.script = ['{"facts": []}']
    extractor.ask(ASK, SCHEMA)
    assert "response_format" not in stub.chats()[-1].body


def test_a_server_error_is_not_mistaken_for_a_refused_format(stub):
    stub.script = [500, 401]
    extractor = OpenAIExtractor(MODEL, base_url=stub.url)
    for _ in range(2):
        with pytest.raises(ExtractorError):
            extractor.ask(ASK, SCHEMA)
    assert len(stub.chats()) == 2 and extractor.format == "json_schema"


def test_an_answer_past_the_byte_bound_is_not_read_and_a_cut_one_says_so(stub):
    extractor = OpenAIExtractor(MODEL, base_url=stub.url)
    stub.script = [json.dumps(completion("x" * (extractor.max_answer_bytes + 10))).encode()]
    with pytest.raises(ExtractorError, match="longer than 1,000,000 bytes") as info:
        extractor.ask(ASK, SCHEMA)
    assert getattr(info.value, "too_long", False)
    cut = completion('{"facts": [{"text": "Alice')
    cut["choices"][0]["finish_reason"] = "length"
    stub.script = [json.dumps(cut).encode()]
    assert extractor.ask(ASK, SCHEMA).truncated


def test_the_embedder_uses_embeddings_and_learns_the_dimension(stub):
    embedder = OpenAIEmbedder("nomic-embed-text", base_url=stub.url, batch_size=2)
    vectors = embedder.embed_documents(["one", "two", "three"])
    assert vectors.shape == (3, DIMENSION) and embedder.dimension == DIMENSION
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    sent = [r.body for r in stub.received if r.path == "/v1/embeddings"]
    assert [b["input"] for b in sent] == [["one", "two"], ["three"]]  # the batch size holds
    assert embedder.name == "openai/nomic-embed-text"


def test_an_embeddings_answer_of_the_wrong_shape_is_an_error(stub):
    embedder = OpenAIEmbedder("nomic-embed-text", base_url=stub.url)
    one = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}]}
    stub.script = [json.dumps(one).encode()]
    with pytest.raises(EmbedderError, match="1 embeddings for 2 texts"):
        embedder.embed_documents(["a", "b"])
    with pytest.raises(EmbedderUnavailable, match="BRAIN_OPENAI_BASE_URL"):
        OpenAIEmbedder("nomic-embed-text", base_url=None)


def test_the_settings_pick_the_openai_providers_and_name_the_server_once(stub):
    settings = Settings(
        summarizer="openai", openai_base_url=stub.url + "/", openai_api_key=KEY, formation=True,
        embedder="openai/nomic-embed-text",
    )
    assert isinstance(get_summarizer(settings), OpenAISummarizer)
    assert isinstance(get_extractor(settings), OpenAIExtractor)
    assert isinstance(get_embedder(settings), OpenAIEmbedder)
    # the proxy's upstream defaults to the model server, with its key
    assert settings.chat_upstream == stub.url
    assert settings.chat_upstream_key is not None and settings.chat_upstream_key.get_secret_value() == KEY
    assert KEY not in repr(settings) and KEY not in str(settings.model_dump())
    # another upstream named explicitly never receives the model server's key
    other = Settings(openai_base_url=stub.url, openai_api_key=KEY, chat_upstream="http://127.0.0.1:11434/v1")
    assert other.chat_upstream == "http://127.0.0.1:11434/v1" and other.chat_upstream_key is None


def test_formation_is_off_with_a_reason_when_the_server_is_not_named():
    from brain.wiring import formation_off_reason

    settings = Settings(summarizer="openai", formation=True)
    assert get_extractor(settings) is None
    assert "BRAIN_OPENAI_BASE_URL is unset" in (formation_off_reason(settings) or "")
