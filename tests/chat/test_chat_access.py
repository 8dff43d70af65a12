"""brain.features.chat.last_used: a recorded use goes to the index at once and to Chroma at the flush, never to the
mirror (the documented choice); a failed flush keeps the uses; a deleted memory is not brought back."""

from __future__ import annotations

import time

import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.chat import ChatMemory, last_used
from brain.features.mirror import verify_mirror
from brain.model.errors import NotFound, StoreUnavailable
from brain.store.indexes import memory_index

NOW = 1_800_000_000.0


@pytest.fixture
def tracked(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", track_access=True, summarizer="extractive", memory_top_k=1)
    with open_store(settings, embedder=local_embedder) as store, \
            ChatMemory(store, start_worker=False, clock=lambda: NOW) as chat:
        yield chat


def test_a_use_reaches_the_index_at_once_chroma_at_the_flush_and_never_the_mirror(tracked):
    chat, store = tracked, tracked.store
    cat = chat.remember("The user's cat is called Miso.", importance=4, tags=["pets"])
    mirrored_before = store.mirror.get(cat)[0].metadata
    chat.build_context(None, "what is my cat called?")
    assert memory_index(store).metadata(cat)["last_used"] == NOW  # ranking sees it now
    assert chat.access.pending() == 1
    assert "last_used" not in store.get_one(cat).metadata  # not persisted yet

    assert chat.flush_access() == 1 and chat.access.pending() == 0
    stored = store.get_one(cat).metadata
    assert stored["last_used"] == NOW
    (row,) = store.mirror.get(cat)
    assert "last_used" not in row.metadata and row.metadata == mirrored_before  # the mirror row is untouched
    assert {k: v for k, v in stored.items() if k != "last_used"} == row.metadata
    assert verify_mirror(store, store.mirror).ok
    assert chat.flush_access() == 0  # nothing left


def test_a_failed_flush_keeps_the_uses_for_the_next(tracked, monkeypatch, caplog):
    chat, store = tracked, tracked.store
    cat = chat.remember("The user's cat is called Miso.")
    chat.build_context(None, "what is my cat called?")

    def unavailable(store, used):
        raise StoreUnavailable("chroma server restarting")

    monkeypatch.setattr(last_used, "record_memory_use", unavailable)
    assert chat.flush_access() == 0
    assert chat.access.pending() == 1 and "could not persist the last use of 1 memories" in caplog.text
    monkeypatch.undo()
    assert chat.flush_access() == 1
    assert store.get_one(cat).metadata["last_used"] == NOW


def test_a_memory_deleted_before_the_flush_stays_deleted(tracked):
    chat, store = tracked, tracked.store
    cat = chat.remember("The user's cat is called Miso.")
    chat.build_context(None, "what is my cat called?")
    store.delete(cat)
    assert chat.flush_access() == 0
    with pytest.raises(NotFound):
        store.get_one(cat)


def test_the_worker_flushes_on_its_own(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", track_access=True, summarizer="extractive", memory_top_k=1)
    with open_store(settings, embedder=local_embedder) as store, ChatMemory(store, clock=lambda: NOW) as chat:
        cat = chat.remember("The user's cat is called Miso.")
        chat.build_context(None, "what is my cat called?")
        for _ in range(300):  # the worker flushes about every second; generous for a shared machine
            if store.get_one(cat).metadata.get("last_used") == NOW:
                break
            time.sleep(0.1)
        assert store.get_one(cat).metadata["last_used"] == NOW
        assert chat.access.pending() == 0
