"""Memory formation's exchange with a model: the request, the answer's checks (refused whole, every problem
named, the scope rule) and the Ollama extractor against the Ollama-speaking test server."""

from __future__ import annotations

import json

import pytest

from brain.config import Settings
from brain.errors import ConfigError, FormationAnswerError, ValidationError
from brain.providers.extractors import (
    ExtractorError,
    ExtractorUnavailable,
    OllamaExtractor,
)
from brain.rules.formation import (
    MAX_FACTS,
    Candidate,
    FormationAnswer,
    WindowTurn,
    answer_schema,
    candidate_keys,
    check_answer,
    formation_messages,
    repair_messages,
)
from brain.wiring import formation_off_reason, get_extractor
from tests.ollama_stub import dead_url

TURNS = [
    WindowTurn(11, "user", "I'm vegetarian, and I moved to Berlin last month.", "2026-03-02T18:00:00Z", "Alice"),
    WindowTurn(12, "assistant", "Berlin has plenty of vegetarian places!", "2026-03-02T18:00:05Z"),
    WindowTurn(13, "user", "My driving exam is tomorrow, wish me luck.", "2026-03-02T18:01:00Z", "Alice"),
    WindowTurn(14, "assistant", "Good luck!", "2026-03-02T18:01:02Z"),
]
CANDIDATES = [Candidate("mem-paris", "Alice lives in Paris.", "2025-06-01T00:00:00Z"),
              Candidate("mem-cat", "Alice has a cat called Miso.")]
WINDOW = {11, 12, 13, 14}


def fact(**fields):
    return {"text": "Alice is vegetarian.", "importance": 4, "entity": "alice", "turns": [11], **fields}


def answer(*facts) -> str:
    return json.dumps({"facts": list(facts)})


def check(content: str, entity: str | None = "alice"):
    return check_answer(content, entity=entity, turn_indices=WINDOW, candidate_keys=set(candidate_keys(CANDIDATES)))


def refused(content: str, entity: str | None = "alice") -> dict[str, str]:
    with pytest.raises(FormationAnswerError) as info:
        check(content, entity)
    assert info.value.content == content
    return {p.field: p.message for p in info.value.problems}


# ---- the answer's checks -------------------------------------------------------------------------------

def test_a_good_answer_gives_its_facts_checked_and_normalised():
    facts = check(answer(
        fact(text="  Alice is vegetarian. ", tags=["food", " food", ""], entity="Alice", turns=[11, 11]),
        fact(text="Alice lives in Berlin.", action="update", target="M1", valid_from="2026-02-01T00:00:00+01:00"),
        fact(text="Alice has a driving exam on 3 March 2026.", importance=3, turns=[13],
             expires_at="2026-03-03T23:59:59Z"),
        fact(text="Alice still has her cat Miso.", action="same", target="M2", importance=2),
    ))

    first, moved, exam, cat = facts
    assert (first.text, first.tags, first.entity, first.turns, first.action, first.target) == (
        "Alice is vegetarian.", ["food"], "alice", [11], "add", None)  # the entity as the conversation names it
    assert (moved.action, moved.target, moved.valid_from) == ("update", "M1", "2026-01-31T23:00:00+00:00")
    assert exam.expires_at == "2026-03-03T23:59:59+00:00" and exam.valid_from is None
    assert (cat.action, cat.target, cat.importance) == ("same", "M2", 2)


def test_nothing_durable_is_an_empty_answer_and_a_fenced_or_reasoned_one_is_read():
    assert check('{"facts": []}') == []
    assert check('```json\n{"facts": []}\n```') == []
    assert len(check("<think>the user is vegetarian</think>" + answer(fact()))) == 1


@pytest.mark.parametrize("content, field, words", [
    ('{"facts": [{"text": "Alice is vegetarian", "importance": 4,', "answer", "not JSON"),
    ("", "answer", "empty"),
    ("[]", "answer", "JSON object"),
    ('{"memories": []}', "memories", "not a known field"),
    ('{"facts": {"text": "Alice is vegetarian."}}', "facts", "list"),
])
def test_broken_json_or_the_wrong_shape_is_refused(content, field, words):
    problems = refused(content)
    assert words in problems[field]


