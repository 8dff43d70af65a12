"""Text rules shared by retrieval, chunking, ingestion and the persona, each written once.

- :mod:`brain.text.tokenizer` — the local model's WordPiece tokenizer (``tokenizer.json``): where it
  is, and one counting copy per process (the embedder configures its own copy).
- :mod:`brain.text.stop_words` — English function words, and the chat fillers a summary skips.
- :mod:`brain.text.keywords` — keyword tokens: words, stop words dropped, Snowball stems; whether a
  message is in the first person.
- :mod:`brain.text.language` — a text's language as a distribution, and whether two texts are in two
  languages (``py3langid``).
- :mod:`brain.text.bm25` — Okapi BM25 over tokenised documents (pure numpy).
- :mod:`brain.text.markdown` — Markdown sections (fenced code blocks respected) and heading slugs.
- :mod:`brain.text.wording` — counts in words for what people read (``1 memory``, ``2 memories``).
- :mod:`brain.text.progress` — progress of a long job on stderr.
- :mod:`brain.text.printable` — text safe to print: control and format characters escaped.
"""

import importlib
from typing import TYPE_CHECKING

# each name is imported on first use: the CLI's wording must not load numpy (bm25) or the tokenizer
_EXPORTS = {
    "BM25Index": "brain.text.bm25",
    "BM25Union": "brain.text.bm25",
    "tokenize": "brain.text.keywords",
    "MarkdownLine": "brain.text.markdown",
    "MarkdownSection": "brain.text.markdown",
    "markdown_sections": "brain.text.markdown",
    "slugify": "brain.text.markdown",
    "CHAT_FILLERS": "brain.text.stop_words",
    "STOP_WORDS": "brain.text.stop_words",
    "counting_tokenizer": "brain.text.tokenizer",
    "load_tokenizer": "brain.text.tokenizer",
    "package_file": "brain.text.tokenizer",
    "tokenizer_path": "brain.text.tokenizer",
}

__all__ = [
    "CHAT_FILLERS",
    "STOP_WORDS",
    "BM25Index",
    "BM25Union",
    "MarkdownLine",
    "MarkdownSection",
    "counting_tokenizer",
    "load_tokenizer",
    "markdown_sections",
    "package_file",
    "slugify",
    "tokenize",
    "tokenizer_path",
]


def __getattr__(name: str) -> object:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'brain.text' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from brain.text.bm25 import BM25Index, BM25Union
    from brain.text.keywords import tokenize
    from brain.text.markdown import MarkdownLine, MarkdownSection, markdown_sections, slugify
    from brain.text.stop_words import CHAT_FILLERS, STOP_WORDS
    from brain.text.tokenizer import counting_tokenizer, load_tokenizer, package_file, tokenizer_path
