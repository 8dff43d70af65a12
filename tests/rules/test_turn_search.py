"""Hybrid retrieval over one conversation's turns (brain.rules.turn_search), with the real local embedder."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from brain.model.errors import Problem, ValidationError
from brain.model.results import Document
from brain.rules.turn_search import TurnIndex, TurnSearchWeights, asks_when, search_turns, speaks_of_time
from brain.text import BM25Index as LexicalIndex
from brain.text import tokenize

DENSE_ONLY = TurnSearchWeights(dense=1.0, lexical=0.0, speaker=0.0, neighbour=0.0)
MAY = "2023-05-08T13:56:00+00:00"


@pytest.fixture
def make_turns(local_embedder):
    def make(rows, conversation_id="conv-test", timestamps=None):
        vectors = local_embedder.embed_documents([text for _, text in rows])
        return [
            Document(
                id=f"t{i + 1}",
                text=text,
                metadata={
                    "type": "turn",
                    "conversation_id": conversation_id,
                    "turn_index": i + 1,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "speaker": speaker,
                    "timestamp": timestamps[i] if timestamps else MAY,
                },
                embedding=vectors[i],
            )
            for i, (speaker, text) in enumerate(rows)
        ]

    return make


@pytest.fixture
def ask(local_embedder):
    def ask(query, turns, k=10, weights=None):
        return search_turns(query, local_embedder.embed_query(query), turns, k, weights)

    return ask


def ids(hits):
    return [h.id for h in hits]


HEADACHES = [
    ("Alice", "This headache has lasted all week and painkillers do nothing."),
    ("Bob", "Migraines run in my family, my mum gets terrible headaches."),
    ("Alice", "Ibuprofen usually helps my headaches after an hour or so."),
    ("Bob", "ok so zephyrine it is then, fine by me"),
    ("Alice", "A dark quiet room is the best cure for a migraine."),
    ("Bob", "Let's cook pasta tonight."),
    ("Alice", "I started reading a novel about sailors."),
    ("Bob", "The garden needs watering."),
]


def test_a_rare_word_lifts_a_turn_that_dense_similarity_ranks_low(make_turns, ask):
    turns = make_turns(HEADACHES)
    query = "Should I take ibuprofen or zephyrine for this headache?"
    dense_rank = ids(ask(query, turns, weights=DENSE_ONLY)).index("t4")
    hits = ask(query, turns)
    assert dense_rank >= 2  # the headache turns are closer in meaning
    assert ids(hits).index("t4") <= 1
    zephyrine = hits[ids(hits).index("t4")]
    assert zephyrine.bm25 > 0 and zephyrine.lexical_part > 0


def test_a_turn_sharing_no_word_with_the_query_is_found_by_meaning(make_turns, ask):
    turns = make_turns(
        [
            ("Alice", "My car broke down on the motorway and I had to call a tow truck."),
            ("Bob", "We planted tomatoes and basil this spring."),
            ("Alice", "The concert last night was loud and wonderful."),
            ("Bob", "I am learning to knit a scarf."),
        ]
    )
    hits = ask("vehicle trouble", turns)
    assert hits[0].id == "t1"
    assert hits[0].bm25 == 0.0 and hits[0].dense_part > 0


def test_score_is_the_sum_of_its_parts_and_parts_follow_the_formula(make_turns, ask, local_embedder):
    turns = make_turns(HEADACHES)
    query = "Does Alice get headaches?"
    hits = ask(query, turns, k=len(turns))
    assert len(hits) == len(turns)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    by_id = {h.id: h for h in hits}
    for h in hits:
        assert h.score == pytest.approx(h.dense_part + h.lexical_part + h.speaker_part + h.neighbour_part)
    # dense part = 0.5 * standardised cosine similarity over the conversation
    q = local_embedder.embed_query(query)
    sims = np.array([float(np.dot(t.embedding, q) / np.linalg.norm(t.embedding) / np.linalg.norm(q)) for t in turns])
    z = (sims - sims.mean()) / sims.std()
    for t, expected in zip(turns, z):
        assert by_id[t.id].similarity == pytest.approx(
            float(np.dot(t.embedding, q) / np.linalg.norm(t.embedding) / np.linalg.norm(q)), abs=1e-5
        )
        assert by_id[t.id].dense_part == pytest.approx(0.5 * expected, abs=1e-4)
    # neighbour part = neighbour weight * the better neighbour's fused score, neighbours by turn_index;
    # the speaker bonus is the turn's own (who said it), not passed on to its neighbours
    assert {h.speaker_part for h in hits} == {0.0, TurnSearchWeights().speaker}
    fused = {h.id: h.dense_part + h.lexical_part for h in hits}
    order = [t.id for t in turns]
    for i, turn_id in enumerate(order):
        neighbours = [fused[order[j]] for j in (i - 1, i + 1) if 0 <= j < len(order)]
        assert by_id[turn_id].neighbour_part == pytest.approx(TurnSearchWeights().neighbour * max(neighbours))


def test_the_speaker_named_in_the_question_is_preferred(make_turns, ask):
    rows = [
        ("Alice", "I adopted a dog from the shelter last week."),
        ("Bob", "I adopted a dog from the shelter last week."),
        ("Alice", "The weather is lovely."),
        ("Bob", "Work is busy."),
    ]
    turns = make_turns(rows)
    bonus = TurnSearchWeights().speaker
    for weights in (TurnSearchWeights(neighbour=0.0), None):  # with neighbours too: the bonus is not shared
        for name, expected in (("Alice", "t1"), ("Bob", "t2")):
            hits = ask(f"When did {name} adopt a dog?", turns, weights=weights)
            assert hits[0].id == expected
            assert hits[0].speaker_part == bonus
            assert all(h.speaker_part == (bonus if h.metadata["speaker"] == name else 0.0) for h in hits)
    # both named, or a name that is nobody in the conversation: no bonus for anyone
    for query in ("Did Alice and Bob adopt a dog?", "When did Carol adopt a dog?"):
        assert all(h.speaker_part == 0.0 for h in ask(query, turns))
    # a possessive names the speaker too
    assert ask("What is Bob's dog like?", turns)[0].speaker_part == bonus


@pytest.mark.parametrize(
    "query, named",
    [
        ("Bob, when did I adopt a dog?", None),
        ("Hey Bob! When did I adopt a dog?", None),
        ("when did I adopt a dog, Bob?", None),
        ("Bob: when did I adopt a dog", None),
        ("Bob, when did Alice adopt a dog?", "Alice"),  # Bob is addressed, Alice asked about
        ("When did Bob adopt a dog?", "Bob"),
        ("Bob adopted a dog, right?", "Bob"),
    ],
)
def test_a_name_that_addresses_someone_does_not_name_the_one_asked_about(make_turns, query, named):
    index = TurnIndex(make_turns([("Alice", "I adopted a dog."), ("Bob", "Lovely.")]))
    assert index.named_speaker(query) == named


def test_the_date_in_a_question_matches_the_turns_of_that_day(make_turns, ask):
    rows = [
        ("Alice", "I went to the farmers market and bought apples."),
        ("Bob", "Sounds good."),
        ("Alice", "I went to the farmers market and bought apples."),
        ("Bob", "Sounds good."),
    ]
    stamps = [
        "2023-03-14T10:00:00+00:00",
        "2023-03-14T10:01:00+00:00",
        "2023-07-02T10:00:00+00:00",
        "2023-07-02T10:01:00+00:00",
    ]
    turns = make_turns(rows, timestamps=stamps)
    assert ask("What did Alice buy at the market in July 2023?", turns)[0].id == "t3"
    assert ask("What did Alice buy at the market on 14 March?", turns)[0].id == "t1"
    assert ask("What did Alice buy at the market on March 14th?", turns)[0].id == "t1"
    # no date in the question: the two identical turns tie and the earlier one comes first (without
    # the previous turn's words, which t3 has and t1 has not)
    hits = ask("What did Alice buy at the market?", turns, weights=TurnSearchWeights(previous_words=False))
    assert hits[0].id == "t1" and hits[1].id == "t3"
    assert hits[0].score == pytest.approx(hits[1].score)


def test_an_answer_is_found_through_the_question_before_it(make_turns, ask):
    turns = make_turns(
        [
            ("Caroline", "How was your weekend?"),
            ("Melanie", "Great, I went hiking with the kids."),
            ("Caroline", "What did you paint last week?"),
            ("Melanie", "A sunrise over the lake, with orange and pink skies."),
            ("Caroline", "I love the colours in that."),
            ("Melanie", "Thanks! The kids want to go camping next."),
            ("Caroline", "I read a book about adoption."),
            ("Melanie", "My dog is learning new tricks."),
        ]
    )
    with_context = ids(ask("What did Melanie paint?", turns, k=2))
    without = ids(
        ask("What did Melanie paint?", turns, k=2, weights=TurnSearchWeights(neighbour=0.0, previous_words=False))
    )
    assert with_context[0] == "t4"
    assert "t4" not in without


def test_conversation_order_comes_from_turn_index_not_input_order(make_turns, ask):
    turns = make_turns(HEADACHES)
    shuffled = turns[:]
    random.Random(7).shuffle(shuffled)
    query = "What helps with a migraine?"
    assert [h.to_dict() for h in ask(query, shuffled, k=8)] == [h.to_dict() for h in ask(query, turns, k=8)]
    assert [t.id for t in TurnIndex(shuffled).turns] == [t.id for t in turns]


def test_results_are_deterministic(make_turns, ask):
    turns = make_turns(HEADACHES)
    first = [h.to_dict() for h in ask("headache cure", turns, k=5)]
    for _ in range(3):
        assert [h.to_dict() for h in ask("headache cure", turns, k=5)] == first


def test_k_bounds(make_turns, ask, local_embedder):
    turns = make_turns(HEADACHES)
    assert len(ask("headache", turns, k=3)) == 3
    assert len(ask("headache", turns, k=1000)) == len(turns)  # fewer turns than k: all of them
    q = local_embedder.embed_query("headache")
    for bad in (0, -1, 1001, 2.5, True, "3", None):
        with pytest.raises(ValidationError, match="k must be an integer between 1 and 1000"):
            search_turns("headache", q, turns, bad)


def test_an_empty_conversation_has_no_hits_but_the_query_is_still_checked(local_embedder):
    q = local_embedder.embed_query("anything")
    assert search_turns("anything", q, [], 5) == []
    assert len(TurnIndex([])) == 0
    with pytest.raises(ValidationError, match="query_text"):
        search_turns("  ", q, [], 5)


def test_a_single_turn_is_returned(make_turns, ask):
    hits = ask("pasta", make_turns([("Bob", "Let's cook pasta tonight.")]))
    assert ids(hits) == ["t1"]
    assert math.isfinite(hits[0].score)


def test_turns_from_the_store_can_be_searched(embedded_store, local_embedder):
    store = embedded_store
    store.upsert_turn(
        "conv-shop",
        "Where can I buy a zephyrine charger?",
        "Try the shop on Baker Street.",
        user_ts=MAY,
        speaker="Dana",
    )
    store.upsert_turn("conv-shop", "What time does the museum open?", "At nine in the morning.", user_ts=MAY)
    store.upsert_turn("conv-other", "I need a zephyrine charger too.", "Any phone shop has one.", user_ts=MAY)
    turns = store.get(where={"conversation_id": "conv-shop"}, type="turn", include_embeddings=True)
    query = "zephyrine charger shop"
    hits = search_turns(query, local_embedder.embed_query(query), turns, 2)
    assert {h.id for h in hits} <= {t.id for t in turns}
    assert hits[0].text == "Where can I buy a zephyrine charger?"
    assert hits[1].text == "Try the shop on Baker Street."


# ---- bad input -------------------------------------------------------------------------------------
def test_turns_without_embeddings_are_refused_with_the_fix(make_turns, local_embedder):
    turns = make_turns(HEADACHES[:2])
    turns[1] = Document(id=turns[1].id, text=turns[1].text, metadata=turns[1].metadata)
    with pytest.raises(ValidationError, match="include_embeddings=True") as err:
        search_turns("headache", local_embedder.embed_query("headache"), turns, 3)
    assert err.value.problems[0]["item"] == 1 and err.value.problems[0]["field"] == "embedding"


def test_every_refusal_carries_typed_problems_naming_the_item_and_field(make_turns, local_embedder):
    q = local_embedder.embed_query("headache")
    turns = make_turns(HEADACHES[:2])
    with pytest.raises(ValidationError) as err:
        search_turns("headache", q, [*turns, turns[0]], 3)
    assert err.value.problems == [Problem("id", f"turn 2: id {turns[0].id!r} appears twice", item=2)]
    with pytest.raises(ValidationError) as err:
        TurnSearchWeights(dense=0, lexical=0)
    assert [type(p) for p in err.value.problems] == [Problem]
    assert err.value.problems[0].to_dict() == {"item": None, "field": "dense", "message": str(err.value)}
    with pytest.raises(ValidationError) as err:
        search_turns("", q, turns, 3)
    assert [(p.field, p.item) for p in err.value.problems] == [("query_text", None)]


def test_bad_turns_are_refused(make_turns, local_embedder):
    q = local_embedder.embed_query("headache")
    turns = make_turns(HEADACHES[:3])
    cases = [
        (
            turns[:2] + [Document("t9", "x", {"conversation_id": "conv-else"}, turns[0].embedding)],
            "several conversations",
        ),
        (turns + [turns[0]], "appears twice"),
        (turns[:2] + [Document("t9", "x", {}, np.ones(5, dtype=np.float32))], "5 dimensions"),
        (turns[:2] + [Document("t9", "x", {}, np.zeros(384, dtype=np.float32))], "all zeros"),
        (turns[:2] + [{"id": "t9", "text": "x"}], "must be a Document"),
        ("not a list", "list of Document"),
    ]
    for bad, message in cases:
        with pytest.raises(ValidationError, match=message):
            search_turns("headache", q, bad, 3)


def test_bad_queries_are_refused(make_turns, local_embedder):
    turns = make_turns(HEADACHES[:3])
    q = local_embedder.embed_query("headache")
    for text in ("", "   ", None, 42):
        with pytest.raises(ValidationError, match="query_text must be a non-empty string"):
            search_turns(text, q, turns, 3)
    for vector, message in (
        (q[:10], "10 dimensions but the turns are 384-d"),
        (np.zeros(384), "all zeros"),
        (np.full(384, np.nan), "NaN"),
        ("abc", "list of numbers|1-d"),
        (np.ones((2, 384)), "1-d"),
    ):
        with pytest.raises(ValidationError, match=message):
            search_turns("headache", vector, turns, 3)


def test_bad_weights_are_refused():
    for kwargs, message in (
        ({"dense": -1}, "dense must be a finite number >= 0"),
        ({"neighbour": float("nan")}, "neighbour"),
        ({"bm25_b": 1.5}, "bm25_b must be between 0 and 1"),
        ({"bm25_k1": 0}, "bm25_k1 must be > 0"),
        ({"dense": 0, "lexical": 0}, "cannot both be 0"),
        ({"speaker": True}, "speaker"),
    ):
        with pytest.raises(ValidationError, match=message):
            TurnSearchWeights(**kwargs)
    with pytest.raises(ValidationError, match="TurnSearchWeights"):
        TurnIndex([], weights={"dense": 1})


def test_an_answer_matches_on_the_words_of_the_question_before_it(make_turns, ask):
    # the answer shares no word with the question asked of it; the turn before it does
    turns = make_turns(
        [
            ("Caroline", "Did you finish the watercolour of the harbour?"),
            ("Melanie", "Yes, it is drying on the easel now."),
            ("Caroline", "I cooked lentil soup tonight."),
            ("Melanie", "My dog chewed a shoe."),
        ]
    )
    hits = {h.id: h for h in ask("What about the harbour watercolour?", turns)}
    assert hits["t2"].bm25 > 0 and hits["t2"].lexical_part > 0
    without = {
        h.id: h
        for h in ask("What about the harbour watercolour?", turns, weights=TurnSearchWeights(previous_words=False))
    }
    assert without["t2"].bm25 == 0.0
    # the one turn before, not two: t3 follows t2, which has none of the question's words
    assert hits["t3"].bm25 == 0.0


def test_previous_words_must_be_a_bool():
    with pytest.raises(ValidationError, match="previous_words must be True or False"):
        TurnSearchWeights(previous_words="yes")


# ---- the lexical side --------------------------------------------------------------------------
def test_tokenize_stems_drops_stop_words_and_normalises_numbers():
    assert tokenize("Caroline's paintings were painted on the 8th") == ["carolin", "paint", "paint", "8"]
    assert tokenize("What did you do in May, 2023?") == ["may", "2023"]
    assert tokenize("Day 05") == ["day", "5"]
    assert tokenize("Caroline\u2019s café in München") == ["carolin", "café", "münchen"]
    assert tokenize("The cats", stem=False, stop_words=False) == ["the", "cats"]


def test_bm25_matches_the_formula_on_a_small_corpus():
    index = LexicalIndex([["a", "b"], ["a"], ["c"]], k1=1.2, b=0.75)
    idf_b = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    norm0 = 1.2 * (1 - 0.75 + 0.75 * 2 / (4 / 3))
    expected = idf_b * 1 * 2.2 / (1 + norm0)
    scores = index.scores(["b", "b", "zzz"])  # a repeated query word counts once; unknown words count nothing
    assert scores[0] == pytest.approx(expected)
    assert scores[1] == 0 and scores[2] == 0
    assert LexicalIndex([]).scores(["a"]).shape == (0,)


# ---- the speakers' names left out of the dense signal ----------------------------------------------

PAINTING = [
    ("Caroline", "I've been busy painting - here's a sunset I just finished on a small easel."),
    ("Melanie", "Wow, Caroline, that is awesome! You are so talented, Caroline."),
    ("Caroline", "Thanks! How are the kids?"),
    ("Melanie", "Caroline, the kids are great, we went camping."),
    ("Caroline", "I love hiking in the woods."),
    ("Melanie", "Caroline! Caroline, you are the best friend ever."),
]
DENSE_ALONE = TurnSearchWeights(dense=1.0, lexical=0.0, speaker=0.0, neighbour=0.0, session=0.0)


@pytest.fixture
def names(local_embedder):
    return dict(zip(("Caroline", "Melanie"), local_embedder.embed_documents(["Caroline", "Melanie"])))


@pytest.mark.parametrize("query", ["What kind of art does Caroline make?", "What has Caroline painted?"])
def test_a_reply_that_only_calls_the_asked_about_speaker_by_name_is_not_taken_for_the_answer(
    make_turns, local_embedder, names, query
):
    turns = make_turns(PAINTING)
    vector = local_embedder.embed_query(query)
    raw = TurnIndex(turns, DENSE_ALONE).search(query, vector, 6)
    # on the raw vectors the name carries the replies that say "Caroline" past the painting
    assert ids(raw).index("t1") >= 2 and ids(raw)[0] in {"t2", "t4", "t6"}
    hits = TurnIndex(turns, DENSE_ALONE, name_vectors=names).search(query, vector, 6)
    assert hits[0].id == "t1"
    by_id = {h.id: h for h in raw}
    for h in hits:  # the raw similarity is still reported (the gate and the display use it)
        assert h.similarity == pytest.approx(by_id[h.id].similarity, abs=1e-6)
        assert h.content_similarity != pytest.approx(h.similarity, abs=1e-3)
    assert all(h.content_similarity == pytest.approx(h.similarity, abs=1e-6) for h in raw)


def test_the_dense_part_is_the_cosine_with_the_names_projected_out(make_turns, local_embedder, names):
    turns = make_turns(PAINTING)
    query = "What has Caroline painted?"
    q = np.asarray(local_embedder.embed_query(query), dtype=np.float64)
    hits = TurnIndex(turns, name_vectors=names).search(query, q, 6)
    basis = np.linalg.qr(np.stack([names["Caroline"], names["Melanie"]]).T.astype(np.float64))[0]

    def content(v):
        v = np.asarray(v, dtype=np.float64)
        v = v / np.linalg.norm(v)
        rest = v - basis @ (basis.T @ v)
        return rest / np.linalg.norm(rest)

    expected = np.array([content(t.embedding) @ content(q) for t in turns])
    z = (expected - expected.mean()) / expected.std()
    by_id = {h.id: h for h in hits}
    for t, cos, zed in zip(turns, expected, z):
        assert by_id[t.id].content_similarity == pytest.approx(cos, abs=1e-5)
        assert by_id[t.id].dense_part == pytest.approx(TurnSearchWeights().dense * zed, abs=1e-4)


def test_a_turn_that_is_only_a_name_keeps_its_direction(make_turns, local_embedder, names):
    turns = make_turns([("Melanie", "Caroline"), *PAINTING[:3]])
    query = "Caroline"
    hits = TurnIndex(turns, name_vectors={"Caroline": names["Caroline"]}).search(
        query, local_embedder.embed_query(query), 4
    )
    assert len(hits) == 4 and all(math.isfinite(h.score) and math.isfinite(h.content_similarity) for h in hits)


def test_bad_name_vectors_are_refused(make_turns, names):
    turns = make_turns(PAINTING[:2])
    for bad, says in (
        (["Caroline"], "must map each name"),
        ({"Caroline": np.zeros(len(names["Caroline"]))}, "non-zero"),
        ({"Caroline": [float("nan")] * len(names["Caroline"])}, "non-zero, finite"),
        ({"Caroline": names["Caroline"][:10]}, "has 10 dimensions"),
        ({"Caroline": "Caroline"}, "numbers"),
    ):
        with pytest.raises(ValidationError, match=says) as caught:
            TurnIndex(turns, name_vectors=bad)
        assert caught.value.problems[0].field == "name_vectors"


# ---- a question that asks when, and the turns that say when -----------------------------------------


def test_a_question_asking_when_favours_the_turn_that_says_when(make_turns, ask):
    turns = make_turns(
        [
            ("Alice", "We went to the Lumineers concert."),
            ("Bob", "Nice, I like them too."),
            ("Alice", "We went to the Lumineers concert last Saturday, it was loud."),
            ("Bob", "Which song did they open with?"),
            ("Alice", "My garden needs watering."),
            ("Bob", "The car needs new tyres."),
            ("Alice", "I read a book about sailors."),
            ("Bob", "Pasta tonight?"),
        ]
    )
    when = "When did Alice go to the Lumineers concert?"
    assert ids(ask(when, turns, weights=TurnSearchWeights(time=0.0)))[0] == "t1"  # the shorter match, on words
    assert ids(ask(when, turns, weights=TurnSearchWeights(time=1.0)))[0] == "t3"
    hits = {h.id: h for h in ask(when, turns)}
    assert hits["t3"].time_part == TurnSearchWeights().time and hits["t1"].time_part == 0.0
    # the bonus goes by what a turn says, whoever says it: "Pasta tonight?" says when, the tyres do not
    assert hits["t8"].time_part == TurnSearchWeights().time and hits["t6"].time_part == 0.0
    for h in hits.values():
        assert h.score == pytest.approx(
            h.dense_part + h.lexical_part + h.speaker_part + h.session_part + h.neighbour_part + h.time_part
        )
    # a question that does not ask when gives no one the bonus
    assert all(h.time_part == 0.0 for h in ask("Did Alice go to the Lumineers concert?", turns))


@pytest.mark.parametrize(
    "question, asks",
    [
        ("When did Caroline go to the support group?", True),
        ("when was that?", True),
        ("In what year did Jon lose his job?", True),
        ("Which month did they move?", True),
        ("How long ago did Maria start volunteering?", True),
        ("What did Caroline paint?", False),
        ("Where did they go on holiday?", False),
        ("What does Melanie do whenever she is stressed?", False),
    ],
)
def test_which_questions_ask_when(question, asks):
    assert asks_when(question) is asks


@pytest.mark.parametrize(
    "text, says",
    [
        ("I went to a support group yesterday.", True),
        ("We moved two years ago.", True),
        ("Last weekend we camped.", True),
        ("See you on Friday!", True),
        ("It opened in June.", True),
        ("I started in 2019.", True),
        ("On 7 May we met.", True),
        ("Back in May 2022.", True),
        ("I may go to the march.", False),
        ("I love painting sunsets.", False),
        ("Next time, bring cake.", False),
    ],
)
def test_which_turns_say_when(text, says):
    assert speaks_of_time(text) is says
