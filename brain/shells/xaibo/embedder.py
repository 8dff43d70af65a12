# typing.Optional on purpose: the protocol methods' signatures equal Xaibo's, annotations included
# ruff: noqa: UP045
"""Xaibo's ``EmbeddingProtocol`` over brain's configured embedder.

No ``from __future__ import annotations`` here: Xaibo resolves a module's dependencies from the
*evaluated* annotations of ``__init__`` (see :mod:`brain.shells.xaibo`).
"""

import asyncio
from typing import Any, Optional

import numpy as np

from brain.model.errors import ConfigError, UnsupportedModality
from brain.shells.xaibo.protocol_types import EmbeddingProtocol
from brain.shells.xaibo.shared import check_text, own_config, settings_from_config, shared_embedder


class BrainEmbedder(EmbeddingProtocol):
    """``text_to_embedding(text)`` through brain's configured embedder (unit-length float32).

    Config: ``kind`` — ``document`` (default) or ``query``, which matters for embedders that embed
    the two differently (nomic's ``search_document:`` / ``search_query:`` prefixes); Xaibo uses
    one embedder for both, so pick the side you store with. Images and audio raise
    :class:`UnsupportedModality`.
    """

    _KEYS = ("kind",)

    def __init__(self, config: Optional[dict[str, Any]] = None, *, store=None, embedder=None, settings=None):  # type: ignore[no-untyped-def]  # xaibo injects what any annotation but config names
        if settings is not None or store is not None or embedder is not None:
            parsed, own = settings, own_config(config, self._KEYS, "BrainEmbedder")
        else:
            parsed, own = settings_from_config(config, self._KEYS, "BrainEmbedder")
        self.kind = own.get("kind", "document")
        if self.kind not in ("document", "query"):
            raise ConfigError(f"BrainEmbedder: kind must be 'document' or 'query', got {self.kind!r}")
        if embedder is not None:
            self.embedder = embedder
        elif store is not None:
            self.embedder = store.embedder
        else:
            self.embedder = shared_embedder(parsed)

    async def text_to_embedding(self, text: str) -> np.ndarray:
        check_text(text)
        if self.kind == "query":
            return np.array(await asyncio.to_thread(self.embedder.embed_query, text))
        return np.asarray((await asyncio.to_thread(self.embedder.embed_documents, [text]))[0])

    async def image_to_embedding(self, image_data: bytes) -> np.ndarray:
        raise self._unsupported("image", "image_data")

    async def audio_to_embedding(self, audio_data: bytes) -> np.ndarray:
        raise self._unsupported("audio", "audio_data")

    def _unsupported(self, modality: str, argument: str) -> UnsupportedModality:
        return UnsupportedModality(
            f"the embedder {self.embedder.name} embeds text only; {modality} embeddings are not supported. "
            f"Give {argument} to an EmbeddingProtocol module that embeds {modality}, or describe the {modality} "
            f"in text and use text_to_embedding"
        )
