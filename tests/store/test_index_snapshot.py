"""The index snapshot: a start loads the in-process indexes from a file (and, on a Chroma server,
applies the change feed after it) instead of reading the whole collection; a snapshot that cannot be
proven current is ignored with a log line and the indexes are rebuilt from Chroma."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import os
import shutil
import uuid
import zipfile
from pathlib import Path

import chromadb
import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.model.errors import ConfigError, StoreError
from brain.store.chroma import open_client
from brain.store.follower import catch_up, last_sequence
from brain.store.indexes import memory_index, refresh_index, save_index_snapshot
from brain.store.snapshot import KEY_SUFFIX, KeyFile, snapshot_key, snapshot_path, write_archive

NOW = 2_000_000_000.0
QUERIES = ["where does the team work", "favourite food and drinks", "deadline for the report"]
FILTERS = [{}, {"entity": "bob"}, {"all_scopes": True}, {"tags": ["work"]}, {"min_importance": 4}]


def fill(store) -> dict[str, str]:
    """Memories of two scopes with tags and importances, a retired one, FAQ entries and summaries."""
    ids = {}
    facts = [
        "The team works from the Lyon office",
        "Bob likes green tea",
        "The report is due on Friday",
        "Bob's favourite food is ramen",
        "The office moves to Grenoble next year",
        "Coffee is free on Mondays",
    ]
    for n, text in enumerate(facts):
        ids[text] = store.upsert_memory(
            text,
            importance=1 + n % 5,
            entity="bob" if n % 2 else None,
            tags=["work"] if "office" in text or "report" in text else None,
        )
    ids["retired"] = store.upsert_memory("The team used to work from Paris", status="superseded")
    store.upsert_docs(
        [
            {"text": "Expenses are filed by the 5th", "type": "faq", "topic": "money"},
            {"text": "The office opens at 8", "type": "faq", "topic": "office"},
        ]
    )
    store.upsert_summary("conv-1", "They talked about the report deadline", turn_range="1-4", summary_index=1)
    return ids


def ranked(store) -> list:
    """Every ranking the indexes serve, with ids, scores, texts and metadata."""
    out = []
    for query in QUERIES:
        for kwargs in FILTERS:
            out.append(
                [
                    (h.id, h.score, h.similarity, h.text, h.metadata)
                    for h in store.retrieve_memories(query, k=8, now=NOW, **kwargs, relevance=False)
                ]
            )
        out.append([(h.id, h.score) for h in store.retrieve_faq(query, k=3)])
        out.append([(h.id, h.score) for h in store.retrieve_summaries(query, k=3)])
    return out


def loaded_from_snapshot(caplog) -> bool:
    return any("loaded from the index snapshot" in r.getMessage() for r in caplog.records)


def ignored(caplog, path: Path | None = None) -> list[str]:
    """The log lines saying a snapshot (the one at ``path``, when given) was ignored."""
    return [
        r.getMessage()
        for r in caplog.records
        if "ignored" in r.getMessage() and f"index snapshot {path or ''}" in r.getMessage()
    ]


def rewrite(path: Path, *, header: dict | None = None, entries: dict | None = None, signed: bool = True) -> None:
    """Rewrite the snapshot at ``path`` with header fields or entries replaced (a tampered file), signed
    again with the store's key (as by someone who holds it: a leak, or a bug) unless ``signed`` is False."""
    with np.load(path, allow_pickle=False) as archive:
        content = {name: archive[name] for name in archive.files}
    if header:
        values = json.loads(content["header"].tobytes()) | header
        content["header"] = np.frombuffer(json.dumps(values).encode(), dtype=np.uint8)
    content.update(entries or {})
    write_archive(path, content, key_of(path) if signed else b"a key that is not the store's")


def key_of(path: Path) -> bytes:
    """The snapshot key of the embedded store whose snapshot is ``path`` (in its default place)."""
    return KeyFile(Settings(data_dir=path.parent.parent)).read()


@pytest.fixture
def saved(settings, local_embedder):
    """An embedded store filled, ranked (its indexes built from Chroma) and closed: its snapshot saved."""
    with open_store(settings, embedder=local_embedder) as store:
        ids = fill(store)
        before = ranked(store)
    assert snapshot_path(settings).is_file()
    return settings, ids, before


# ---- the embedded store ----------------------------------------------------------------------------


