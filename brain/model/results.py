"""What the store hands back: plain dataclasses, easy to print, serialise and test."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, TypeVar

import numpy as np
from pydantic import PlainSerializer, PlainValidator


def _vector_of(value: object) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else np.asarray(value, dtype=np.float32)


#: an embedding as a result carries it, and as JSON (a served call's answer) writes it: a list of floats
Vector = Annotated[
    np.ndarray,
    PlainValidator(_vector_of),
    PlainSerializer(lambda vector: [float(x) for x in vector], return_type=list[float], when_used="json"),
]


@dataclass
class Document:
    id: str
    text: str
    metadata: dict[str, Any]
    embedding: Vector | None = field(default=None, repr=False)

    @property
    def type(self) -> str:
        return str(self.metadata.get("type", ""))

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"id": self.id, "text": self.text, "metadata": self.metadata}
        if self.embedding is not None:
            data["embedding"] = [float(x) for x in self.embedding]
        return data


@dataclass
class Supersession:
    """What :meth:`RagStore.supersede` wrote: the ``old`` memory, now superseded, and the ``new`` one that
    replaced it (``kind``: ``update`` or ``contradict``), both as stored."""

    old: Document
    new: Document
    kind: str

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "old": self.old.to_dict(), "new": self.new.to_dict()}


@dataclass
class Hit:
    """A similarity search result (FAQ, persona, summaries)."""

    id: str
    text: str
    metadata: dict[str, object]
    similarity: float

    @property
    def score(self) -> float:
        return self.similarity

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class MemoryHit:
    """A ranked memory with the parts of its score:
    score = similarity_part + lexical_part + importance_part + recency_part (see :mod:`brain.rules.ranking`);
    ``floor``: the relevance it had to reach (lower for an important memory with words in common with
    the query; None without a relevance gate)."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float
    similarity: float
    similarity_part: float
    importance_part: float
    recency_part: float
    lexical_part: float = 0.0
    floor: float | None = None

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        if data["floor"] is None:  # searches rank without a gate: nothing to say
            del data["floor"]
        return data


_H = TypeVar("_H")


class GatedHits(list[_H]):
    """The hits a search returns, best first (e.g. :class:`MemoryHit`), and what the relevance gate
    did: ``candidates`` searched, ``below_floor`` of them less similar than ``floor``
    (None: no floor), ``margin`` (None: none). An empty list with candidates is an answer: nothing
    was relevant enough."""

    def __init__(
        self,
        hits: Iterable[_H] = (),
        /,
        *,
        candidates: int = 0,
        below_floor: int = 0,
        floor: float | None = None,
        margin: float | None = None,
    ):
        super().__init__(hits)
        self.candidates = candidates
        self.below_floor = below_floor
        self.floor = floor
        self.margin = margin

    def gate(self) -> dict[str, int | float | None]:
        """What the gate did, for explanations: candidates, below_floor, floor, margin."""
        return {
            "candidates": self.candidates,
            "below_floor": self.below_floor,
            "floor": self.floor,
            "margin": self.margin,
        }
