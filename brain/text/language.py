"""Which language a text is in, as a distribution, and whether two texts are in different languages.

A question in one language and its memory in another share no word, so the relevance floor's lexical part
cannot lift the memory and the similarities of a cross-lingual embedder sit lower than within one language.
The memory index gives such a pair a floor of its own (:mod:`brain.rules.relevance`), and this module says
which pairs those are: ``py3langid`` (langid.py's naive Bayes over byte n-grams, BSD-3-Clause, numpy only,
its model in its wheel; nothing read but that file, no network) restricted to :data:`LANGUAGES`, the
languages the shipped cross-lingual embedder was trained on. A pair is across languages when the chance
that both texts are in the same language, ``sum_l p(l | a) p(l | b)``, is below :data:`ACROSS_BELOW`: short
or mixed texts whose language is unsure count as the same language, which keeps the usual floor.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from brain.model.errors import ConfigError

#: the languages told apart (ISO 639-1): USE multilingual v3's sixteen (zh for both Chinese scripts)
LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh")
#: below this chance of one language for both texts, they are taken to be in two languages. On the
#: multilingual set's tuning people and 300 x 300 English LoCoMo question/observation pairs, every pair
#: across languages scored below 0.02 and every pair within one above 0.3 (bench/MULTILINGUAL_RESULTS.md)
ACROSS_BELOW = 0.05
#: characters read of a text: the language shows in its first sentences, and the cost grows with length
READ_CHARS = 600

_identifier: object = None  # py3langid's LanguageIdentifier, restricted to LANGUAGES; read-only once built
_lock = threading.Lock()


def _load() -> Any:
    global _identifier
    if _identifier is not None:
        return _identifier
    with _lock:
        if _identifier is None:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier
            except ImportError as exc:
                raise ConfigError(
                    f"brain needs the py3langid package to tell a text's language ({exc}); reinstall brain "
                    f"(`pip install brain`) or `pip install py3langid==0.4.0`"
                ) from None
            identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            identifier.set_languages(list(LANGUAGES))
            _identifier = identifier
    return _identifier


def distribution(text: str) -> np.ndarray:
    """The probability of each of :data:`LANGUAGES` (in that order) for ``text``; uniform for a text with
    nothing to go by."""
    ranked = dict(_load().rank(text[:READ_CHARS]))
    probs = np.array([ranked.get(code, 0.0) for code in LANGUAGES], dtype=np.float64)
    total = probs.sum()
    return probs / total if total > 0 else np.full(len(LANGUAGES), 1.0 / len(LANGUAGES))


def in_another_language(rows: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """By row of ``rows`` (distributions, one per row), whether that text is surely in another language than
    the one of distribution ``asked``: the chance that both are in one language, ``rows @ asked``, is below
    :data:`ACROSS_BELOW`."""
    both: np.ndarray = np.asarray(rows, dtype=np.float64) @ asked
    return both < ACROSS_BELOW


def in_two_languages(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two texts with distributions ``a`` and ``b`` are surely in two languages."""
    return bool(in_another_language(np.asarray(a)[None, :], b)[0])


__all__ = ["ACROSS_BELOW", "LANGUAGES", "distribution", "in_another_language", "in_two_languages"]
