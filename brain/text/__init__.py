"""Text rules shared by retrieval, chunking, ingestion and the persona, each written once.

- :mod:`brain.text.tokenizer` — the local model's WordPiece tokenizer (``tokenizer.json``): where it
  is, and one counting copy per process (the embedder configures its own copy).
- :mod:`brain.text.stop_words` — English function words, and the chat fillers a summary skips.
- :mod:`brain.text.keywords` — keyword tokens: words, stop words dropped, Snowball stems.
- :mod:`brain.text.bm25` — Okapi BM25 over tokenised documents (pure numpy).
- :mod:`brain.text.markdown` — Markdown sections (fenced code blocks respected) and heading slugs.
"""

from brain.text.bm25 import BM25Index
from brain.text.keywords import tokenize
from brain.text.markdown import MarkdownLine, MarkdownSection, markdown_sections, slugify
from brain.text.stop_words import CHAT_FILLERS, STOP_WORDS
from brain.text.tokenizer import counting_tokenizer, load_tokenizer, package_file, tokenizer_path

__all__ = [
    "CHAT_FILLERS",
    "STOP_WORDS",
    "BM25Index",
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