def test_a_reopened_store_ranks_from_the_snapshot_exactly_as_after_a_rebuild(saved, local_embedder, caplog):
    settings, _, before = saved
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        from_snapshot = ranked(store)
        assert loaded_from_snapshot(caplog)
        problems = store.index_problems()
        refresh_index(store)
        assert ranked(store) == from_snapshot == before
        assert store.index_problems() == problems


def test_a_row_the_index_cannot_use_keeps_its_problem_through_the_snapshot(settings, local_embedder, caplog):
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        vec = local_embedder.embed_documents(["An odd row"])[0]
        store.col.upsert(
            ids=["odd"],
            embeddings=[vec],
            documents=["An odd row"],
            metadatas=[{"type": "memory", "importance": 9, "scope": "global", "ts_epoch": 5.0}],
        )
        refresh_index(store)
        problems = store.index_problems()
        assert "importance" in problems["memory"]["odd"]
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert store.index_problems() == problems and loaded_from_snapshot(caplog)


def test_a_write_deletes_the_snapshot_before_chroma_changes_and_close_saves_a_new_one(saved, local_embedder, caplog):
    settings, ids, _ = saved
    path = snapshot_path(settings)
    with open_store(settings, embedder=local_embedder) as store:
        memory_index(store)
        new = store.upsert_memory("The team lunch is on Thursday", tags=["work"])
        # a crash from here on finds no snapshot, so the next start rebuilds from Chroma
        assert not path.exists()
        store.delete(ids["Bob likes green tea"])
        expected = ranked(store)
    assert path.is_file()
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == expected and loaded_from_snapshot(caplog)
        hits = {h.id for h in store.retrieve_memories("tea lunch", k=20, all_scopes=True, relevance=False)}
        assert new in hits and ids["Bob likes green tea"] not in hits


def test_a_store_that_wrote_before_building_its_indexes_does_not_load_the_old_snapshot(saved, local_embedder, caplog):
    settings, ids, _ = saved
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        store.delete(ids["The report is due on Friday"])
        assert ids["The report is due on Friday"] not in {
            h.id for h in store.retrieve_memories("report", k=20, relevance=False)
        }
        assert not loaded_from_snapshot(caplog)


def test_a_missing_snapshot_is_rebuilt_with_a_log_line(settings, local_embedder, caplog):
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        memory_index(store)
    assert any("ignored: there is none" in m for m in ignored(caplog))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _bad_json(path: Path) -> None:
    rewrite(path, entries={"header": np.frombuffer(b"{not json", dtype=np.uint8)})


def _wrong_shape(path: Path) -> None:
    with np.load(path, allow_pickle=False) as archive:
        f32 = archive["memory/0/f32"]
    rewrite(path, entries={"memory/0/f32": np.ascontiguousarray(f32[:, :-1])})


def _short_rows(path: Path) -> None:
    with np.load(path, allow_pickle=False) as archive:
        rows = json.loads(archive["memory/0/rows"].tobytes())
    rows["texts"] = rows["texts"][:-1]
    rewrite(path, entries={"memory/0/rows": np.frombuffer(json.dumps(rows).encode(), dtype=np.uint8)})


def _metas_not_objects(path: Path) -> None:
    with np.load(path, allow_pickle=False) as archive:
        rows = json.loads(archive["memory/0/rows"].tobytes())
    rows["metas"] = ["scope=global"] * len(rows["metas"])
    rewrite(path, entries={"memory/0/rows": np.frombuffer(json.dumps(rows).encode(), dtype=np.uint8)})


@pytest.mark.parametrize(
    "damage, why",
    [
        (_truncate, "not signed with this store's snapshot key"),
        (_metas_not_objects, "metas must all be of type dict"),
        (_bad_json, "cannot be read (JSONDecodeError"),
        (_wrong_shape, "array f32 is float32"),
        (_short_rows, "texts"),
        (lambda p: rewrite(p, header={"embedder": "another-model"}), "saved for embedder 'another-model'"),
        (lambda p: rewrite(p, header={"dimension": 3}), "saved for dimension 3"),
        (lambda p: rewrite(p, header={"collection_id": str(uuid.uuid4())}), "saved for collection_id"),
        (lambda p: rewrite(p, header={"types": ["memory"]}), "saved for types ['memory']"),
        (lambda p: rewrite(p, header={"format": 99}), "format 99"),
        (lambda p: rewrite(p, header={"sequence": 7}), "saved with a change feed"),
        (lambda p: rewrite(p, header={"sequence": 7}, signed=False), "not signed with this store's snapshot key"),
    ],
    ids=[
        "truncated",
        "metas-not-objects",
        "bad-json",
        "wrong-shape",
        "rows-of-another-length",
        "another-embedder",
        "another-dimension",
        "another-collection",
        "other-types",
        "other-format",
        "from-a-feed",
        "edited-without-the-key",
    ],
)
def test_a_damaged_or_foreign_snapshot_is_ignored_and_rebuilt(saved, local_embedder, caplog, damage, why):
    settings, _, before = saved
    damage(snapshot_path(settings))
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == before
    lines = ignored(caplog)
    assert len(lines) == 1 and why in lines[0], lines
    assert not loaded_from_snapshot(caplog)


