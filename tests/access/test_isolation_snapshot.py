"""A crafted index snapshot never decides who sees what: a file whose scope codes were relabelled (Bob's rows
made Alice's) and whose zip checksums were recomputed, or whose vectors hold NaN, is refused and the indexes
are rebuilt from Chroma, on the embedded store and on a ``chroma run`` server. The key that signs the
snapshot is never in the data directory: on a server it is on the server, and the embedded store keeps it
in a file of BRAIN_SNAPSHOT_KEY_DIR (tests: a temporary state directory)."""

from __future__ import annotations

import json
import logging
import uuid

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.store.chroma import open_client
from brain.store.indexes import memory_index, save_index_snapshot
from brain.store.snapshot import KEY_SUFFIX, KeyFile, snapshot_key, snapshot_path, write_archive

BOB_FACTS = ["Bob's bank PIN is 4417", "Bob's locker code is 9921", "Bob sees a doctor on Tuesdays"]
ALICE_FACTS = ["Alice likes green tea", "Alice's locker is number 12"]
QUERY = "what is the locker code or PIN?"


def fill(store) -> None:
    for text in BOB_FACTS:
        store.upsert_memory(text, entity="bob", importance=5)
    for text in ALICE_FACTS:
        store.upsert_memory(text, entity="alice")
    store.upsert_memory("The office closes at six")


def alice_sees(store) -> set[str]:
    return {h.text for h in store.retrieve_memories(QUERY, k=20, entity="alice", relevance=False)}


def tamper(
    path, *, relabel: bool = False, metas_too: bool = False, nan: bool = False, key: bytes | None = None
) -> None:
    """Rewrite the memory index of the snapshot at ``path``: Bob's part relabelled as Alice's (its scope codes
    name her; with ``metas_too``, the scope in its rows' metadata and the header's parts too, Alice's part
    named Bob's in exchange), or a NaN in one vector; the zip is written anew (its checksums recomputed).
    With ``key``, signed again with the store's key."""
    with np.load(path, allow_pickle=False) as archive:
        content = {name: archive[name] for name in archive.files}
    header = json.loads(content["header"].tobytes())
    bob, alice = header["parts"].index("entity:bob"), header["parts"].index("entity:alice")
    if relabel:
        rows = json.loads(content[f"memory/{bob}/rows"].tobytes())
        rows["scopes"] = ["entity:alice" if s == "entity:bob" else s for s in rows["scopes"]]
        if metas_too:
            for meta in rows["metas"]:
                if meta.get("scope") == "entity:bob":
                    meta["scope"] = "entity:alice"
                    meta["entity"] = "alice"
            header["parts"][bob], header["parts"][alice] = "entity:alice", "entity:bob"
            counts = header["scopes"]["memory"]
            counts["entity:alice"], counts["entity:bob"] = counts["entity:bob"], counts["entity:alice"]
            content["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        content[f"memory/{bob}/rows"] = np.frombuffer(json.dumps(rows).encode(), dtype=np.uint8)
    if nan:
        f32 = content[f"memory/{bob}/f32"].copy()
        f32[0, 0] = np.nan
        content[f"memory/{bob}/f32"] = f32
    write_archive(path, content, key if key is not None else b"a key that is not the store's")


def reopened(settings, embedder, caplog) -> tuple[set[str], list[str]]:
    caplog.clear()
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=embedder) as store:
        seen = alice_sees(store)
        total = len(store.retrieve_memories(QUERY, k=20, all_scopes=True, relevance=False))
    assert total == len(BOB_FACTS) + len(ALICE_FACTS) + 1  # nothing silently missing
    return seen, [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server)])
def saved(request, tmp_path, local_embedder):
    if request.param == "embedded":
        settings = Settings(data_dir=tmp_path / "data")
    else:
        settings = Settings(
            data_dir=tmp_path / "data",
            chroma_url=request.getfixturevalue("chroma_server"),
            collection=f"snap-{uuid.uuid4().hex[:12]}",
            feed_interval_seconds=0.0,
        )
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        expected = alice_sees(store)
        assert save_index_snapshot(store) == snapshot_path(settings)
        key = snapshot_key(store.client, settings.collection) if settings.chroma_url else None
    assert not expected & set(BOB_FACTS)
    return settings, expected, key if key is not None else KeyFile(settings).read()


def keys_in_the_data_directory(settings) -> list[bytes]:
    """Every key an attacker who can read and write the data directory can get: the side collection a
    snapshot key was once kept in (made anew by them if it is gone), with its hex text."""
    key = snapshot_key(open_client(settings), settings.collection)
    return [key, key.hex().encode()]


