"""The providers the settings name: the one place that reads :class:`~brain.config.Settings` to build an
embedder, a summariser or memory formation's extractor. The providers themselves take plain arguments
(model, URL, time limits), so this layer sits above both configuration and the providers, and below the
store, the first of their users."""

from __future__ import annotations

from brain.wiring.providers import (
    formation_off_reason,
    get_embedder,
    get_embedder_named,
    get_extractor,
    get_summarizer,
)

__all__ = ["formation_off_reason", "get_embedder", "get_embedder_named", "get_extractor", "get_summarizer"]