def test_json_nested_past_the_recursion_limit_is_ignored_and_search_answers(saved, local_embedder, caplog):
    settings, _, before = saved
    rewrite(snapshot_path(settings), entries={"memory/0/rows": np.frombuffer(b"[" * 100_000, dtype=np.uint8)})
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == before
    [line] = ignored(caplog)
    assert "nested deeper than Python's recursion limit" in line
    assert not loaded_from_snapshot(caplog)


def signed_zip(path: Path, members: dict[str, tuple[bytes, int]]) -> None:
    """A zip at ``path`` with ``members`` (name: (bytes, compression)), signed with its store's key as
    brain signs a snapshot: the last 64 bytes, the archive comment, the HMAC-SHA256 of all before them."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, (data, compression) in members.items():
            archive.writestr(name, data, compress_type=compression)
        archive.comment = b"0" * 64
    raw = path.read_bytes()[:-64]
    path.write_bytes(raw + hmac.new(key_of(path), raw, hashlib.sha256).hexdigest().encode())


def npy(arr: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, arr, allow_pickle=False)
    return out.getvalue()


def test_a_zip_bomb_is_refused_from_its_headers_without_decompressing(saved, local_embedder, caplog, monkeypatch):
    """A signed archive (as by someone holding the key) whose entry inflates to 64 MiB from a
    few KiB: refused because its header says it is compressed, before any byte of it is inflated."""
    settings, _, before = saved
    path = snapshot_path(settings)
    with np.load(path, allow_pickle=False) as archive:
        members = {f"{name}.npy": (npy(archive[name]), zipfile.ZIP_STORED) for name in archive.files}
    members["memory/0/f32.npy"] = (npy(np.zeros((1 << 24,), dtype=np.float32)), zipfile.ZIP_DEFLATED)
    signed_zip(path, members)
    assert path.stat().st_size < 1 << 20
    inflated = []
    real = zipfile._get_decompressor
    monkeypatch.setattr(zipfile, "_get_decompressor", lambda kind: inflated.append(kind) or real(kind))
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == before
    assert inflated == []
    [line] = ignored(caplog)
    assert "'memory/0/f32.npy' is compressed" in line and f"declaring {(1 << 26) + 128}" in line


def test_an_array_header_claiming_more_than_its_entry_holds_is_refused_unread(saved, local_embedder, caplog):
    settings, _, before = saved
    path = snapshot_path(settings)
    with np.load(path, allow_pickle=False) as archive:
        members = {f"{name}.npy": (npy(archive[name]), zipfile.ZIP_STORED) for name in archive.files}
    members["memory/0/f32.npy"] = (_npy_claiming((1 << 40,)), zipfile.ZIP_STORED)
    signed_zip(path, members)
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == before
    [line] = ignored(caplog)
    assert "'memory/0/f32' declares 4398046511104 bytes of data but holds 16" in line


def _npy_claiming(shape: tuple[int, ...]) -> bytes:
    """A float32 ``.npy`` whose header declares ``shape`` followed by 16 bytes of data."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return out.getvalue() + bytes(16)


def test_a_snapshot_of_another_collection_is_ignored(settings, local_embedder, tmp_path, caplog):
    shared = tmp_path / "one-snapshot.npz"
    first = settings.model_copy(update={"index_snapshot_path": shared})
    with open_store(first, embedder=local_embedder) as store:
        fill(store)
        memory_index(store)
    second = Settings(data_dir=tmp_path / "other", index_snapshot_path=shared, collection="elsewhere")
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(second, embedder=local_embedder) as store:
        assert store.retrieve_memories("collection", k=5, relevance=False) == []  # (a write first would drop the file)
        store.upsert_memory("Only in the second collection")
        assert [h.text for h in store.retrieve_memories("collection", k=5, relevance=False)] == [
            "Only in the second collection"
        ]
    # each store signs with its own key, checked before the header is read: this one has none yet
    assert any("key file" in m and "is missing" in m for m in ignored(caplog))


