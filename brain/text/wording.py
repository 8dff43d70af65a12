"""Counts in words for what people read (reports, messages): ``1 memory``, ``2 memories``, ``1 conversation``.

One rule for every report, so that no summary says "2 memorys" or "1 conversations". English plurals of
the nouns brain counts: irregular ones are listed, the rest follow the spelling rules (-y after a
consonant -> -ies; -s, -x, -ch, -sh -> -es; else -s). A noun of several words changes its last one.
"""

from __future__ import annotations

_IRREGULAR = {"is": "are", "was": "were", "it": "them", "this": "these", "has": "have", "does": "do"}


def plural(noun: str) -> str:
    """The plural of ``noun`` (its last word, for a noun of several words)."""
    head, _, last = noun.rpartition(" ")
    if last in _IRREGULAR:
        word = _IRREGULAR[last]
    elif len(last) > 1 and last.endswith("y") and last[-2].lower() not in "aeiou":
        word = last[:-1] + "ies"
    elif last.endswith(("s", "x", "ch", "sh")):
        word = last + "es"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def noun_for(n: int, noun: str) -> str:
    """``noun`` as ``n`` of it is said: singular for exactly one, else plural (``0 memories``)."""
    return noun if n == 1 else plural(noun)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` as said: ``1 memory``, ``0 memories``, ``2 persona sections``."""
    return f"{n} {noun_for(n, noun)}"


__all__ = ["counted", "noun_for", "plural"]
