"""``brain.embeddings.base``: the :class:`Embedder` interface a custom embedder implements (it lives in
:mod:`brain.providers.embeddings.base`)."""

from brain.providers.embeddings.base import Embedder, Kind

__all__ = ["Embedder", "Kind"]
