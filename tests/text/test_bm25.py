"""BM25's lexical match: on a 0..1 scale of what the query itself could score, so that a search that sees few
documents cannot make a poor match look whole."""

from __future__ import annotations

import pytest


def test_a_poor_match_stays_poor_however_few_documents_a_search_sees():
    """The lexical match is over what the query itself could score: a document holding one of a question's
    three words matches a third of it, whether or not any visible document holds the other two."""
    from brain.text.bm25 import BM25Index, BM25Union
    from brain.text.keywords import tokenize

    query = tokenize("When did Caroline go to the LGBTQ support group?")
    own = BM25Index([tokenize("Jon runs a support line for his dance studio"), tokenize("Jon likes hiking")])
    alone = own.scores(query) / own.max_score(query)
    assert alone.max() < 0.4  # with the words no visible document holds left out of the divisor: 1.0
    everyone = BM25Index([tokenize("Caroline went to an LGBTQ support group"), tokenize("Jon likes hiking")])
    union = BM25Union([own, everyone])
    assert (union.scores(query) / union.max_score(query))[:2].max() < 0.4


def test_a_query_word_no_document_holds_weighs_as_much_as_the_rarest():
    from brain.text.bm25 import BM25Index

    index = BM25Index([["alpha"], ["beta"], ["alpha", "gamma"]])
    assert index.idf("missing") == index.unseen_idf() > index.idf("beta") > index.idf("alpha")
    assert index.max_score(["alpha", "missing"]) == (index.idf("alpha") + index.unseen_idf()) * 2.2


def test_a_message_in_the_first_person_is_told_from_one_about_someone_else():
    from brain.text.keywords import in_first_person

    for mine in ("When is my kid's birthday?", "What do I do for a living?", "I'm off to Porto", "Remind me, please"):
        assert in_first_person(mine), mine
    for theirs in (
        "When is Nadia's son's birthday?",
        "What should we know before visiting?",
        "Where does she live?",
        "What J.K. Rowling quote does Tim like?",
        "Is the EU a customs union?",
    ):
        assert not in_first_person(theirs), theirs


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        ("Kann ich heute Abend Erdnüsse essen?", "Wie hoch ist die Zugspitze?"),
        ("¿Qué alergias tengo?", "¿Quién escribió Cien años de soledad?"),
        ("O que eu faço aos sábados?", "Qual é a capital do Brasil?"),
        ("Quel instrument est-ce que je joue ?", "Qui a écrit Les Misérables ?"),
        ("ピーナッツを食べても大丈夫だっけ？", "富士山の高さは？"),
        ("我可以吃花生酱吗？", "我们明天去哪里？"),
        ("우리 강아지 이름이 뭐였지?", "한국의 수도는 어디인가요?"),
        ("Какое лекарство мне нужно принимать?", "Кто написал «Войну и мир»?"),
        ("Köpeğimin ilacını ne zaman vermeliyim?", "Türkiye'nin başkenti neresidir?"),
        ("إلى أين سأسافر في فبراير؟", "ما هي عاصمة مصر؟"),
    ],
)
def test_the_first_person_is_read_in_other_languages_too(mine: str, theirs: str) -> None:
    from brain.text.keywords import in_first_person

    assert in_first_person(mine), mine
    assert not in_first_person(theirs), theirs


def test_no_english_message_of_the_shipped_sets_is_newly_taken_for_the_first_person() -> None:
    """The other languages' words must not fire on English: every English text of the shipped sets is in the
    first person by the other languages' words only if it is by English's."""
    import json
    from pathlib import Path

    from brain.text.keywords import FIRST_PERSON_BY_LANGUAGE, in_first_person, tokenize

    root = Path(__file__).resolve().parents[2]
    english = FIRST_PERSON_BY_LANGUAGE["en"]

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        return [s for item in items for s in strings(item)]

    texts = [
        t
        for name in ("critical_facts.json", "first_person_facts.json")
        for t in strings(json.loads((root / "tests" / "fixtures" / name).read_text(encoding="utf-8")))
    ]
    for name in ("multilingual_memories.json", "multilingual_people.json"):
        data = json.loads((root / "tests" / "fixtures" / name).read_text(encoding="utf-8"))
        for person in data["people"]:
            for memory in person["memories"]:
                asked = [memory, *memory.get("questions", ()), *memory.get("control", ())]
                texts += [q["text"] for q in asked if q["language"] == "en"]
        texts += data["unrelated"]["en"]
    assert len(texts) > 500
    for text in texts:
        if in_first_person(text):
            assert any(w in english for w in tokenize(text, stem=False, stop_words=False)), text