def test_a_collection_changed_behind_the_store_is_not_served_from_the_snapshot(saved, local_embedder, caplog):
    settings, ids, _ = saved
    client = chromadb.PersistentClient(
        path=str(settings.data_dir / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False)
    )
    client.get_collection(settings.collection).delete(ids=[ids["Bob likes green tea"]])
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ids["Bob likes green tea"] not in {
            h.id for h in store.retrieve_memories("tea", k=20, all_scopes=True, relevance=False)
        }
    assert any("Chroma holds" in m for m in ignored(caplog))


def test_a_write_that_cannot_delete_the_snapshot_is_refused_whole(settings, local_embedder, tmp_path):
    blocked = tmp_path / "not-a-file"
    (blocked / "inside").mkdir(parents=True)  # unlink fails on a directory
    with open_store(settings.model_copy(update={"index_snapshot_path": blocked}), embedder=local_embedder) as store:
        with pytest.raises(StoreError, match="cannot delete the index snapshot .* nothing was written"):
            store.upsert_memory("A fact that must not be stored")
        assert store.count() == 0


def test_rows_migrated_at_open_are_not_served_from_the_snapshot(saved, local_embedder):
    """An older writer marked a memory retracted straight in Chroma (count unchanged); the open's
    migration rewrites it to the typed status, which the snapshot does not hold: it is dropped."""
    settings, ids, _ = saved
    client = chromadb.PersistentClient(
        path=str(settings.data_dir / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False)
    )
    client.get_collection(settings.collection).update(
        ids=[ids["Coffee is free on Mondays"]], metadatas=[{"pam_status": "retracted"}]
    )
    with open_store(settings, embedder=local_embedder) as store:
        assert ids["Coffee is free on Mondays"] not in {
            h.id for h in store.retrieve_memories("coffee", k=20, entity="bob", relevance=False)
        }


def test_snapshots_can_be_turned_off(settings, local_embedder):
    off = settings.model_copy(update={"index_snapshot": False})
    with open_store(off, embedder=local_embedder) as store:
        fill(store)
        memory_index(store)
        assert save_index_snapshot(store) is None
    assert not snapshot_path(off).exists()


# ---- the embedded store's key file -------------------------------------------------------------------


def test_a_missing_key_file_leaves_the_snapshot_unverifiable_and_nothing_is_lost(saved, local_embedder, caplog):
    """A new machine or a copied data directory: the snapshot is ignored with the reason, the indexes are
    rebuilt from Chroma, and the next save writes a new key that the start after it verifies."""
    settings, ids, before = saved
    keys = KeyFile(settings)
    keys.path.unlink()
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == before
        assert {h.id for h in store.retrieve_memories("office", k=20, all_scopes=True, relevance=False)} >= {
            ids["The team works from the Lyon office"],
            ids["The office moves to Grenoble next year"],
        }
    [line] = ignored(caplog)
    assert f"key file {keys.path} is missing" in line and not loaded_from_snapshot(caplog)
    assert keys.path.is_file()  # written by the save at close
    caplog.clear()
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == before and loaded_from_snapshot(caplog)


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda p: p.write_text("not hex\n"), "is damaged"),
        (lambda p: p.chmod(0o644), "open to other users (mode 644)"),
    ],
    ids=["damaged", "readable-by-others"],
)
def test_a_key_file_that_cannot_be_trusted_leaves_the_snapshot_unverifiable(saved, local_embedder, caplog, damage, why):
    settings, _, before = saved
    keys = KeyFile(settings)
    damage(keys.path)
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ranked(store) == before
    [line] = ignored(caplog)
    assert why in line and not loaded_from_snapshot(caplog)


def test_the_key_file_is_private_outside_the_data_directory(saved):
    settings, _, _ = saved
    keys = KeyFile(settings)
    assert keys.path.parent == settings.snapshot_key_dir and settings.data_dir not in keys.path.parents
    assert keys.path.stat().st_mode & 0o777 == 0o600 and keys.path.parent.stat().st_mode & 0o777 == 0o700
    assert os.listdir(keys.path.parent) == [keys.path.name]  # no temporary file left


