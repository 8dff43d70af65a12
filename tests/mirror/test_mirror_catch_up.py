"""The mirror's catch-up compares content (per-row hashes), not counts, and every serving entry point runs it.

Writes that reach Chroma but not the mirror are made with the store's public ``mirror_paused()``
(what a process killed between its Chroma write and its mirror commit leaves behind).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

import brain.store.facade
from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.app.startup import startup
from brain.config import Settings
from brain.features.mirror import catch_up, verify_mirror
from brain.shells.cli import cli
from brain.store.mirror_link import mirror_paused
from tests.conftest import ROOT, free_port


def fill(store: RagStore) -> list[str]:
    return [
        store.upsert_memory("Alice is vegetarian", scope="entity:alice", importance=5, tags=["food"]),
        store.upsert_memory("The office wifi password changes every month", importance=2),
        store.upsert_memory("Bob supports the local football club", scope="entity:bob"),
    ]


def update_in_chroma_only(store: RagStore, doc_id: str, text: str) -> None:
    """An in-place update (same id, new text and vector) that the mirror never sees."""
    with mirror_paused(store):
        scope = store.get(doc_id)[0].metadata["scope"]
        store.upsert_docs([{"id": doc_id, "text": text, "type": "memory", "scope": scope}])
    assert store.get(doc_id)[0].text == text


def delete_in_chroma_only(store: RagStore, doc_id: str) -> None:
    """A delete the mirror never sees: the store's delete writes through even under ``mirror_paused()``,
    so it is made with the Chroma collection itself."""
    store.col.delete(ids=[doc_id])
    assert store.get(doc_id) == []


def mirrored_text(store: RagStore, doc_id: str) -> str | None:
    found = store.mirror.get(doc_id)
    return found[0].text if found else None


@pytest.fixture
def mirrored(tmp_path, local_embedder):
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder) as store:
        yield store


def rows(store: RagStore) -> dict[str, tuple]:
    return {d.id: (d.text, d.metadata, d.embedding.tobytes()) for d in store.mirror.iter_documents()}


def test_a_mirror_in_step_is_left_alone_and_reports_zero(mirrored):
    fill(mirrored)
    mirrored.upsert_turn("conv-1", "What should I cook?", "A lentil curry.")
    before = rows(mirrored)
    report = catch_up(mirrored, mirrored.mirror)
    assert (report.added, report.updated, report.deleted) == (0, 0, 0)
    assert report.changed == 0 and report.unchanged == mirrored.mirror.count()
    assert report.to_dict()["changed"] == 0 and "0 added, 0 updated, 0 deleted" in report.summary()
    assert rows(mirrored) == before  # not a byte of content rewritten
    # Chroma hands vectors back a few units in the last place off what it was given, so a row's first
    # catch-up may record the hash of what Chroma holds; from then on every row is settled by its hash
    again = catch_up(mirrored, mirrored.mirror)
    assert (again.changed, again.rehashed, again.unchanged) == (0, 0, report.unchanged)
    assert rows(mirrored) == before


def test_an_in_place_update_chroma_took_alone_is_repaired(mirrored):
    ids = fill(mirrored)
    update_in_chroma_only(mirrored, ids[1], "The office wifi password changes every week")
    assert mirrored_text(mirrored, ids[1]) == "The office wifi password changes every month"
    assert mirrored.mirror.count() == mirrored.count("memory")  # counts agree: a count check sees nothing

    report = catch_up(mirrored, mirrored.mirror)
    assert (report.added, report.updated, report.deleted) == (0, 1, 0)
    assert report.unchanged == 2
    repaired = mirrored.mirror.get(ids[1])[0]
    chroma = mirrored.get(ids[1], include_embeddings=True)[0]
    assert repaired.text == chroma.text and np.allclose(repaired.embedding, chroma.embedding, atol=1e-6)
    assert verify_mirror(mirrored, mirrored.mirror).ok
    assert catch_up(mirrored, mirrored.mirror).changed == 0


def test_a_new_vector_for_the_same_text_is_repaired(mirrored):
    ids = fill(mirrored)
    turn = mirrored.upsert_turn("conv-1", "What should I cook?", "A lentil curry.")[0]
    doc = mirrored.get(turn, include_embeddings=True)[0]
    other = mirrored.get(ids[2], include_embeddings=True)[0].embedding
    with mirror_paused(mirrored):  # e.g. a restore or a re-embedding bringing its own vector
        meta = {k: v for k, v in doc.metadata.items() if k != "ts_epoch"}  # derived by the store
        mirrored.upsert_docs([{**meta, "id": doc.id, "text": doc.text, "embedding": other}])
    assert verify_mirror(mirrored, mirrored.mirror).vectors == [turn]
    report = catch_up(mirrored, mirrored.mirror)
    assert report.updated == 1 and report.changed == 1
    assert np.allclose(mirrored.mirror.get(turn)[0].embedding, other, atol=1e-6)


def test_a_delete_plus_an_add_with_equal_counts_is_repaired(mirrored):
    ids = fill(mirrored)
    delete_in_chroma_only(mirrored, ids[0])
    with mirror_paused(mirrored):
        added = mirrored.upsert_memory("Carol collects stamps", scope="entity:carol")
    assert mirrored.mirror.count() == mirrored.count("memory")
    report = catch_up(mirrored, mirrored.mirror)
    assert (report.added, report.updated, report.deleted) == (1, 0, 1)
    assert mirrored.mirror.ids(foreign=False) == {added, ids[1], ids[2]}
    assert verify_mirror(mirrored, mirrored.mirror).ok


def test_a_row_changed_by_another_writer_loses_its_hash_and_is_repaired(mirrored):
    ids = fill(mirrored)
    with sqlite3.connect(mirrored.mirror.path) as conn:  # e.g. engram editing one of our rows
        conn.execute("UPDATE memories SET content = 'edited elsewhere' WHERE id = ?", (ids[2],))
    assert mirrored.mirror.content_hashes()[ids[2]] is None
    report = catch_up(mirrored, mirrored.mirror)
    assert report.updated == 1 and mirrored_text(mirrored, ids[2]) == "Bob supports the local football club"


def test_a_mirror_file_written_before_content_hashes_is_migrated_in_place(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data")
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        path = store.mirror.path
    with sqlite3.connect(path) as conn:  # the schema of a file from before the hashes: no table, no triggers
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'brain_hash_%'"
        ).fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP TABLE brain_content_hashes")
    with open_store(settings, embedder=local_embedder) as store:
        assert set(store.mirror.content_hashes()) == set(ids)
        assert set(store.mirror.content_hashes().values()) == {None}
        first = catch_up(store, store.mirror)
        assert first.changed == 0 and first.rehashed == 3 and "3 content hashes recorded" in first.summary()
        assert None not in store.mirror.content_hashes().values()
        again = catch_up(store, store.mirror)
        assert again.changed == 0 and again.rehashed == 0
        update_in_chroma_only(store, ids[0], "Alice eats fish again")
        assert catch_up(store, store.mirror).updated == 1


def test_startup_repairs_an_update_the_mirror_missed(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", persona_path=tmp_path / "none.md")
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        update_in_chroma_only(store, ids[1], "The office wifi password never changes")
    report = startup(settings, warm=False)
    try:
        assert report.mirror_sync.updated == 1 and report.to_dict()["mirror_sync"].startswith("mirror sync:")
        assert mirrored_text(report.store, ids[1]) == "The office wifi password never changes"
    finally:
        report.brain.close()


def test_mirror_verify_reports_a_row_whose_content_differs(tmp_path, local_embedder, monkeypatch):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    settings = Settings(data_dir=tmp_path / "data")
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        update_in_chroma_only(store, ids[0], "Alice eats fish again")
    result = CliRunner().invoke(cli, ["--data-dir", str(settings.data_dir), "--json", "mirror", "verify"])
    body = json.loads(result.stdout)
    assert body["ok"] is False and body["text"] == [ids[0]] and body["vectors"] == [ids[0]]
    assert body["missing"] == [] and body["extra"] == []
    shown = CliRunner().invoke(cli, ["--data-dir", str(settings.data_dir), "mirror", "verify"])
    assert f"text differs (1): {ids[0]}" in shown.stdout


@pytest.mark.subprocess
def test_brain_serve_repairs_the_mirror_before_answering(tmp_path, local_embedder):
    data = tmp_path / "data"
    with open_store(Settings(data_dir=data), embedder=local_embedder) as store:
        ids = fill(store)
        update_in_chroma_only(store, ids[1], "The office wifi password is on the fridge")
        delete_in_chroma_only(store, ids[2])
        mirror_path = store.mirror.path
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "brain.shells.cli", "--data-dir", str(data), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "brain serve did not answer in time"
            time.sleep(0.5)
        with sqlite3.connect(f"file:{mirror_path}?mode=ro", uri=True) as conn:
            rows = dict(conn.execute("SELECT id, content FROM memories").fetchall())
        assert rows == {ids[0]: "Alice is vegetarian", ids[1]: "The office wifi password is on the fridge"}
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()
