"""brain.text: the tokenizer, stop words, keyword tokens, BM25 and Markdown sections, each used by several modules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from brain.features.chat import TokenCounter
from brain.features.ingest import parse_markdown
from brain.features.persona import split_sections
from brain.model.schemas import SummaryMetadata, format_turn_range, parse_turn_range
from brain.providers.summarizers import ExtractiveSummarizer, TurnText
from brain.rules.chunking import TokenChunker
from brain.text import (
    CHAT_FILLERS,
    STOP_WORDS,
    BM25Index,
    counting_tokenizer,
    load_tokenizer,
    markdown_sections,
    slugify,
    tokenize,
)

# ---- Markdown sections ------------------------------------------------------------------------------

FENCED = """Intro line.

## Install
Run this:

```sh
# not a heading: a shell comment
pip install brain
```

~~~~
## still code
~~~
## still code: a shorter fence does not close a longer one
~~~~

## Use
Ask it.
"""


def test_a_hash_line_inside_a_code_fence_is_code_not_a_heading():
    sections = markdown_sections(FENCED.splitlines())
    assert [(s.level, s.title) for s in sections] == [(0, ""), (2, "Install"), (2, "Use")]
    install = sections[1]
    assert "# not a heading: a shell comment" in install.text and "## still code" in install.text
    code = [line.text for line in install.body if line.code]
    assert code[0] == "```sh" and code[-1] == "~~~~" and "pip install brain" in code
    assert not any(line.code for line in sections[2].lines)


def test_heading_rules_follow_commonmark():
    lines = ["   ### Indented", "#hashtag is text", "# C#", "## Closed ##", "##", "    # four spaces is code"]
    sections = markdown_sections(lines, first_line=10)
    assert [(s.level, s.title) for s in sections] == [(0, ""), (3, "Indented"), (1, "C#"), (2, "Closed"), (2, "")]
    assert sections[1].lines[0].number == 10 and sections[1].text == "#hashtag is text"
    assert sections[-1].text == "# four spaces is code"
    assert slugify("Web search!") == "web_search" and slugify("###") == "section"


def test_persona_does_not_split_at_a_heading_inside_a_code_fence():
    # a heading pattern that ignores fences would also cut at the three '#' lines inside the code blocks
    sections = split_sections(FENCED)
    assert [s.topic for s in sections] == ["core", "install", "use"]
    assert "pip install brain" in sections[1].text and sections[1].heading == "Install"


def test_persona_and_knowledge_base_cut_a_file_at_the_same_headings():
    kb = parse_markdown(FENCED, "file")
    kb_sections = [d.meta.get("kb_heading", "") for d in kb.drafts if d.meta["kb_kind"] == "section"]
    assert kb_sections == [s.heading for s in split_sections(FENCED)] == ["", "Install", "Use"]
    text = "# C#\nA language.\n   ## Indented\nStill a heading.\n"
    assert [d.meta["kb_heading"] for d in parse_markdown(text, "f").drafts] == [s.heading for s in split_sections(text)]


# ---- stop words and keyword tokens ------------------------------------------------------------------

def test_keyword_tokens_drop_stop_words_and_stem():
    assert tokenize("What did you paint on the 8th?") == ["paint", "8"]
    assert tokenize("Caroline's paintings", stem=False, stop_words=False) == ["caroline", "paintings"]
    assert STOP_WORDS.isdisjoint(CHAT_FILLERS) and "thanks" not in STOP_WORDS


def test_the_summariser_uses_the_shared_stop_words():
    # "ought" is a function word; the summariser's own copy of the list missed it, so the two "ought"
    # sentences outscored the one about the cats.
    turns = [TurnText(1, "user", "You ought to rest. You ought to eat. Cats eat fish.")]
    assert ExtractiveSummarizer(max_chars=40).summarize(turns) == "User: Cats eat fish."
    fillers = [TurnText(1, "user", "Okay thanks really sure. Brain stores memories.")]
    assert ExtractiveSummarizer(max_chars=40).summarize(fillers) == "User: Brain stores memories."


# ---- BM25 -------------------------------------------------------------------------------------------

def _bm25_oracle(docs: list[list[str]], query: list[str], k1: float, b: float) -> list[float]:
    """Okapi BM25 written out term by term (Robertson & Zaragoza 2009, with the non-negative idf)."""
    n = len(docs)
    avg = sum(map(len, docs)) / n
    out = []
    for doc in docs:
        score = 0.0
        for term in set(query):
            tf = doc.count(term)
            df = sum(term in d for d in docs)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avg))
        out.append(score)
    return out


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (2.0, 0.0), (0.5, 1.0)])
def test_bm25_matches_the_formula(k1, b):
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(12)]
    docs = [list(rng.choice(vocab, size=int(rng.integers(1, 15)))) for _ in range(40)]
    query = ["w1", "w3", "w3", "w11", "absent"]
    assert np.allclose(BM25Index(docs, k1=k1, b=b).scores(query), _bm25_oracle(docs, query, k1, b))
    assert BM25Index([], k1=k1, b=b).scores(query).shape == (0,)


# ---- the tokenizer ----------------------------------------------------------------------------------

def test_one_counting_tokenizer_for_chunker_and_context_budget():
    text = "Brain remembers what you told it. " * 60  # well over the embedder's 256 tokens
    tokenizer = counting_tokenizer()
    assert tokenizer is counting_tokenizer()
    count = len(tokenizer.encode(text, add_special_tokens=False).ids)
    assert count > 256  # counting does not truncate
    assert TokenChunker().count_tokens(text) == count == TokenCounter().count([text])[0]
    assert TokenCounter().method.startswith("wordpiece")


def test_a_loaded_tokenizer_is_the_callers_own():
    mine = load_tokenizer()
    mine.enable_truncation(max_length=8)
    assert mine is not counting_tokenizer()
    assert len(counting_tokenizer().encode("one two three four five six seven eight nine ten").ids) > 8


# ---- turn ranges ------------------------------------------------------------------------------------

def test_turn_range_is_parsed_and_checked_in_one_place():
    assert parse_turn_range("3-10") == (3, 10) and format_turn_range(3, 10) == "3-10"
    for bad in ("0-4", "5-3", "1-", "a-b", " 1-2", 7, None):
        with pytest.raises(ValueError, match="turn_range"):
            parse_turn_range(bad)
    with pytest.raises(ValueError, match="1 <= start <= end"):
        SummaryMetadata(type="summary", conversation_id="conv-1", turn_range="5-3")
