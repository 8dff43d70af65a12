"""turn_search's session part: turns of the sitting where the question's best match lies rank higher."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from brain.model.errors import ValidationError
from brain.model.results import Document
from brain.rules.turn_search import SESSION_GAP_SECONDS, TurnIndex, TurnSearchWeights, search_turns

START = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


@pytest.fixture
def make_turns(local_embedder):
    def make(rows):
        """rows: (minutes after START, speaker, text)."""
        vectors = local_embedder.embed_documents([text for _, _, text in rows])
        turns = []
        for i, (minutes, speaker, text) in enumerate(rows):
            when = START + timedelta(minutes=minutes)
            turns.append(Document(id=f"t{i + 1}", text=text, embedding=vectors[i], metadata={
                "type": "turn", "conversation_id": "conv-sessions", "turn_index": i + 1, "speaker": speaker,
                "role": "user" if i % 2 == 0 else "assistant", "timestamp": when.isoformat(),
                "ts_epoch": when.timestamp()}))
        return turns
    return make


DAY = 24 * 60
TWO_SITTINGS = [
    (0, "Ann", "The weather was grey all morning."),
    (1, "Ben", "I fixed the fence in the back garden."),
    (2, "Ann", "We watched a film about penguins."),
    (3, "Ben", "Dinner was soup again."),
    (DAY, "Ann", "I booked the flights to Lisbon for the marathon."),
    (DAY + 1, "Ben", "Great, the hotel is near the river."),
    (DAY + 2, "Ann", "The race starts at eight in the morning."),
    (DAY + 3, "Ben", "I will pack the running shoes."),
]


def test_a_pause_longer_than_the_gap_starts_a_session(make_turns):
    gap = SESSION_GAP_SECONDS // 60
    turns = make_turns([(0, "A", "one"), (gap, "B", "two"), (2 * gap + 1, "A", "three"), (2 * gap + 2, "B", "four")])
    assert TurnIndex(turns).sessions.tolist() == [0, 0, 1, 1]  # exactly the gap: the same sitting


def test_turns_of_the_best_matching_session_get_its_share(make_turns, local_embedder):
    turns = make_turns(TWO_SITTINGS)
    query = "When does the Lisbon marathon start?"
    hits = search_turns(query, local_embedder.embed_query(query), turns, len(turns))
    by_id = {h.id: h for h in hits}
    first, second = [by_id[f"t{i}"] for i in range(1, 5)], [by_id[f"t{i}"] for i in range(5, 9)]
    assert all(h.session_part > 0 for h in second) and all(h.session_part < 0 for h in first)
    assert len({round(h.session_part, 9) for h in second}) == 1  # one value per session
    for h in hits:
        assert h.score == pytest.approx(h.dense_part + h.lexical_part + h.speaker_part + h.session_part
                                        + h.neighbour_part)
    # session part = 0.3 * standardised (over the turns) best own score of the turn's session
    own = {h.id: h.dense_part + h.lexical_part + h.speaker_part for h in hits}
    best = np.array([max(own[f"t{i}"] for i in range(1, 5))] * 4 + [max(own[f"t{i}"] for i in range(5, 9))] * 4)
    expected = 0.3 * (best - best.mean()) / best.std()
    assert [by_id[f"t{i}"].session_part for i in range(1, 9)] == pytest.approx(expected.tolist())
    # "The race starts at eight" shares little with the question but lies in the sitting that matches
    without = search_turns(query, local_embedder.embed_query(query), turns, len(turns), TurnSearchWeights(session=0))
    rank = [h.id for h in hits].index("t7")
    assert rank <= [h.id for h in without].index("t7")


def test_one_session_or_no_times_adds_nothing(make_turns, local_embedder):
    same_day = make_turns([(i, "A" if i % 2 == 0 else "B", text) for i, (_, _, text) in enumerate(TWO_SITTINGS)])
    timeless = [Document(id=t.id, text=t.text, embedding=t.embedding,
                         metadata={k: v for k, v in t.metadata.items() if k not in ("timestamp", "ts_epoch")})
                for t in make_turns(TWO_SITTINGS)]
    for turns in (same_day, timeless):
        assert set(TurnIndex(turns).sessions.tolist()) == {0}
        hits = search_turns("Lisbon marathon", local_embedder.embed_query("Lisbon marathon"), turns, len(turns))
        assert all(h.session_part == 0 for h in hits)


@pytest.mark.parametrize("bad", [-0.1, float("inf"), "0.3", True])
def test_the_session_weight_is_checked(bad):
    with pytest.raises(ValidationError, match="session must be a finite number >= 0"):
        TurnSearchWeights(session=bad)


def test_the_previous_turn_of_another_session_lends_no_words(make_turns, local_embedder):
    query = "What about the harbour watercolour?"
    question = "Did you finish the watercolour of the harbour?"
    answer = "Yes, it is drying on the easel now."
    for pause, lends in ((1, True), (DAY, False)):
        turns = make_turns([(0, "Cam", question), (pause, "Mel", answer), (pause + 1, "Cam", "Soup tonight.")])
        hits = {h.id: h for h in search_turns(query, local_embedder.embed_query(query), turns, 3)}
        assert (hits["t2"].bm25 > 0) is lends
