"""bench/bench_formation.py: its fact scoring on a LoCoMo-shaped fixture of our own (two small conversations
with their gold observations), and its pipeline against the Ollama test server."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.bench_scripts import bench_script
from tests.ollama_stub import DEFAULT_CHAT_MODELS, OllamaStub, dead_url

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "formation" / "locomo-mini.json"


@pytest.fixture(scope="module")
def bench():
    return bench_script("bench_formation.py")


@pytest.fixture(scope="module")
def gold(bench) -> dict[str, list[str]]:
    """Each fixture conversation's gold observations, read by the relevance benchmark's loader."""
    observations, _ = bench.relevance.load(FIXTURE)
    return {conv: [text for text, _, _ in facts] for conv, facts in observations.items()}


#: the orchard conversation's observations reworded as a small model words them (shorter, other words)
RESTATED = [
    "Priya planted an apple orchard.",
    "Priya planted 12 trees, most of them Honeycrisp.",
    "Priya's dad helped dig the holes for her trees.",
    "Priya has a dog allergy.",
    "Tomas got a greyhound called Pixel from a shelter.",
    "Pixel, Tomas's dog, sleeps a lot.",
    "Tomas starts work as a bus driver.",
    "Priya entered cider into the county fair's competition.",
    "Priya's cider competition at the county fair is in September.",
    "Priya is doing a beekeeping course so bees will pollinate the orchard.",
    "Anjali, Priya's sister, lives in Lisbon.",
    "Priya thinks Tomas should meet her sister Anjali.",
    "Tomas drives route 14 in the old town.",
    "Tomas is studying Portuguese.",
    "Tomas will visit his grandmother in Porto in June.",
    "Pixel has learned to sit.",
    "Frost killed three of Priya's apple trees.",
    "Priya is replacing the lost apple trees with pear trees.",
    "Priya sells honey at the Saturday farmers market.",
    "Anjali is moving back in the autumn.",
    "Tomas had a wonderful time in Porto.",
    "Tomas's grandmother is ninety.",
    "Tomas became a shift supervisor at the bus depot.",
    "Tomas will run a half marathon in October.",
    "Tomas plans to buy honey from Priya.",
]


# ---- score_facts ------------------------------------------------------------------------------------

def test_the_gold_observations_returned_as_the_model_s_facts_score_one(bench, gold, local_embedder):
    for conv, facts in gold.items():
        score = bench.score_facts(facts, facts, local_embedder, bench.THRESHOLD)
        assert (score.extracted, score.gold, score.matched) == (len(facts), len(facts), len(facts)), conv
        assert score.recall == score.precision == score.f1 == 1.0
        assert sorted((i, j) for i, j, _ in score.pairs) == [(i, i) for i in range(len(facts))]


def test_the_same_facts_in_another_order_still_score_one(bench, gold, local_embedder):
    facts = gold["conv-orchard"]
    order = list(range(len(facts)))[::-1]
    score = bench.score_facts([facts[i] for i in order], facts, local_embedder, bench.THRESHOLD)
    assert score.recall == score.precision == 1.0
    assert sorted((order[i], j) for i, j, _ in score.pairs) == [(j, j) for j in range(len(facts))]


def test_another_conversation_s_observations_score_near_zero(bench, gold, local_embedder):
    orchard, workshop = gold["conv-orchard"], gold["conv-workshop"]
    for formed, expected in ((workshop, orchard), (orchard, workshop)):
        score = bench.score_facts(formed, expected, local_embedder, bench.THRESHOLD)
        assert score.recall <= 0.1 and score.precision <= 0.1, score


def test_restated_facts_match_their_own_observation(bench, gold, local_embedder):
    """The threshold lets a restatement in other words count (a model never copies the gold's wording)."""
    facts = gold["conv-orchard"]
    assert len(RESTATED) == len(facts)
    score = bench.score_facts(RESTATED, facts, local_embedder, bench.THRESHOLD)
    assert score.recall >= 0.9 and score.precision >= 0.9, score
    own = sum(i == j for i, j, _ in score.pairs)
    assert own >= 0.9 * len(facts), sorted((i, j) for i, j, _ in score.pairs if i != j)
    # a stricter threshold misses them: the figure depends on the threshold, and the threshold is stated
    assert bench.score_facts(RESTATED, facts, local_embedder, 0.97).recall < 0.5


def test_matching_is_one_to_one(bench, gold, local_embedder):
    facts = gold["conv-workshop"]
    twice = [facts[0], facts[0]]
    score = bench.score_facts(twice, facts, local_embedder, bench.THRESHOLD)
    assert score.matched == 1 and score.precision == 0.5 and score.recall == pytest.approx(1 / len(facts))
    # one formed fact said twice in the gold counts once
    score = bench.score_facts([facts[0]], [facts[0], facts[0]], local_embedder, bench.THRESHOLD)
    assert score.matched == 1 and score.precision == 1.0 and score.recall == 0.5


def test_the_most_similar_pair_is_matched_first(bench, local_embedder):
    gold = ["Tomas adopted a greyhound named Pixel.", "Tomas drives a bus."]
    formed = ["Tomas has a dog.", "Tomas adopted a greyhound called Pixel."]
    score = bench.score_facts(formed, gold, local_embedder, 0.3)
    assert score.pairs[0][:2] == (1, 0)  # the close restatement takes the greyhound, not the vague fact


def test_empty_sides(bench, local_embedder):
    nothing_formed = bench.score_facts([], ["Lena plays the double bass."], local_embedder, bench.THRESHOLD)
    assert (nothing_formed.precision, nothing_formed.recall, nothing_formed.f1) == (0.0, 0.0, 0.0)
    nothing_to_form = bench.score_facts(["Lena plays the double bass."], [], local_embedder, bench.THRESHOLD)
    assert (nothing_to_form.precision, nothing_to_form.recall) == (0.0, 1.0)
    both = bench.score_facts([], [], local_embedder, bench.THRESHOLD)
    assert (both.precision, both.recall, both.f1) == (1.0, 1.0, 1.0)


def test_scores_pool_over_conversations(bench, gold, local_embedder):
    orchard = bench.score_facts(gold["conv-orchard"][:10], gold["conv-orchard"], local_embedder, bench.THRESHOLD)
    workshop = bench.score_facts(gold["conv-workshop"], gold["conv-workshop"], local_embedder, bench.THRESHOLD)
    pooled = orchard + workshop
    assert (pooled.extracted, pooled.gold, pooled.matched) == (21, 36, 21)
    assert pooled.recall == pytest.approx(21 / 36) and pooled.precision == 1.0


@pytest.mark.parametrize("threshold", [0.0, -0.5, 1.5])
def test_a_threshold_outside_0_1_is_refused(bench, local_embedder, threshold):
    with pytest.raises(ValueError, match="threshold must be in"):
        bench.score_facts(["a fact"], ["a fact"], local_embedder, threshold)


# ---- the pipeline, against the Ollama test server ---------------------------------------------------

def gold_model(bench, observations, conversations):
    """A model that answers each formation request with the gold observations of the batch's turns (and
    each summary request with a sentence)."""
    text_of = {(c.id, t.dia_id): t.text for c in conversations for t in c.turns}

    def answer(body) -> str:
        if not body.get("format"):
            # a summary that states the window's gold observations, one sentence each
            transcript = "\n".join(m["content"] for m in body.get("messages", []) if m.get("role") == "user")
            said = [text for c in conversations for text, dias, _ in observations[c.id]
                    if any(text_of[(c.id, dia)] in transcript for dia in dias)]
            return " ".join(said) or "They caught up on their news."
        entity, turns = bench.request_turns(body)
        facts = [{"text": text, "importance": 3, "tags": [], "entity": entity, "action": "add", "target": None,
                  "expires_at": None, "valid_from": None, "turns": [index]}
                 for index, line in turns for text, dias, _ in observations[entity]
                 if any(text_of[(entity, dia)] in line for dia in dias)]
        return json.dumps({"facts": facts})

    return answer


def test_the_pipeline_scores_a_model_answering_the_gold_facts_at_recall_one(bench, local_embedder):
    conversations = bench.locomo.load(FIXTURE)
    observations, _ = bench.relevance.load(FIXTURE)
    with OllamaStub(models={}, chat_models=DEFAULT_CHAT_MODELS) as stub:
        stub.chat_script.extend([gold_model(bench, observations, conversations)] * 200)
        args = argparse.Namespace(data=FIXTURE, conversations=conversations, every_n=2, timeout=300,
                                  command="bench/bench_formation.py --data tests/fixtures/formation/locomo-mini.json")
        results = bench.evaluate(args, embedder=local_embedder, ollama_host=stub.url, summarizer="ollama",
                                 summary_model=DEFAULT_CHAT_MODELS[0], formation_model=DEFAULT_CHAT_MODELS[0])
        formation_calls = [r for r in stub.chat_requests() if r.body.get("format")]
    assert [f.conversation.id for f in results.formed] == ["conv-orchard", "conv-workshop"]
    for f in results.formed:
        assert f.batches and all(b.status == "done" for b in f.batches), [b.to_dict() for b in f.batches]
        assert f.gold_outside == 0 and len(f.gold) == len(observations[f.conversation.id])
        assert f.score.recall == 1.0 and f.score.precision == 1.0, f.score
        # every formed memory knows the turns it came from, and they are its gold observation's
        for memory in f.memories:
            assert memory.metadata["source_turns"]
    # tokens and seconds come from the batches' counters (the test server counts words)
    assert len(formation_calls) == sum(len(f.batches) for f in results.formed)
    assert sum(b.prompt_tokens for f in results.formed for b in f.batches) > 0
    assert sum(b.eval_tokens for f in results.formed for b in f.batches) > 0
    # the memory section over the formed memories (their source turns read back) is the gold observations'
    formed, gold = results.context["formed"], results.context["gold"]
    assert formed["answerable"] == gold["answerable"] == results.questions == 7
    assert (formed["recall"], formed["precision"], formed["foreign_empty"]) == \
        (gold["recall"], gold["precision"], gold["foreign_empty"])
    assert formed["recall"] > 0.5
    text = bench.report(args, results)
    assert "| **all** | 19 |" in text and "| 1.000 | 1.000 | 1.000 |" in text
    # the summaries that state each window's observations state them all; the fixture has no session summaries
    gold_facts = sum(len(f.gold) for f in results.formed)
    assert f"| written by the model | {gold_facts} | {gold_facts} / {gold_facts} = 1.000 |" in text
    assert "| extractive (the fallback) |" in text and "| LoCoMo's session summaries | 0 | 0 / " in text
    assert all(f.model_written == len(f.summaries["model"]) > 0 for f in results.formed)
    # the gold facts are distinct, so none of the formed memories says the same as another
    assert "## Duplicates and changes" in text
    assert all(bench.duplicates(f.memories, local_embedder) == 0 for f in results.formed)


def test_a_summary_sentence_may_state_several_facts_and_an_answer_needs_all_its_words(bench, local_embedder):
    facts = ["Tomas adopted a greyhound named Pixel.", "Priya planted twelve apple trees."]
    summary = ["They talked. Tomas adopted a greyhound named Pixel. Priya planted twelve apple trees."]
    assert bench.stated(summary, facts, local_embedder) == 2
    assert bench.stated(["They talked about the weather."], facts, local_embedder) == 0
    windows = [({"D1:1", "D1:2"}, summary[0]), ({"D2:1"}, "Nothing much happened.")]
    questions = [(["D1:2"], "Pixel"), (["D1:1"], "twelve pear trees"), (["D2:1"], "the"), (["D9:9"], "Pixel")]
    # "the" has no content word and D9:9 is in no window: neither is asked
    assert bench.answers_stated(windows, questions) == (1, 2)


def test_duplicates_count_pairs_of_active_memories_saying_the_same(bench, local_embedder):
    from brain.model.results import Document

    def memory(text, status="active"):
        return Document(id=f"m-{abs(hash(text + status))}", text=text, metadata={"status": status})

    said_twice = [memory("Priya planted twelve apple trees."), memory("Priya planted twelve apple trees."),
                  memory("Tomas drives a bus."), memory("Priya planted twelve apple trees.", "superseded")]
    assert bench.duplicates(said_twice, local_embedder) == 1


def test_a_missing_endpoint_or_model_is_named_before_anything_is_fed(bench, tmp_path):
    from brain.config import Settings

    with pytest.raises(SystemExit, match=r"BRAIN_OPENAI_BASE_URL=http://127\.0\.0\.1:\d+/v1\); start the server"):
        bench.check_model(Settings(data_dir=tmp_path, summarizer="openai", openai_base_url=dead_url() + "/v1",
                                   formation=True, formation_model="qwen2.5-coder-1.5b"))

    with pytest.raises(SystemExit, match=r"no Ollama at OLLAMA_HOST=http://127\.0\.0\.1:\d+"):
        bench.check_model(Settings(data_dir=tmp_path, ollama_host=dead_url(), formation_model="llama3.2:3b"))
    with OllamaStub(models={}, chat_models=["qwen2.5:0.5b"]) as stub:
        with pytest.raises(SystemExit, match=r"has no model 'llama3.2:3b' \(BRAIN_FORMATION_MODEL\); pull it "
                                             r"\(`ollama pull llama3.2:3b`\) or choose one of: qwen2.5:0.5b"):
            bench.check_model(Settings(data_dir=tmp_path, ollama_host=stub.url, formation_model="llama3.2:3b"))
