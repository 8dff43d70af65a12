"""One search of the memory index, as a value: what :func:`brain.store.memory_index.search_parts` ranks and how.

The index, its partitioned form and every caller share this one object instead of a long parameter list, so a new
option of a search is one field here, read where it is used."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from brain.rules.ranking import ScoreWeights

#: which rows a search ranks: "memories" (active memories of their own), "parts" (active parts),
#: "memories_and_parts", "held" (active and superseded memories, for a search of a past time), or "all"
#: (every row, retired and expired ones too)
Rows = Literal["memories", "parts", "memories_and_parts", "held", "all"]


@dataclass(frozen=True, eq=False)
class MemoryQuery:
    """The exact top ``k`` rows for a unit ``vector``, ranked by ``weights`` at ``now`` (epoch seconds), behind
    their relevance gate (:mod:`brain.rules.ranking`).

    ``scopes`` keeps rows of those scopes (None: every scope); ``rows`` which kinds of row (by default active
    memories when ``scopes`` are given, as an entity's search wants, and every row when not, as an operator's
    all-scopes search wants); ``tags`` rows having every one; ``min_importance`` rows of at least that
    importance; ``equals`` rows whose metadata has exactly those values (e.g. ``{"topic": "ocr"}``);
    ``query_text`` is what the lexical part matches (no lexical part without it); an important memory's lower
    floor needs words in common with it or with one of ``topic_texts`` (e.g. the conversation's latest turns).
    Rows past their expiry at ``now`` are left out unless every row is asked for. ``at`` (epoch seconds): what
    was held true then (active and superseded memories whose validity window holds ``at``, not expired by
    then). ``about``: the scope a message in the first person speaks of; its rows may pass the first-person
    floor (:func:`brain.rules.ranking.own_floor`) instead of their own."""

    vector: np.ndarray
    k: int
    weights: ScoreWeights
    now: float
    scopes: Collection[str] | None = None
    tags: Sequence[str] | None = None
    min_importance: int | None = None
    equals: Mapping[str, object] | None = None
    rows: Rows | None = None
    query_text: str | None = None
    topic_texts: Sequence[str] = ()
    at: float | None = None
    about: str | None = None

    @property
    def kinds(self) -> Rows:
        """The kinds of row ranked, the default filled in."""
        if self.at is not None:
            return "held"
        if self.rows is not None:
            return self.rows
        return "all" if self.scopes is None else "memories"


__all__ = ["MemoryQuery", "Rows"]
