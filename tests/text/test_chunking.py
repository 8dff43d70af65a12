"""TokenChunker: windows of at most N tokens, overlapping, cut between words, covering the text."""

from __future__ import annotations

import random
from bisect import bisect_left

import pytest

from brain.config import Settings
from brain.model.errors import ConfigError
from brain.rules.chunking import TokenChunker
from brain.text import counting_tokenizer

PARAGRAPH = (
    "The ocr specialist reads printed and handwritten text in photos and scans. Photograph the page "
    "flat, in good light, and crop to the text; for scans 300 dpi is enough. The vision specialist "
    "describes scenes and objects but never identifies people. Questions about the household's own "
    "documents go to docs, which answers with the file and the page it used. "
)
LONG = "\n\n".join(f"Section {i}. {PARAGRAPH}" for i in range(12))


def token_offsets(text: str) -> list[tuple[int, int]]:
    return counting_tokenizer().encode(text, add_special_tokens=False).offsets


def test_short_text_is_one_chunk_and_blank_text_none():
    chunker = TokenChunker(200, 40)
    assert chunker.chunk("  How do I scan a receipt?  ") == ["  How do I scan a receipt?  "]
    assert chunker.chunk("") == [] and chunker.chunk(" \n\t ") == []
    assert chunker.count_tokens("") == 0
    assert chunker.count_tokens("How do I scan a receipt?") == 7  # how do i scan a receipt ?


@pytest.mark.parametrize("window, overlap", [(200, 40), (64, 16), (32, 0), (254, 100), (24, 12)])
def test_windows_are_bounded_overlap_and_cover_the_text(window, overlap):
    chunker = TokenChunker(window, overlap)
    total = chunker.count_tokens(LONG)
    assert total > 3 * window or window >= 200
    spans = chunker.spans(LONG)
    chunks = chunker.chunk(LONG)
    assert len(chunks) == len(spans) > 1
    assert chunks == [LONG[a:b] for a, b in spans]  # slices of the original text
    for piece in chunks:
        assert chunker.count_tokens(piece) <= window
        assert piece == piece.strip() and not piece.startswith("##")
    # the cuts fall between words: every chunk starts and ends on a token's edge
    starts = {a for a, _ in token_offsets(LONG)}
    ends = {b for _, b in token_offsets(LONG)}
    assert all(a in starts and b in ends for a, b in spans)
    for (a1, b1), (a2, b2) in zip(spans, spans[1:]):
        assert a1 < a2 and b1 < b2
        if overlap:
            shared = chunker.count_tokens(LONG[a2:b1])
            assert overlap <= shared <= overlap + 8, (shared, LONG[a2:b1])  # rounded to whole words
        else:
            assert a2 >= b1 and not LONG[b1:a2].strip()  # only the whitespace at the cut is left out
    # reassembly: each chunk continues where the previous one ended
    rebuilt = chunks[0]
    for (_, b1), (a2, b2) in zip(spans, spans[1:]):
        rebuilt += LONG[b1:a2] + LONG[a2:b2] if a2 >= b1 else LONG[b1:b2]
    assert rebuilt == LONG.strip()
    # windows are used: no chunk but the last is much shorter than the window
    assert all(chunker.count_tokens(c) >= window - max(8, (window - overlap) // 2) for c in chunks[:-1])


def test_chunks_fit_the_embedder_without_truncation(local_embedder):
    from brain.providers.embeddings.local import MAX_TOKENS, _load_runtime

    chunker = TokenChunker(MAX_TOKENS - 2, 40)
    chunks = chunker.chunk(LONG)
    encodings = _load_runtime().tokenizer.encode_batch(chunks)  # the embedder's own, truncating tokenizer
    for piece, enc in zip(chunks, encodings):
        assert sum(enc.attention_mask) == chunker.count_tokens(piece) + 2 <= MAX_TOKENS
        assert enc.ids[sum(enc.attention_mask) - 1] == counting_tokenizer().token_to_id("[SEP]")


def test_window_above_the_embedder_limit_is_refused():
    assert TokenChunker(254, 40).window_size == 254
    with pytest.raises(ValueError, match="at most 254"):
        TokenChunker(255, 40)
    with pytest.raises(ValueError, match="at most 126"):
        TokenChunker(200, 40, max_tokens=128)
    with pytest.raises(ValueError, match="window_overlap"):
        TokenChunker(100, 100)
    with pytest.raises(ValueError):
        TokenChunker(0, 0)
    chunker = TokenChunker.from_settings(Settings())
    assert (chunker.window_size, chunker.window_overlap, chunker.max_tokens) == (200, 40, 256)
    assert TokenChunker.from_settings(Settings(chunk_window=64, chunk_overlap=8)).window_size == 64
    with pytest.raises(ConfigError, match="BRAIN_CHUNK_WINDOW=300"):
        TokenChunker.from_settings(Settings(chunk_window=300, chunk_overlap=40))
    # an Ollama model takes longer input (the BERT-family limit is used)
    assert (
        TokenChunker.from_settings(
            Settings(chunk_window=500, chunk_overlap=40, embedder="ollama/nomic-embed-text")
        ).max_tokens
        == 512
    )


def test_a_word_longer_than_the_window_is_cut_inside_but_still_fits():
    chunker = TokenChunker(16, 4)
    word = "qzxjkv" * 16  # 96 characters: many word pieces, one word
    text = f"start {word} middle {word} end"
    assert chunker.count_tokens(word) > 16
    spans = chunker.spans(text)
    assert all(chunker.count_tokens(text[a:b]) <= 16 for a, b in spans)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a2 <= b1 for (_, b1), (a2, _) in zip(spans, spans[1:]))  # nothing skipped


@pytest.mark.parametrize("seed", range(3))
def test_random_unicode_text_stays_within_the_window(seed):
    rng = random.Random(seed)
    vocabulary = [
        "the",
        "élan",
        "naïve",
        "don't",
        "e-mail",
        "http://x.org/a?b=c",
        "日本語",
        "😀",
        "\n\n",
        "\t",
        "unbelievably",
        "x" * 120,
        "qzxjkv" * 12,
        "Ω≈ç√",
        "\u0301",
        "\x00",
        "A.B.C",
        "3.14159",
        "—",
        "\u200b",
        "ﬁ",
        "İstanbul",
        "```",
        "##",
    ]
    tokenizer = counting_tokenizer()
    for _ in range(60):
        window = rng.choice([16, 17, 40, 200])
        overlap = rng.randrange(0, window)
        chunker = TokenChunker(window, overlap)
        text = "".join(rng.choice(vocabulary) + rng.choice([" ", "", "\n"]) for _ in range(rng.randrange(1, 400)))
        spans = chunker.spans(text)
        offsets = tokenizer.encode(text, add_special_tokens=False).offsets
        if not offsets:
            continue
        # chunker.count_tokens for every span, in one call of the same tokenizer (a span is never empty)
        assert all(
            len(e.ids) <= window
            for e in tokenizer.encode_batch([text[a:b] for a, b in spans], add_special_tokens=False)
        )
        starts = sorted(start for start, _ in offsets)
        reach = spans[0][1]
        assert spans[0][0] <= offsets[0][0]
        for (a1, _), (a2, b2) in zip(spans, spans[1:]):
            assert a2 > a1
            # no token left out between chunks: no token starts in [reach, a2) (a search, not a scan of every token)
            assert bisect_left(starts, a2) <= bisect_left(starts, reach)
            reach = max(reach, b2)
        assert reach >= offsets[-1][1]