@pytest.mark.parametrize("bad, field, words", [
    ({"importance": 9}, "importance", "between 1 and 5, got 9"),
    ({"importance": 3.5}, "importance", "integer"),
    ({"turns": [11, 99]}, "turns", "[99] are not turns of this conversation window: the turns shown are 11 to 14"),
    ({"turns": []}, "turns", "at least 1"),
    ({"action": "update", "target": "M9"}, "target", "'M9' is not a listed memory: the known memories are M1, M2"),
    ({"action": "update"}, "target", "required for action 'update'"),
    ({"action": "contradict", "target": " "}, "target", "required for action 'contradict'"),
    ({"action": "same", "target": None}, "target", "required for action 'same'"),
    ({"action": "delete", "target": "M1"}, "action", "'add', 'same', 'update' or 'contradict'"),
    ({"entity": "bob"}, "entity", "'bob' is refused: this conversation belongs to 'alice'"),
    ({"entity": "global"}, "entity", "'global' is refused"),
    ({"text": "   "}, "text", "empty"),
    ({"text": "x" * 1001}, "text", "at most 1000"),
    ({"tags": "food"}, "tags", "list of strings"),
    ({"expires_at": "tomorrow"}, "expires_at", "ISO 8601"),
    ({"valid_from": "2026-03-02T18:00:00"}, "valid_from", "no timezone"),
    ({"id": "mem-paris"}, "id", "not a known field"),
])
def test_one_bad_fact_refuses_the_whole_answer(bad, field, words):
    problems = refused(answer(fact(text="Alice likes tea."), fact(**bad)))
    assert words in problems[f"facts.1.{field}"]
    assert list(problems) == [f"facts.1.{field}"]  # the good fact has no problem, and yet nothing is kept


def test_every_problem_of_the_answer_is_named():
    problems = refused(answer(
        fact(importance=9, entity="bob", turns=[7]),
        fact(action="update", tags=[1]),
        fact(action="contradict", target="mem-paris"),  # an id instead of a key
    ))

    assert set(problems) == {"facts.0.importance", "facts.0.entity", "facts.0.turns", "facts.1.target",
                             "facts.1.tags", "facts.2.target"}


def test_the_scope_rule_in_a_conversation_without_an_entity():
    (only,) = check(answer(fact(entity="global")), entity=None)
    assert only.entity == "global"
    problems = refused(answer(fact(entity="alice")), entity=None)
    assert "belongs to no entity, so every fact's entity is 'global'" in problems["facts.0.entity"]


def test_too_many_facts_are_refused():
    problems = refused(answer(*[fact(text=f"Alice likes dish {n}.") for n in range(MAX_FACTS + 1)]))
    assert f"at most {MAX_FACTS}" in problems["facts"]


def test_the_refusal_is_a_validation_error_whose_message_names_the_problems():
    with pytest.raises(ValidationError, match="facts.0.importance"):
        check(answer(fact(importance=9)))


def test_without_a_request_to_check_against_a_fact_checks_its_own_rules_only():
    answer_ = FormationAnswer.model_validate({"facts": [fact(entity="bob", action="update", target="M5")]})
    assert answer_.facts[0].entity == "bob" and answer_.facts[0].target == "M5"


# ---- the request ------------------------------------------------------------------------------------

def test_the_request_lists_the_turns_and_the_known_memories_by_key_never_by_id():
    system, user = formation_messages(TURNS, CANDIDATES, entity="alice", now="2026-03-02T18:01:02Z")

    assert system["role"] == "system" and user["role"] == "user"
    assert 'entity: always "alice"' in system["content"]
    assert "Current time: 2026-03-02T18:01:02+00:00" in user["content"]
    assert "M1 (since 2025-06-01T00:00:00+00:00): Alice lives in Paris." in user["content"]
    assert "M2: Alice has a cat called Miso." in user["content"]
    assert "mem-paris" not in user["content"] + system["content"]
    assert "[11] 2026-03-02T18:00:00+00:00 User (Alice): I'm vegetarian, and I moved to Berlin last month." \
        in user["content"]
    assert "[12] 2026-03-02T18:00:05+00:00 Assistant: Berlin" in user["content"]
    assert candidate_keys(CANDIDATES) == {"M1": CANDIDATES[0], "M2": CANDIDATES[1]}


