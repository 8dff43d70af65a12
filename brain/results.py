"""What the store hands back: plain dataclasses, easy to print, serialise and test."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class Document:
    id: str
    text: str
    metadata: dict[str, Any]
    embedding: np.ndarray | None = field(default=None, repr=False)

    @property
    def type(self) -> str:
        return self.metadata.get("type", "")

    def to_dict(self) -> dict[str, Any]:
        data = {"id": self.id, "text": self.text, "metadata": self.metadata}
        if self.embedding is not None:
            data["embedding"] = [float(x) for x in self.embedding]
        return data


@dataclass
class Hit:
    """A similarity search result (FAQ, persona, summaries)."""

    id: str
    text: str
    metadata: dict[str, Any]
    similarity: float

    @property
    def score(self) -> float:
        return self.similarity

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MemoryHit:
    """A ranked memory with the parts of its score: score = similarity_part + importance_part + recency_part."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float
    similarity: float
    similarity_part: float
    importance_part: float
    recency_part: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
