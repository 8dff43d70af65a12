"""Keyword tokens: what a text's words are, for matching by word rather than by meaning.

Lower-case words of any script (inner apostrophes cut: "caroline's" -> "caroline"), ordinals and
zero-padded numbers reduced to the number ("8th", "08" -> "8", so they meet a date's day), stop
words (:mod:`brain.text.stop_words`) dropped and Snowball-stemmed ("painting" -> "paint"). One
definition, so that a query and the documents it is matched against are always cut the same way.
"""

from __future__ import annotations

import re

import Stemmer

from brain.text.stop_words import STOP_WORDS

_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # letters and digits of any script, inner apostrophes kept
_ORDINAL_RE = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_stemmer = Stemmer.Stemmer("english")


def _words(text: str) -> list[str]:
    out = []
    for word in _WORD_RE.findall(text.lower().replace("\u2019", "'")):
        word = word.split("'", 1)[0]
        ordinal = _ORDINAL_RE.match(word)
        if ordinal:  # "8th" matches the "8" of a date
            word = ordinal.group(1)
        if word.isdigit():
            word = word.lstrip("0") or "0"  # "05" and "5" are the same day
        out.append(word)
    return out


#: the words by which a message speaks of its sender; English only: another language's message is never
#: taken for the first person, so it keeps the one floor
FIRST_PERSON_WORDS = frozenset({"i", "me", "my", "mine", "myself"})


def in_first_person(text: str) -> bool:
    """Whether ``text`` speaks of its sender ("When is my kid's birthday?", "What do I do for a living?"):
    a question asked for an entity in the first person is about that entity."""
    return any(w in FIRST_PERSON_WORDS for w in _words(text))


def tokenize(text: str, *, stem: bool = True, stop_words: bool = True) -> list[str]:
    """The keyword tokens of ``text``: lower-case words, stop words dropped, Snowball-stemmed.
    ``stem=False, stop_words=False`` gives the plain words (e.g. to compare names)."""
    words = _words(text)
    if stop_words:
        words = [w for w in words if w not in STOP_WORDS]
    return _stemmer.stemWords(words) if stem else words


__all__ = ["FIRST_PERSON_WORDS", "in_first_person", "tokenize"]