def test_a_request_without_turns_is_refused():
    with pytest.raises(ValidationError, match="at least one turn"):
        formation_messages([], CANDIDATES, entity="alice", now="2026-03-02T18:01:02Z")


def test_a_global_conversation_asks_for_global_facts_about_the_speaker():
    system, user = formation_messages(TURNS, [], entity=None, now="2026-03-02T18:01:02Z")
    assert 'entity: always "global"' in system["content"] and "about Alice" in system["content"]
    assert "Known memories:\n(none)" in user["content"]


def test_the_schema_is_self_contained_and_constrains_the_answer():
    schema = answer_schema()
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    item = schema["properties"]["facts"]["items"]
    assert item["properties"]["importance"]["minimum"] == 1 and item["properties"]["importance"]["maximum"] == 5
    assert item["properties"]["action"]["enum"] == ["add", "same", "update", "contradict"]
    assert set(item["required"]) == {"text", "importance", "entity", "action", "target", "turns"}
    assert item["additionalProperties"] is False
    # the format sits on the string branch, where a grammar built from the schema applies it
    assert {"type": "string", "format": "date-time"} in item["properties"]["expires_at"]["anyOf"]


def test_the_schema_of_a_request_allows_only_its_entity_turns_and_keys():
    schema = answer_schema(entity="alice", turn_indices=[3, 1, 2], candidate_keys=["M2", "M1", "M10"])
    fact_schema = schema["properties"]["facts"]["items"]["properties"]
    assert fact_schema["entity"]["enum"] == ["alice"]
    assert fact_schema["turns"]["items"] == {"type": "integer", "enum": [1, 2, 3]}
    assert {"type": "string", "enum": ["M1", "M2", "M10"]} in fact_schema["target"]["anyOf"]
    assert fact_schema["action"]["enum"] == ["add", "same", "update", "contradict"]
    # with no known memory to name, a fact can only be added: "update" with a null target is refused otherwise
    nothing_known = answer_schema(candidate_keys=[])["properties"]["facts"]["items"]["properties"]
    assert nothing_known["target"]["anyOf"] == [{"type": "null"}] and nothing_known["action"]["enum"] == ["add"]
    # the generic schema stays as it was
    assert "enum" not in answer_schema()["properties"]["facts"]["items"]["properties"]["entity"]


def test_a_repair_request_shows_the_refused_answer_and_every_problem():
    messages = formation_messages(TURNS, CANDIDATES, entity="alice", now="2026-03-02T18:01:02Z")
    bad = answer(fact(importance=9), fact(entity="bob"))
    with pytest.raises(FormationAnswerError) as info:
        check(bad)

    repaired = repair_messages(messages, bad, info.value)

    assert repaired[:2] == messages
    assert repaired[2] == {"role": "assistant", "content": bad}
    assert repaired[3]["role"] == "user"
    assert "facts.0.importance" in repaired[3]["content"] and "facts.1.entity" in repaired[3]["content"]
    assert len(repaired) == 4


# ---- the Ollama extractor, against the Ollama-speaking test server ---------------------------------------


def test_the_extractor_sends_the_schema_as_format_and_counts_the_tokens(stub):
    messages = formation_messages(TURNS, CANDIDATES, entity="alice", now="2026-03-02T18:01:02Z")
    reply = answer(fact(text="Alice lives in Berlin.", action="update", target="M1"))
    stub.chat_script = [reply]
    extractor = OllamaExtractor("llama3.2:3b", host=stub.url, timeout=5)

    got = extractor.ask(messages, answer_schema())

    (request,) = stub.chat_requests()
    assert request.body["format"] == answer_schema()
    assert request.body["messages"] == messages
    assert request.body["stream"] is False and request.body["options"]["temperature"] == 0
    assert got.content == reply
    sent_words = sum(len(m["content"].split()) for m in messages)
    assert (got.prompt_tokens, got.eval_tokens) == (sent_words, len(reply.split()))
    assert 0 < got.seconds < 5
    assert extractor.name == "ollama/llama3.2:3b"
    (moved,) = check(got.content)
    assert (moved.action, moved.target) == ("update", "M1")


