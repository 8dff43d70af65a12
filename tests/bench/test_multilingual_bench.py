"""bench/bench_multilingual.py: the directions a question is filed under, what counts as found, and the set's
shape (every target asked in other languages than its own, a part held out)."""

from __future__ import annotations

from tests.bench_scripts import bench_script


def test_a_question_is_filed_by_the_languages_of_its_memory_and_its_own():
    bench = bench_script("bench_multilingual.py")
    ask = lambda memory, question, control=False: bench.Question("p", "tuning", "?", question, "m", memory, control)  # noqa: E731
    assert ask("en", "de").direction == "en->xx" and ask("en", "de").side == "de"
    assert ask("ja", "en").direction == "xx->en" and ask("ja", "en").side == "ja"
    assert ask("ja", "ko").direction == "xx->yy" and ask("ja", "ko").side == "ko"
    assert ask("ja", "ja", control=True).direction == "same"


def test_a_critical_fact_is_found_anywhere_in_the_prompt_any_other_memory_only_in_its_section():
    bench = bench_script("bench_multilingual.py")
    outcome = lambda **kw: bench.Outcome("tuning", "en->xx", "de", **kw)  # noqa: E731
    assert outcome(critical=True, in_prompt=True).found
    assert not outcome(critical=False, in_prompt=True).found
    assert outcome(shown=True, in_prompt=True).found


def test_the_default_set_asks_every_target_in_other_languages_and_holds_half_its_people_out():
    bench = bench_script("bench_multilingual.py")
    data = bench.load()
    people = data["people"]
    assert len(people) == 20 and {p["split"] for p in people} == {"tuning", "held_out"}
    assert sorted(data["split"]["held_out"]) == sorted(p["entity"] for p in people if p["split"] == "held_out")
    questions = bench.questions_of(data)
    assert {q.direction for q in questions} == {"en->xx", "xx->en", "xx->yy"}
    assert all(q.language != q.memory_language for q in questions)
    assert sum(q.critical for q in questions) == 60  # one critical fact per person, three questions each
