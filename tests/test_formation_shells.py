"""Memory formation through the shells: the conversations listing's formation counts, the HTTP route that
re-runs a conversation's batches (with entity-bound tokens), ``brain memory extract``, and the formation
figures of ``brain stats`` and health."""

from __future__ import annotations

from brain.app.browse import list_conversations


def _summary(store, conversation: str, first: int, index: int, state: str | None, **extra) -> str:
    meta = {"formation": state, **extra} if state is not None else extra
    return store.upsert_summary(conversation, f"summary of turns {first}-{first + 1}", turn_range=f"{first}-{first + 1}",
                                summary_index=index, **meta)


# ---- the conversations listing -------------------------------------------------------------------

def test_the_listing_counts_each_conversations_windows_by_formation_state(embedded_store):
    store = embedded_store
    store.upsert_turn("conv-a", "hi", "hello", user_ts="2026-01-02T00:00:00Z")
    store.upsert_turn("conv-b", "hi", "hello", user_ts="2026-01-01T00:00:00Z")
    for index, state in enumerate(["done", "failed", "pending", "pending", None], start=1):
        _summary(store, "conv-a", 2 * index - 1, index, state)
    listed = {c.conversation_id: c for c in list_conversations(store)}
    assert listed["conv-a"].formation == {"pending": 2, "failed": 1, "done": 1}
    assert listed["conv-a"].summaries == 5  # a window formation never ran for is a summary, not a batch
    assert listed["conv-b"].formation == {"pending": 0, "failed": 0, "done": 0}
    assert listed["conv-a"].to_dict()["formation"] == {"pending": 2, "failed": 1, "done": 1}