@pytest.mark.parametrize(
    "how",
    [{"relabel": True}, {"relabel": True, "metas_too": True}, {"nan": True}],
    ids=["codes-relabelled", "codes-and-metadata-relabelled", "nan-vector"],
)
def test_a_crafted_snapshot_without_the_key_is_refused(saved, local_embedder, caplog, how):
    """The signature is checked over the raw bytes before anything in the file is parsed."""
    settings, expected, _ = saved
    tamper(snapshot_path(settings), **how)
    seen, lines = reopened(settings, local_embedder, caplog)
    assert seen == expected and not seen & set(BOB_FACTS)
    assert len(lines) == 1 and "not signed with this store's snapshot key" in lines[0], lines


def test_a_relabelled_snapshot_re_signed_with_the_key_from_the_data_directory_leaks_nothing(
    saved, local_embedder, caplog
):
    """Whoever can write the data directory re-signs a snapshot whose codes, metadata and header all say
    Bob's memories are Alice's, with any key the directory holds: the embedded store's key is not there
    (no file of the data directory holds it), so the signature fails and the indexes are rebuilt."""
    settings, expected, key = saved
    if settings.chroma_url:
        pytest.skip("on a Chroma server the key is on the server, out of the data directory's reach")
    held = [p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file()]
    assert not any(key in raw or key.hex().encode() in raw for raw in held)
    for forged in keys_in_the_data_directory(settings):
        tamper(snapshot_path(settings), relabel=True, metas_too=True, key=forged)
        seen, lines = reopened(settings, local_embedder, caplog)
        assert seen == expected and not seen & set(BOB_FACTS)
        assert len(lines) == 1 and "not signed with this store's snapshot key" in lines[0], lines
        # the side collection is dropped at open, so no key stays in the data directory
        assert settings.collection + KEY_SUFFIX not in {c.name for c in open_client(settings).list_collections()}


@pytest.mark.parametrize(
    "how, why",
    [
        ({"relabel": True}, "in the scope codes"),
        ({"nan": True}, "not finite"),
    ],
    ids=["codes-relabelled", "nan-vector"],
)
def test_a_signed_snapshot_must_still_agree_with_itself(saved, local_embedder, caplog, how, why):
    """Signed with the right key (a bug, or a key that leaked), an inconsistent file is still refused."""
    settings, expected, key = saved
    tamper(snapshot_path(settings), key=key, **how)
    seen, lines = reopened(settings, local_embedder, caplog)
    assert seen == expected
    assert len(lines) == 1 and why in lines[0], lines


def test_the_header_lists_the_rows_per_scope_and_an_untampered_snapshot_loads(saved, local_embedder, caplog):
    settings, expected, _ = saved
    with np.load(snapshot_path(settings), allow_pickle=False) as archive:
        header = json.loads(archive["header"].tobytes())
    assert header["scopes"]["memory"] == {"entity:bob": 3, "entity:alice": 2, "global": 1}
    seen, lines = reopened(settings, local_embedder, caplog)
    assert seen == expected and not lines
    assert any("loaded from the index snapshot" in r.getMessage() for r in caplog.records)


def test_a_snapshot_of_another_store_with_the_same_collection_is_refused(saved, tmp_path, local_embedder, caplog):
    """A snapshot copied from another store (its own key) into this one's place is not this store's."""
    settings, expected, _ = saved
    other = Settings(data_dir=tmp_path / "other", index_snapshot_path=snapshot_path(settings))
    if settings.chroma_url:
        pytest.skip("the other store would share the server's collection and key")
    with open_store(other, embedder=local_embedder) as store:
        store.upsert_memory("Bob's bank PIN is 4417", entity="alice")  # under Alice's scope, in another store
        memory_index(store)
    other_key = KeyFile(other).read()
    # the collection id differs too; make the header claim ours to reach the key check
    with np.load(snapshot_path(settings), allow_pickle=False) as archive:
        content = {name: archive[name] for name in archive.files}
    with open_store(settings.model_copy(update={"index_snapshot": False}), embedder=local_embedder) as store:
        ours = str(store.col.id)
    header = json.loads(content["header"].tobytes()) | {"collection_id": ours}
    content["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    write_archive(snapshot_path(settings), content, other_key)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="brain.store")
    with open_store(settings, embedder=local_embedder) as store:
        assert alice_sees(store) == expected
    assert any("not signed with this store's snapshot key" in r.getMessage() for r in caplog.records)
