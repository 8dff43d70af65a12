"""Evicted parts saved one file each (the embedded store): read back instead of Chroma while current, dropped
before a write touches their scope (a deleted text never stays on disk in one), trusted across a restart
only through the signed snapshot's digests, and deleted when no snapshot names them (a kill -9)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.store.part_files import MIN_ROWS
from brain.store.snapshot import write_archive

DIM = 384
PER_ENTITY = MIN_ROWS + 50
ENTITIES = ["ann", "ben", "cat"]


def unit(rng, n):
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill(store) -> dict[str, set[str]]:
    rng = np.random.default_rng(4)
    ids: dict[str, set[str]] = {}
    for entity in ENTITIES:
        docs = [{"text": f"{entity} note {j} about tea and gardens", "type": "memory", "entity": entity,
                 "embedding": v} for j, v in enumerate(unit(rng, PER_ENTITY))]
        ids[entity] = set(store.upsert_docs(docs))
    ids["global"] = set(store.upsert_docs([{"text": "The office opens at nine", "type": "memory",
                                            "embedding": unit(rng, 1)[0]}]))
    return ids


def everything(store, entity) -> set[str]:
    q = np.random.default_rng(len(entity)).standard_normal(DIM)
    return {h.id for h in store.retrieve_memories("tea", k=1000, entity=entity, query_vector=q, relevance=False)}


@pytest.fixture
def settings(tmp_path):
    # one entity part (about 0.8 MB) fits the budget: serving another evicts it
    return Settings(data_dir=tmp_path / "data", index_memory_mb=1.0)


def serve_each(store, ids):
    for entity in ENTITIES:
        assert everything(store, entity) == ids[entity] | ids["global"]
    store.state.part_files.wait()


def test_an_evicted_part_is_read_back_from_its_file(settings, local_embedder):
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        serve_each(store, ids)  # each part saved once read from Chroma; ann evicted by ben, ben by cat
        assert set(store.state.part_files.current()) == {"entity:ann", "entity:ben", "entity:cat"}
        before = store.stats()["index"]["loads_from_files"]
        assert everything(store, "ann") == ids["ann"] | ids["global"]
        assert store.stats()["index"]["loads_from_files"] == before + 1


def test_a_write_drops_the_file_of_its_scope_first(settings, local_embedder):
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        serve_each(store, ids)
        path = store.state.part_files.path("entity:ann")
        assert path.is_file()
        new = store.upsert_memory("Ann moved to Lisbon", entity="ann")
        assert not path.exists() and "entity:ann" not in store.state.part_files.current()
        assert "entity:ben" in store.state.part_files.current()  # another scope's file stays
        assert everything(store, "ann") == ids["ann"] | ids["global"] | {new}  # read from Chroma, with the write


def test_a_delete_of_a_row_not_resident_drops_its_file(settings, local_embedder):
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        serve_each(store, ids)
        gone = sorted(ids["ben"])[0]
        text = store.get_one(gone).text
        path = store.state.part_files.path("entity:ben")
        assert text.encode() in path.read_bytes()
        store.delete([gone])
        assert not path.exists()
        assert everything(store, "ben") == (ids["ben"] - {gone}) | ids["global"]


def test_files_are_trusted_across_a_restart_only_through_the_signed_snapshot(settings, local_embedder, caplog):
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        serve_each(store, ids)
        files = store.state.part_files.current()
    with open_store(settings, embedder=local_embedder) as store:
        assert store.state.part_files is not None
        store.retrieve_memories("tea", k=1, entity="cat")  # builds the indexes from the snapshot
        assert store.state.part_files.current() == files
        assert everything(store, "ann") == ids["ann"] | ids["global"]
        assert store.stats()["index"]["loads_from_files"] == 1
        path = store.state.part_files.path("entity:ben")
    # ben's file rewritten to hold ann's rows relabelled, signed as brain signs part files: its digest differs
    with np.load(path, allow_pickle=False) as archive:
        content = {name: archive[name] for name in archive.files}
    rows = json.loads(content["memory/rows"].tobytes())
    rows["texts"] = ["Ben's bank PIN is 4417" for _ in rows["texts"]]
    content["memory/rows"] = np.frombuffer(json.dumps(rows).encode(), dtype=np.uint8)
    write_archive(path, content, b"brain part file", durable=False)
    with open_store(settings, embedder=local_embedder) as store:
        store.retrieve_memories("tea", k=1, entity="cat")
        before = store.stats()["index"]
        assert everything(store, "ben") == ids["ben"] | ids["global"]
        after = store.stats()["index"]
        assert after["loads"] == before["loads"] + 1 and after["loads_from_files"] == before["loads_from_files"]
        assert "index part file" in caplog.text and "digest" in caplog.text


def test_without_a_snapshot_to_name_them_the_files_are_deleted(settings, local_embedder):
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        serve_each(store, ids)
        directory = store.state.part_files.directory
        assert len(list(directory.glob("*.npz"))) == 3
        assert not store.state.snapshots.path.exists()  # the writes dropped it; a kill -9 saves none at close
        store.state.snapshots.current = True  # and none written now
        store.state.part_files.saved_since_load = False
    with open_store(settings, embedder=local_embedder) as store:
        store.retrieve_memories("tea", k=1)  # builds the indexes: the global part, from Chroma
        assert not list(directory.glob("*.npz"))
        assert everything(store, "ann") == ids["ann"] | ids["global"]
        assert store.stats()["index"]["loads_from_files"] == 0