@pytest.mark.parametrize("built", [False, True], ids=["no-save-after-the-write", "saved-after-the-write"])
def test_an_older_snapshot_put_back_after_a_write_does_not_verify(saved, local_embedder, caplog, tmp_path, built):
    """The key goes with the snapshot before a write and a new one is written at every save, so a copy kept
    aside (which still lists a row the write deleted, or its old scope) is refused even when the collection's
    size is the copy's again."""
    settings, ids, _ = saved
    keys, kept = KeyFile(settings), tmp_path / "kept.npz"
    old_key = keys.read()
    shutil.copy(snapshot_path(settings), kept)
    with open_store(settings, embedder=local_embedder) as store:
        if built:
            memory_index(store)
        store.delete(ids["Bob likes green tea"])
        assert not keys.path.exists()
        store.upsert_memory("Bob now drinks coffee")
    assert keys.read() != old_key if built else not keys.path.exists()
    shutil.copy(kept, snapshot_path(settings))
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert ids["Bob likes green tea"] not in {
            h.id for h in store.retrieve_memories("tea", k=20, all_scopes=True, relevance=False)
        }
    [line] = ignored(caplog)
    assert ("not signed with this store's snapshot key" if built else "is missing") in line


def test_each_store_has_its_own_key_file(settings, tmp_path):
    other = Settings(data_dir=tmp_path / "other")
    renamed = settings.model_copy(update={"collection": "elsewhere"})
    assert len({KeyFile(s).path for s in (settings, other, renamed)}) == 3


def test_a_key_dir_inside_the_data_directory_is_refused_at_open(settings, local_embedder):
    """Settings changed after validation (``model_copy``) are checked again when the store opens."""
    inside = settings.model_copy(update={"snapshot_key_dir": settings.data_dir / "keys"})
    with pytest.raises(ConfigError, match="BRAIN_SNAPSHOT_KEY_DIR .* is inside BRAIN_DATA_DIR .* re-sign"):
        open_store(inside, embedder=local_embedder)
    assert not (settings.data_dir / "keys").exists()


def test_the_key_an_older_version_kept_in_chroma_is_dropped_at_open(saved, local_embedder):
    settings, _, _ = saved
    client = open_client(settings)
    snapshot_key(client, settings.collection)  # as brain kept it before the key file
    with open_store(settings, embedder=local_embedder) as store:
        assert settings.collection + KEY_SUFFIX not in {c.name for c in store.client.list_collections()}


# ---- a Chroma server: the snapshot and the change feed after it ------------------------------------


@pytest.fixture
def server_settings(chroma_server, tmp_path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        chroma_url=chroma_server,
        collection=f"s-{uuid.uuid4().hex[:12]}",
        feed_interval_seconds=0.0,
    )


@pytest.mark.server
def test_a_snapshot_plus_the_feed_written_after_it_ends_exact(server_settings, local_embedder, tmp_path, caplog):
    other = server_settings.model_copy(update={"data_dir": tmp_path / "data-b"})
    with open_store(server_settings, embedder=local_embedder) as a:
        ids = fill(a)
        memory_index(a)
        saved_at = save_index_snapshot(a)
        assert saved_at == snapshot_path(server_settings)
    with open_store(other, embedder=local_embedder) as b:  # another process writes after the snapshot
        b.delete(ids["Bob likes green tea"])
        b.update_memory(ids["The team works from the Lyon office"], "The team works from the Annecy office")
        b.update_memory(ids["The report is due on Friday"], importance=5)
        new = b.upsert_memory("Bob drinks green tea at four", entity="bob", tags=["work"])
        caplog.set_level(logging.INFO, logger="brain.store")
        with open_store(server_settings, embedder=local_embedder) as a:
            from_snapshot = ranked(a)
            assert loaded_from_snapshot(caplog) and not ignored(caplog)
            assert a.follower.applied == last_sequence(b)
            refresh_index(a)
            assert ranked(a) == from_snapshot
            hits = {h.id: h for h in a.retrieve_memories("tea office report", k=20, all_scopes=True, relevance=False)}
        assert ids["Bob likes green tea"] not in hits and new in hits
        assert hits[ids["The team works from the Lyon office"]].text == "The team works from the Annecy office"
        assert hits[ids["The report is due on Friday"]].metadata["importance"] == 5
        assert ranked(b) == from_snapshot


