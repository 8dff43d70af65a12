# typing.List / Optional / Dict on purpose: the protocol methods' signatures equal Xaibo's, annotations included
# ruff: noqa: UP006, UP035, UP045
"""Xaibo's ``ChunkingProtocol`` over brain's token-window chunker.

No ``from __future__ import annotations`` here: Xaibo resolves a module's dependencies from the
*evaluated* annotations of ``__init__`` (see :mod:`brain.shells.xaibo`).
"""

import asyncio
from typing import Any, List, Optional

from brain.model.errors import ConfigError, ValidationError
from brain.rules.chunking import TokenChunker
from brain.shells.xaibo.protocol_types import ChunkingProtocol
from brain.shells.xaibo.shared import own_config, settings_from_config


class BrainChunker(ChunkingProtocol):
    """``chunk(text)``: the token-window chunker of :mod:`brain.rules.chunking` (MiniLM WordPiece tokens).

    Config: ``window_size`` and ``window_overlap`` (tokens; defaults ``BRAIN_CHUNK_WINDOW`` /
    ``BRAIN_CHUNK_OVERLAP``), checked against the embedder's input limit.
    """

    _KEYS = ("window_size", "window_overlap")

    def __init__(self, config: Optional[dict[str, Any]] = None, *, settings=None, chunker=None):  # type: ignore[no-untyped-def]  # xaibo injects what any annotation but config names
        if chunker is not None:
            if not isinstance(chunker, TokenChunker):
                raise ConfigError(f"BrainChunker: chunker must be a brain TokenChunker, got {type(chunker).__name__}")
            self.chunker = chunker
            return
        if settings is not None:
            base, own = settings, own_config(config, self._KEYS, "BrainChunker")
        else:
            base, own = settings_from_config(config, self._KEYS, "BrainChunker")
        window = own.get("window_size", base.chunk_window)
        overlap = own.get("window_overlap", base.chunk_overlap)
        default = TokenChunker.from_settings(base)
        try:
            self.chunker = TokenChunker(window, overlap, max_tokens=default.max_tokens)
        except ValueError as exc:
            raise ConfigError(f"BrainChunker: window_size={window!r} / window_overlap={overlap!r}: {exc}") from None

    @property
    def window_size(self) -> int:
        return self.chunker.window_size

    @property
    def window_overlap(self) -> int:
        return self.chunker.window_overlap

    async def chunk(self, text: str) -> List[str]:
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        return await asyncio.to_thread(self.chunker.chunk, text)
