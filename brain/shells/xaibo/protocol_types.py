# typing.List / Optional / Dict on purpose: the protocol methods' signatures equal Xaibo's, annotations included
# ruff: noqa: UP006, UP035, UP045
"""Xaibo's memory protocol classes and result types, or stand-ins of the same shape when brain is
installed without the ``xaibo`` extra (the adapters then work from Python, without the framework)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional

try:
    from xaibo.core.protocols.memory import (
        ChunkingProtocol,
        EmbeddingProtocol,
        MemoryProtocol,
        MemorySearchResult,
        VectorIndexProtocol,
        VectorSearchResult,
    )

    XAIBO_AVAILABLE = True
except ImportError:  # brain without the xaibo extra: the same shapes, no framework
    XAIBO_AVAILABLE = False

    @dataclass
    class MemorySearchResult:  # type: ignore[no-redef]
        memory_id: str
        content: str
        similarity_score: float
        attributes: Optional[Dict[str, Any]] = None

    @dataclass
    class VectorSearchResult:  # type: ignore[no-redef]
        vector_id: str
        similarity_score: float
        attributes: Optional[Dict[str, Any]] = None

    class ChunkingProtocol:  # type: ignore[no-redef]
        pass

    class EmbeddingProtocol:  # type: ignore[no-redef]
        pass

    class VectorIndexProtocol:  # type: ignore[no-redef]
        pass

    class MemoryProtocol:  # type: ignore[no-redef]
        pass


__all__ = [
    "XAIBO_AVAILABLE",
    "ChunkingProtocol",
    "EmbeddingProtocol",
    "MemoryProtocol",
    "MemorySearchResult",
    "VectorIndexProtocol",
    "VectorSearchResult",
]

#: ``dict`` as Xaibo's protocol methods write it: unparameterised at run time, where their signatures must
#: equal Xaibo's, and a JSON object for the type checker
if TYPE_CHECKING:
    XaiboDict = Dict[str, Any]
else:
    XaiboDict = dict
