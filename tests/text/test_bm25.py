"""BM25's lexical match: on a 0..1 scale of what the query itself could score, so that a search that sees few
documents cannot make a poor match look whole."""

from __future__ import annotations


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
    for theirs in ("When is Nadia's son's birthday?", "What should we know before visiting?", "Where does she live?"):
        assert not in_first_person(theirs), theirs