@pytest.mark.server
def test_a_delete_applied_from_the_feed_removes_the_snapshot_file(server_settings, local_embedder, tmp_path):
    """No snapshot on disk keeps a deleted text: a delete this process follows drops the file."""
    other = server_settings.model_copy(update={"data_dir": tmp_path / "data-b"})
    with open_store(server_settings, embedder=local_embedder) as a, open_store(other, embedder=local_embedder) as b:
        ids = fill(a)
        memory_index(a)
        path = save_index_snapshot(a)
        b.delete(ids["Coffee is free on Mondays"])
        catch_up(a)
        assert not path.exists()
    with np.load(path, allow_pickle=False) as archive:  # saved again at close, without it
        assert not any(
            "Coffee is free" in archive[name].tobytes().decode() for name in archive.files if name.endswith("/rows")
        )


@pytest.mark.server
def test_own_writes_before_the_indexes_are_built_are_applied_over_the_snapshot(server_settings, local_embedder, caplog):
    with open_store(server_settings, embedder=local_embedder) as a:
        ids = fill(a)
        memory_index(a)
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(server_settings, embedder=local_embedder) as a:
        edited = ids["The report is due on Friday"]
        a.update_memory(edited, "The report is due on Monday", importance=5)
        new = a.upsert_memory("The report needs a cover page", tags=["work"])
        hits = {h.id: h for h in a.retrieve_memories("report", k=20, all_scopes=True, relevance=False)}
        assert loaded_from_snapshot(caplog)
        assert new in hits and hits[edited].text == "The report is due on Monday"
        assert hits[edited].metadata["importance"] == 5
        from_snapshot = ranked(a)
        refresh_index(a)
        assert ranked(a) == from_snapshot


@pytest.mark.server
def test_a_snapshot_older_than_the_compaction_horizon_is_ignored(server_settings, local_embedder, tmp_path, caplog):
    other = server_settings.model_copy(update={"data_dir": tmp_path / "data-b"})
    with open_store(server_settings, embedder=local_embedder) as a:
        ids = fill(a)
        memory_index(a)
    with open_store(other, embedder=local_embedder) as b:
        b.delete(ids["Bob likes green tea"])
        b.upsert_memory("Written after the snapshot")
        b.follower.feed.keep = 0
        b.follower.feed.compact(last_sequence(b))  # the records after the snapshot are gone
        b.upsert_memory("And after the compaction")
        caplog.set_level(logging.INFO, logger="brain.store")
        with open_store(server_settings, embedder=local_embedder) as a:
            expected = ranked(b)
            assert ranked(a) == expected
        lines = ignored(caplog, snapshot_path(server_settings))
        assert len(lines) == 1 and "compacted past it" in lines[0], lines


@pytest.mark.server
def test_a_snapshot_saved_without_the_feed_is_not_used_with_one(saved, chroma_server, local_embedder, caplog):
    """An embedded store's snapshot moved to a server-backed worker: another collection (its id), ignored."""
    settings, _, _ = saved
    served = settings.model_copy(
        update={
            "chroma_url": chroma_server,
            "collection": f"s-{uuid.uuid4().hex[:12]}",
            "index_snapshot_path": snapshot_path(settings),
        }
    )
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(served, embedder=local_embedder) as store:
        assert store.retrieve_memories("tea", k=5, relevance=False) == []
    assert len(ignored(caplog)) == 1


# ---- the command ------------------------------------------------------------------------------------


def test_brain_index_snapshot_saves_one(monkeypatch, local_embedder, tmp_path):
    from click.testing import CliRunner

    import brain.store.facade
    from brain.shells.cli import cli

    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "defaults.env").touch()
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    assert CliRunner().invoke(cli, ["memory", "add", "Alice is vegetarian", "--entity", "alice"]).exit_code == 0
    path = tmp_path / "data" / "index_snapshots" / "conversations.npz"
    assert not path.exists()  # that command never built the indexes
    result = CliRunner().invoke(cli, ["--json", "index", "snapshot"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "path": str(path),
        "indexes": {"memory": 1, "persona": 0, "faq": 0, "summary": 0},
    }
    assert path.is_file()
    off = CliRunner().invoke(cli, ["index", "snapshot"], env={"BRAIN_INDEX_SNAPSHOT": "false"})
    assert off.exit_code == 1 and "BRAIN_INDEX_SNAPSHOT" in off.stderr