def test_a_repair_is_asked_in_the_same_conversation(stub):
    messages = formation_messages(TURNS, CANDIDATES, entity="alice", now="2026-03-02T18:01:02Z")
    # the corrected answer is computed from what the repair request sent: the turn the request shows
    def corrected(body):
        return answer(fact(turns=[11 * body["messages"][1]["content"].count("[11]")]))

    stub.chat_script = ['{"facts": [', corrected]
    extractor = OllamaExtractor("llama3.2:3b", host=stub.url, timeout=5)

    first = extractor.ask(messages, answer_schema())
    with pytest.raises(FormationAnswerError) as info:
        check(first.content)
    second = extractor.ask(repair_messages(messages, first.content, info.value), answer_schema())

    assert [f.turns for f in check(second.content)] == [[11]]
    assert stub.chat_requests()[1].body["messages"][2] == {"role": "assistant", "content": '{"facts": ['}


def test_ollama_down_is_unavailable():
    extractor = OllamaExtractor("llama3.2:3b", host=dead_url(), timeout=2)
    with pytest.raises(ExtractorUnavailable, match="ollama serve"):
        extractor.ask([{"role": "user", "content": "hi"}], answer_schema())


def test_a_server_failure_is_unavailable_and_the_next_call_works(stub):
    stub.chat_script = [500, '{"facts": []}']
    extractor = OllamaExtractor("llama3.2:3b", host=stub.url, timeout=5)
    with pytest.raises(ExtractorUnavailable, match="failed \\(500\\)"):
        extractor.ask([{"role": "user", "content": "hi"}], answer_schema())
    assert extractor.ask([{"role": "user", "content": "hi"}], answer_schema()).content == '{"facts": []}'


def test_a_model_that_is_not_pulled_is_unavailable(stub):
    extractor = OllamaExtractor("qwen2.5:7b", host=stub.url, timeout=5)
    with pytest.raises(ExtractorUnavailable, match="ollama pull qwen2.5:7b"):
        extractor.ask([{"role": "user", "content": "hi"}], answer_schema())


@pytest.mark.parametrize("mode", ["not-json", "wrong-shape"])
def test_an_answer_that_is_not_a_chat_response_is_an_extractor_error(stub, mode):
    stub.chat_mode = mode
    extractor = OllamaExtractor("llama3.2:3b", host=stub.url, timeout=5)
    with pytest.raises(ExtractorError) as info:
        extractor.ask([{"role": "user", "content": "hi"}], answer_schema())
    assert not isinstance(info.value, ExtractorUnavailable)


def test_a_slow_model_times_out_as_unavailable_naming_the_setting(stub):
    stub.chat_delay = 2.0
    extractor = OllamaExtractor("llama3.2:3b", host=stub.url, timeout=5)
    with pytest.raises(ExtractorUnavailable, match="BRAIN_FORMATION_TIMEOUT"):
        extractor.ask([{"role": "user", "content": "hi"}], answer_schema(), timeout=0.3)


def test_an_invalid_model_name_is_refused_before_any_request():
    with pytest.raises(ExtractorError, match="BRAIN_FORMATION_MODEL"):
        OllamaExtractor("llama 3")


def test_formation_needs_the_setting_and_a_model(tmp_path):
    off = Settings(data_dir=tmp_path)
    assert get_extractor(off) is None and "BRAIN_FORMATION" in formation_off_reason(off)
    no_model = Settings(data_dir=tmp_path, formation=True, summarizer="extractive")
    assert get_extractor(no_model) is None and "BRAIN_SUMMARIZER=extractive" in formation_off_reason(no_model)

    on = Settings(data_dir=tmp_path, formation=True, formation_model="qwen2.5:3b", formation_timeout=30,
                  ollama_host="http://127.0.0.1:9")
    extractor = get_extractor(on)
    assert formation_off_reason(on) is None
    assert (extractor.model, extractor.host, extractor.timeout) == ("qwen2.5:3b", "http://127.0.0.1:9", 30)


def test_the_formation_settings_and_their_defaults(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert (settings.formation, settings.formation_model, settings.formation_retries, settings.formation_timeout,
            settings.formation_candidates) == (False, settings.summary_model, 3, 120.0, 8)
    with pytest.raises(ConfigError, match="BRAIN_FORMATION_MODEL"):
        Settings(data_dir=tmp_path, formation_model="llama 3")
    with pytest.raises(ConfigError, match="BRAIN_FORMATION_CANDIDATES"):
        Settings(data_dir=tmp_path, formation_candidates=51)
