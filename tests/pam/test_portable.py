"""PAM export/import against the official schemas, the portable-ai-memory package and a real store."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import unicodedata
from pathlib import Path

import jsonschema
import numpy as np
import portable_ai_memory as pam
import pytest
import rfc8785
from portable_ai_memory.models import MemoryObject
from portable_ai_memory.schemas import load_schema

from brain.app.core import open_store as open_wired_store
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.features.pam import (
    CONVERSATIONS_DIR,
    EMBEDDINGS_FILE,
    MEMORY_STORE_FILE,
    content_hash,
    export_pam,
    foreign_conversation_id,
    import_pam,
    integrity_checksum,
    pam_tag,
)
from brain.model.errors import ValidationError
from tests.conftest import isolate

#: the PAM specification's example files (see tests/fixtures/pam/README.md for their source)
EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "pam"
OWNER = "7d1f6a52-0d0e-4a8b-b3a4-2c9f5f3b1e77"


class CountingEmbedder:
    """The real local embedder, recording every text it is asked to embed for storage."""

    def __init__(self, inner):
        self.inner = inner
        self.document_texts: list[str] = []

    def embed_documents(self, texts):
        self.document_texts.extend(texts)
        return self.inner.embed_documents(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture
def counting(local_embedder):
    return CountingEmbedder(local_embedder)


@pytest.fixture
def open_store(tmp_path, local_embedder):
    """``open_store(name, embedder=None)``: a real embedded store in its own data directory."""
    opened = []

    def make(name: str, embedder=None) -> RagStore:
        store = open_wired_store(Settings(data_dir=tmp_path / name), embedder=embedder or local_embedder)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture(scope="module")
def exports(tmp_path_factory, local_embedder) -> dict[str, Path]:
    """A PAM export of ``fill``'s memories and one of ``fill_conversations``' store, made once for the module:
    the refusal tests each copy one (:func:`copied`) and damage their copy. Building the source store and
    exporting it for each of their cases took most of their time, and none of them asserts on the source."""
    root = tmp_path_factory.mktemp("exports")
    made = {}
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root, tmp_path_factory.mktemp("xdg-state"))
        for name, filler in (("memories", fill), ("conversations", fill_conversations)):
            with open_wired_store(Settings(data_dir=root / name / "data"), embedder=local_embedder) as store:
                filler(store)
                made[name] = export_pam(store, root / name / "out").out_dir
    return made


def copied(export: Path, tmp_path: Path) -> Path:
    """A copy of a shared export in ``tmp_path / "out"``, this test's to change."""
    return Path(shutil.copytree(export, tmp_path / "out"))


def fill(store: RagStore) -> None:
    """Memories that exercise every part of the mapping."""
    store.upsert_memory(
        "Alice is vegetarian",
        scope="entity:alice",
        importance=5,
        tags=["Food", "diet plans", "日本", "food"],
        timestamp="2025-03-01T10:00:00+00:00",
    )
    store.upsert_memory(
        "Bob likes  late-night jazz",
        tags=["music"],
        conversation_id="conv-42",
        pam_type="preference",
        mood="happy",
        score=0.25,
        count=7,
        flag=True,
        tones=["a", "b"],
        timestamp="2025-04-02T08:30:15.123456+00:00",
    )
    store.upsert_memory("Call mum on Sundays", pam_type="hobby", importance=2, source="chat")
    store.upsert_memory(
        "The old office was in Leeds", pam_status="deprecated", entity="carol", timestamp="2024-12-31T23:59:59+00:00"
    )
    store.upsert_memory("Ünïcode cafe\u0301 notes", tags=["C++", "--x--"], pam_type="custom:skill")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


_SCHEMA_NAMES = {
    "portable-ai-memory": "memory-store",
    "portable-ai-memory-embeddings": "embeddings",
    "portable-ai-memory-conversation": "conversation",
}


def official_validator(name: str) -> jsonschema.Draft202012Validator:
    """The official JSON Schema ``name`` (as the package ships it), with the reference Python validator."""
    return jsonschema.Draft202012Validator(load_schema(_SCHEMA_NAMES[name]))


# ---- the spec's deterministic operations ---------------------------------------------------------
@pytest.mark.parametrize(
    "a, b",
    [
        ("Hello World", "  hello   world \n"),  # trim, case, whitespace runs
        ("tab\tand\nnew  line", "TAB AND NEW LINE"),
        ("caf\u00e9", "cafe\u0301"),  # NFC: composed and decomposed é
        ("\u00c5ngstr\u00f6m", "A\u030angstro\u0308m"),
    ],
)
def test_content_hash_normalises_like_the_spec(a, b):
    assert content_hash(a) == content_hash(b) == pam.compute_content_hash(a)
    assert re.fullmatch(r"sha256:[a-f0-9]{64}", content_hash(a))


def test_content_hash_value_and_difference():
    assert content_hash("  Hello\t World ") == "sha256:" + hashlib.sha256(b"hello world").hexdigest()
    assert content_hash("hello world") != content_hash("hello  worlds")
    nfc = unicodedata.normalize("NFC", "cafe\u0301")
    assert content_hash("cafe\u0301") == "sha256:" + hashlib.sha256(nfc.encode()).hexdigest()


def test_content_hash_matches_the_spec_examples():
    for mem in load(EXAMPLES / "example-memory-store.json")["memories"]:
        assert content_hash(mem["content"]) == mem["content_hash"]


@pytest.mark.parametrize(
    "tag, expected",
    [
        ("food", "food"),
        ("Food", "food"),
        ("diet plans", "diet-plans"),
        ("Ünïcode", "unicode"),
        ("C++", "c"),
        ("--x--", "x"),
        ("_under", "under"),
        ("a__b", "a__b"),
        ("日本", None),
        ("  ", None),
        ("v1.2", "v1-2"),
    ],
)
def test_pam_tag(tag, expected):
    assert pam_tag(tag) == expected
    if expected is not None:
        assert re.fullmatch(r"[a-z0-9][a-z0-9_-]*", expected)


def test_integrity_checksum_is_rfc8785_of_the_memories_sorted_by_id():
    memories = [{"id": "b", "x": 1.0, "é": "ü"}, {"id": "a", "z": [3, 2], "y": None}]
    expected = hashlib.sha256(rfc8785.dumps([memories[1], memories[0]])).hexdigest()
    assert integrity_checksum(memories) == f"sha256:{expected}"
    assert integrity_checksum(memories) == pam.compute_integrity_checksum(memories)


# ---- export --------------------------------------------------------------------------------------
def test_export_validates_everywhere(embedded_store, tmp_path):
    fill(embedded_store)
    report = export_pam(embedded_store, tmp_path / "out", owner_id=OWNER)
    assert report.memories == report.embeddings_written == 5
    doc = load(report.memory_store)
    emb = load(report.embeddings)

    # the official JSON Schemas, with the reference Python validator
    for name, data in (("portable-ai-memory", doc), ("portable-ai-memory-embeddings", emb)):
        errors = list(official_validator(name).iter_errors(data))
        assert not errors, [e.message for e in errors]
    # the portable-ai-memory package: models, deep validation and its checksum
    store_model = pam.load(report.memory_store)
    emb_model = pam.load(report.embeddings)
    result = pam.validate(store_model)
    assert result.is_valid and not result.warnings, str(result)
    result = pam.validate_embeddings(emb_model, store_model)
    assert result.is_valid and not result.warnings, str(result)
    # the checksum recomputed from the raw JSON, and the raw memories equal the package's dump of them
    raw_sorted = sorted(doc["memories"], key=lambda m: m["id"])
    assert doc["integrity"] == {
        "canonicalization": "RFC8785",
        "checksum": "sha256:" + hashlib.sha256(rfc8785.dumps(raw_sorted)).hexdigest(),
        "total_memories": 5,
    }
    dumped = [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in store_model.memories]
    assert dumped == doc["memories"]
    assert doc["schema"] == "portable-ai-memory" and doc["schema_version"] == "1.0"
    assert emb["schema"] == "portable-ai-memory-embeddings" and emb["schema_version"] == "1.0"
    assert doc["owner"] == {"id": OWNER}
    assert doc["exported_by"] == "brain/0.1.0"


def test_export_mapping(embedded_store, tmp_path):
    fill(embedded_store)
    doc = load(export_pam(embedded_store, tmp_path / "out").memory_store)
    by_content = {m["content"]: m for m in doc["memories"]}
    assert [m["id"] for m in doc["memories"]] == sorted(m["id"] for m in doc["memories"])
    assert {m["id"] for m in doc["memories"]} == {d.id for d in embedded_store.get(type="memory")}

    alice = by_content["Alice is vegetarian"]
    assert alice["type"] == "fact" and alice["status"] == "active"
    assert alice["tags"] == ["food", "diet-plans"]
    assert alice["temporal"] == {"created_at": "2025-03-01T10:00:00Z"}
    assert alice["provenance"] == {"platform": "brain"}
    assert alice["metadata"]["brain"] == {
        "scope": "entity:alice",
        "source": "system",
        "importance": 5,
        "tags": ["Food", "diet plans", "日本", "food"],
        "entity": "alice",
    }
    assert "confidence" not in alice  # importance is not confidence

    bob = by_content["Bob likes  late-night jazz"]
    assert bob["type"] == "preference" and "custom_type" not in bob
    assert bob["temporal"] == {"created_at": "2025-04-02T08:30:15.123456Z"}
    # conv-42 has no turns, so no conversation file: a conversation_ref would dangle in the index
    assert bob["provenance"] == {"platform": "brain"}
    assert bob["metadata"]["brain"]["conversation_id"] == "conv-42"
    without = load(export_pam(embedded_store, tmp_path / "plain", conversations=False).memory_store)
    assert "conversations_index" not in without  # no conversations exported: the ref names brain's id
    bob = next(m for m in without["memories"] if m["content"] == "Bob likes  late-night jazz")
    assert bob["provenance"] == {"platform": "brain", "conversation_ref": "conv-42"}
    assert bob["metadata"]["brain"]["extra"] == {
        "mood": "happy",
        "score": 0.25,
        "count": 7,
        "flag": True,
        "tones": ["a", "b"],
    }

    mum = by_content["Call mum on Sundays"]
    assert (mum["type"], mum["custom_type"]) == ("custom", "hobby")
    assert mum["metadata"]["brain"]["source"] == "chat" and mum["metadata"]["brain"]["importance"] == 2
    assert by_content["The old office was in Leeds"]["status"] == "deprecated"
    assert by_content["The old office was in Leeds"]["metadata"]["brain"]["entity"] == "carol"
    unicode = by_content["Ünïcode cafe\u0301 notes"]
    assert (unicode["type"], unicode["custom_type"]) == ("custom", "skill")
    assert unicode["tags"] == ["c", "x"]


def test_export_embeddings_match_memories_and_store(embedded_store, tmp_path):
    fill(embedded_store)
    report = export_pam(embedded_store, tmp_path / "out")
    doc, emb = load(report.memory_store), load(report.embeddings)
    by_id = {e["id"]: e for e in emb["embeddings"]}
    assert len(by_id) == len(emb["embeddings"]) == len(doc["memories"])
    assert len({e["memory_id"] for e in emb["embeddings"]}) == len(emb["embeddings"])
    stored = {d.id: d.embedding for d in embedded_store.get(type="memory", include_embeddings=True)}
    for mem in doc["memories"]:
        target = by_id[mem["embedding_ref"]]
        assert target["memory_id"] == mem["id"]
        assert target["model"] == embedded_store.embedder.name == "local/minilm-l6-v2"
        assert target["dimensions"] == len(target["vector"]) == 384
        # float32 written in its shortest form reads back bit for bit
        assert np.array_equal(np.asarray(target["vector"], dtype=np.float32), stored[mem["id"]])


def test_export_without_embeddings(embedded_store, tmp_path):
    fill(embedded_store)
    out = tmp_path / "out"
    export_pam(embedded_store, out)
    assert (out / EMBEDDINGS_FILE).exists()
    report = export_pam(embedded_store, out, embeddings=False)
    assert report.embeddings is None and report.embeddings_written == 0
    assert report.removed == [EMBEDDINGS_FILE]  # brain's older file would no longer match
    assert report.replaced == [MEMORY_STORE_FILE]
    assert sorted(p.name for p in out.iterdir()) == [MEMORY_STORE_FILE]
    doc = load(out / MEMORY_STORE_FILE)
    assert all(m.get("embedding_ref") is None for m in doc["memories"])
    assert not list(official_validator("portable-ai-memory").iter_errors(doc))
    assert pam.validate(pam.load(out / MEMORY_STORE_FILE)).is_valid


def test_export_of_an_empty_store(embedded_store, tmp_path):
    report = export_pam(embedded_store, tmp_path / "out")
    doc = load(report.memory_store)
    assert doc["memories"] == [] and doc["integrity"]["total_memories"] == 0
    assert load(report.embeddings)["embeddings"] == []
    assert pam.validate(pam.load(report.memory_store)).is_valid


def test_failed_export_leaves_the_previous_files(embedded_store, tmp_path):
    fill(embedded_store)
    out = tmp_path / "out"
    export_pam(embedded_store, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # Chroma stores 64-bit integers; RFC 8785 (I-JSON) cannot represent this one exactly
    embedded_store.upsert_memory("A very large number", big=2**60)
    with pytest.raises(ValidationError, match="A very large number|cannot be written as RFC 8785") as caught:
        export_pam(embedded_store, out)
    assert embedded_store.get(where={"big": 2**60})[0].id in str(caught.value)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp files, nothing replaced


def test_export_refuses_a_file_as_directory(embedded_store, tmp_path):
    target = tmp_path / "file.json"
    target.write_text("{}")
    with pytest.raises(ValidationError, match="is a file"):
        export_pam(embedded_store, target)


# ---- the export directory: only brain's own files are ever replaced or deleted -------------------
def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


FOREIGN_EMBEDDINGS = b'{"schema": "portable-ai-memory-embeddings", "embeddings": [{"id": "v1", "memory_id": "m1"}]}'


@pytest.mark.parametrize("embeddings", [True, False])
def test_export_refuses_a_directory_that_is_not_a_brain_export(embedded_store, tmp_path, embeddings):
    fill(embedded_store)
    out = tmp_path / "out"
    out.mkdir()
    (out / EMBEDDINGS_FILE).write_bytes(FOREIGN_EMBEDDINGS)
    (out / "notes.txt").write_text("mine")
    before = tree(out)
    with pytest.raises(
        ValidationError,
        match=r"is not empty \(embeddings\.json, notes\.txt\) and holds no brain "
        r"export; nothing was written.*--force",
    ):
        export_pam(embedded_store, out, embeddings=embeddings)
    assert tree(out) == before
    # another producer's memory store is not a brain export either
    (out / MEMORY_STORE_FILE).write_text(json.dumps({"schema": "portable-ai-memory", "exported_by": "gines/0.5.0"}))
    with pytest.raises(ValidationError, match="holds no brain export"):
        export_pam(embedded_store, out, embeddings=embeddings)


def test_export_with_force_overwrites_same_names_and_deletes_nothing(embedded_store, tmp_path):
    fill(embedded_store)
    out = tmp_path / "out"
    out.mkdir()
    (out / EMBEDDINGS_FILE).write_bytes(FOREIGN_EMBEDDINGS)
    (out / MEMORY_STORE_FILE).write_text('{"mine": true}')
    (out / "notes.txt").write_text("mine")
    report = export_pam(embedded_store, out, embeddings=False, force=True)
    assert report.replaced == [MEMORY_STORE_FILE] and report.removed == []
    assert (out / EMBEDDINGS_FILE).read_bytes() == FOREIGN_EMBEDDINGS  # not brain's: never deleted
    assert (out / "notes.txt").read_text() == "mine"
    assert any(f"{out / EMBEDDINGS_FILE} was not written by brain" in w for w in report.warnings)
    assert load(out / MEMORY_STORE_FILE)["exported_by"].startswith("brain/")
    # from now on the directory is a brain export; its embeddings.json is still not brain's
    again = export_pam(embedded_store, out, embeddings=False)
    assert again.replaced == [MEMORY_STORE_FILE] and again.removed == []
    assert (out / EMBEDDINGS_FILE).read_bytes() == FOREIGN_EMBEDDINGS
    # with embeddings, brain writes its own file in that place (listed as replaced)
    with_vectors = export_pam(embedded_store, out)
    assert with_vectors.replaced == [EMBEDDINGS_FILE, MEMORY_STORE_FILE]
    assert len(load(out / EMBEDDINGS_FILE)["embeddings"]) == 5


def test_export_replaces_a_previous_brain_export_file_for_file(embedded_store, tmp_path):
    fill_conversations(embedded_store)
    out = tmp_path / "out"
    first = export_pam(embedded_store, out)
    assert first.replaced == [] and first.removed == []
    (out / "notes.txt").write_text("mine")
    (out / CONVERSATIONS_DIR / "my-chat.json").write_text('{"provider": {"name": "brain"}}')  # not in the index
    ours = sorted(set(tree(out)) - {"notes.txt", "conversations/my-chat.json"})
    same = export_pam(embedded_store, out)
    assert same.replaced == ours and same.removed == []
    embedded_store.delete(type="turn", where={"conversation_id": "conv-a"})
    embedded_store.delete(type="summary", where={"conversation_id": "conv-a"})
    fewer = export_pam(embedded_store, out, embeddings=False)
    assert fewer.removed == ["conversations/conv-a.json", EMBEDDINGS_FILE]
    assert set(fewer.replaced) == set(ours) - set(fewer.removed)
    assert sorted(tree(out)) == sorted(set(fewer.replaced) | {"notes.txt", "conversations/my-chat.json"})
    assert (out / "notes.txt").read_text() == "mine"


def test_export_into_an_existing_empty_directory(embedded_store, tmp_path):
    fill(embedded_store)
    (tmp_path / "empty").mkdir()
    report = export_pam(embedded_store, tmp_path / "empty")
    assert report.memories == 5 and report.replaced == [] and report.removed == []


def test_cli_export_refuses_then_forces(embedded_store, tmp_path, monkeypatch, local_embedder):
    from click.testing import CliRunner

    import brain.store.facade
    import brain.wiring
    from brain.shells.cli import cli

    fill(embedded_store)
    embedded_store.close()  # the CLI opens the same data directory
    monkeypatch.setenv("BRAIN_DATA_DIR", str(embedded_store.settings.data_dir))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    monkeypatch.setattr(brain.wiring, "get_embedder", lambda settings: local_embedder, raising=False)
    out = tmp_path / "out"
    out.mkdir()
    (out / EMBEDDINGS_FILE).write_bytes(FOREIGN_EMBEDDINGS)
    refused = CliRunner().invoke(cli, ["export", str(out), "--no-embeddings"])
    assert refused.exit_code == 1 and refused.stdout == ""
    assert "holds no brain export; nothing was written" in refused.stderr and "--force" in refused.stderr
    assert sorted(tree(out)) == [EMBEDDINGS_FILE]
    forced = CliRunner().invoke(cli, ["export", str(out), "--no-embeddings", "--force"])
    assert forced.exit_code == 0, forced.stderr
    assert "exported 5 memories" in forced.stdout and "warning:" in forced.stdout
    assert (out / EMBEDDINGS_FILE).read_bytes() == FOREIGN_EMBEDDINGS
    again = CliRunner().invoke(cli, ["--json", "export", str(out)])
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["replaced"] == [EMBEDDINGS_FILE, MEMORY_STORE_FILE]
    plain = CliRunner().invoke(cli, ["export", str(out), "--no-embeddings"])
    assert plain.exit_code == 0, plain.stderr
    assert f"removed (of the previous export, no longer written): {EMBEDDINGS_FILE}" in plain.stdout
    assert "replaced: memory-store.json" in plain.stdout and not (out / EMBEDDINGS_FILE).exists()


# ---- import --------------------------------------------------------------------------------------
def snapshot(store: RagStore) -> dict:
    return {d.id: (d.text, d.metadata, d.embedding.tolist()) for d in store.get(include_embeddings=True)}


def test_round_trip_gives_the_same_memories(embedded_store, open_store, counting, tmp_path):
    fill(embedded_store)
    first = export_pam(embedded_store, tmp_path / "one", owner_id=OWNER)
    target = open_store("target", counting)
    report = import_pam(target, tmp_path / "one")
    assert (report.new, report.updated, report.unchanged) == (5, 0, 0)
    assert (report.vectors_reused, report.vectors_embedded) == (5, 0)
    assert counting.document_texts == []  # same model: not one memory embedded again
    second = export_pam(target, tmp_path / "two", owner_id=OWNER)

    a, b = load(first.memory_store), load(second.memory_store)
    assert a.pop("export_id") != b.pop("export_id")
    a.pop("export_date"), b.pop("export_date")
    assert a == b
    # embeddings: the same objects; vectors equal up to float32 rounding (Chroma may store a unit
    # vector it is given with its last bit changed)
    ea, eb = load(first.embeddings)["embeddings"], load(second.embeddings)["embeddings"]
    assert [{**e, "vector": None} for e in ea] == [{**e, "vector": None} for e in eb]
    assert np.allclose([e["vector"] for e in ea], [e["vector"] for e in eb], rtol=0, atol=1e-7)
    # and the stored documents themselves: ids, text, every metadata field, vectors
    source, copied = snapshot(embedded_store), snapshot(target)
    assert {i: d[:2] for i, d in source.items()} == {i: d[:2] for i, d in copied.items()}
    assert all(np.allclose(source[i][2], copied[i][2], rtol=0, atol=1e-7) for i in source)


def test_reimport_is_a_no_op(embedded_store, open_store, counting, tmp_path):
    fill(embedded_store)
    export_pam(embedded_store, tmp_path / "out")
    target = open_store("target", counting)
    import_pam(target, tmp_path / "out")
    before = snapshot(target)
    again = import_pam(target, tmp_path / "out" / MEMORY_STORE_FILE)
    assert (again.new, again.updated, again.unchanged, again.written) == (0, 0, 5, 0)
    assert snapshot(target) == before
    assert counting.document_texts == []
    # importing into the store the export came from changes nothing either
    assert import_pam(embedded_store, tmp_path / "out").unchanged == 5


def test_import_of_a_changed_memory_updates_it_by_id(embedded_store, open_store, counting, tmp_path):
    fill(embedded_store)
    out = tmp_path / "out"
    export_pam(embedded_store, out)
    target = open_store("target", counting)
    import_pam(target, out)
    doc = load(out / MEMORY_STORE_FILE)
    mem = next(m for m in doc["memories"] if m["content"] == "Call mum on Sundays")
    mem["content"] = "Call mum on Sundays and Wednesdays"
    mem["content_hash"] = content_hash(mem["content"])
    mem["embedding_ref"] = None  # the stored vector belongs to the old content
    mem["metadata"]["brain"]["importance"] = 4
    del doc["integrity"]
    (out / MEMORY_STORE_FILE).write_text(json.dumps(doc))
    report = import_pam(target, out)
    assert (report.new, report.updated, report.unchanged) == (0, 1, 4)
    assert counting.document_texts == ["Call mum on Sundays and Wednesdays"]
    stored = target.get_one(mem["id"])
    assert stored.text == "Call mum on Sundays and Wednesdays" and stored.metadata["importance"] == 4
    assert target.count("memory") == 5


def example_dir(tmp_path: Path, embeddings: bool = True) -> Path:
    folder = tmp_path / "example"
    folder.mkdir(exist_ok=True)
    shutil.copy(EXAMPLES / "example-memory-store.json", folder / MEMORY_STORE_FILE)
    if embeddings:
        shutil.copy(EXAMPLES / "example-embeddings.json", folder / EMBEDDINGS_FILE)
    # the spec ships one conversation file; the index names three: the other two are copies of it
    (folder / "conversations").mkdir(exist_ok=True)
    conversation = load(EXAMPLES / "example-conversation.json")
    for entry in load(folder / MEMORY_STORE_FILE)["conversations_index"]:
        (folder / entry["storage"]["ref"]).write_text(json.dumps({**conversation, "id": entry["id"]}))
    return folder


def test_import_the_spec_example_regenerates_foreign_vectors(open_store, counting, local_embedder, tmp_path):
    folder = example_dir(tmp_path)
    example = load(folder / MEMORY_STORE_FILE)
    store = open_store("store", counting)
    report = import_pam(store, folder)
    contents = [m["content"] for m in example["memories"]]
    messages = [m["content"]["text"] for m in load(EXAMPLES / "example-conversation.json")["messages"]]
    assert report.new == 5 and report.vectors_embedded == 5 and report.vectors_reused == 0
    # example-model-8d vectors are not ours; turns are embedded from their text (3 conversations)
    assert sorted(counting.document_texts) == sorted(contents + messages * 3)
    assert report.owner_id == example["owner"]["id"]
    assert report.not_imported == {"relations": 3}
    assert (report.conversations, report.turns, report.conversation_new) == (3, 6, 6)
    for mem in example["memories"]:
        doc = store.get(mem["id"], include_embeddings=True)[0]
        assert doc.text == mem["content"]
        assert doc.metadata["source"] == "import" and doc.metadata["scope"] == "global"
        assert doc.metadata["tags"] == mem["tags"]
        assert doc.metadata["timestamp"] == mem["temporal"]["updated_at"].replace("Z", "+00:00")
        expected = local_embedder.embed_documents([mem["content"]])[0]
        assert np.allclose(doc.embedding, expected, atol=1e-6)
    # the memories are found by meaning
    hits = store.retrieve_memories("which web scraping framework does the user run?", k=1, relevance=False)
    assert hits[0].id == "mem-002-skill"

    # exporting them again keeps every PAM field brain has no place for
    out = export_pam(store, tmp_path / "again")
    again = {m["id"]: m for m in load(out.memory_store)["memories"]}
    original = pam.load(folder / MEMORY_STORE_FILE)
    for mem in original.memories:
        want = mem.model_dump(mode="json", by_alias=True, exclude_none=True)
        got = copy.deepcopy(again[mem.id])
        assert got["metadata"].pop("brain")["importance"] == 3
        assert got.pop("embedding_ref") == f"emb-{mem.id}"
        want.pop("embedding_ref")
        assert got == want
    assert pam.validate(pam.load(out.memory_store)).is_valid


def test_import_without_embeddings_file_or_with_null_refs(open_store, counting, tmp_path):
    folder = example_dir(tmp_path, embeddings=False)  # embedding_refs name a file that is not there
    store = open_store("store", counting)
    report = import_pam(store, folder)
    assert report.embeddings is None and report.new == 5 and report.vectors_embedded == 5
    assert any("no embeddings.json" in w for w in report.warnings)
    assert len(counting.document_texts) == 5 + 6  # and the turns of the three conversations

    doc = load(folder / MEMORY_STORE_FILE)
    for mem in doc["memories"]:
        mem["id"] += "-b"
        mem["embedding_ref"] = None
    doc["relations"], doc["conversations_index"] = [], []
    del doc["integrity"], doc["signature"]
    (folder / MEMORY_STORE_FILE).write_text(json.dumps(doc))
    shutil.copy(EXAMPLES / "example-embeddings.json", folder / EMBEDDINGS_FILE)
    (folder / EMBEDDINGS_FILE).write_text(json.dumps({**load(folder / EMBEDDINGS_FILE), "embeddings": []}))
    assert import_pam(store, folder).new == 5
    assert store.count("memory") == 10


def test_vectors_reused_only_for_the_same_model_and_dimension(embedded_store, open_store, counting, tmp_path):
    fill(embedded_store)
    out = tmp_path / "out"
    export_pam(embedded_store, out)
    emb = load(out / EMBEDDINGS_FILE)
    doc = load(out / MEMORY_STORE_FILE)
    content = {m["id"]: m["content"] for m in doc["memories"]}
    renamed, resized = emb["embeddings"][0], emb["embeddings"][1]
    renamed["model"] = "openai/text-embedding-3-small"  # same dimension, another model
    resized["model"] = "example/model-3d"  # another model, another dimension
    resized["dimensions"], resized["vector"] = 3, resized["vector"][:3]
    (out / EMBEDDINGS_FILE).write_text(json.dumps(emb))
    store = open_store("target", counting)
    report = import_pam(store, out)
    assert (report.vectors_reused, report.vectors_embedded, report.vectors_normalised) == (3, 2, 0)
    assert sorted(counting.document_texts) == sorted([content[renamed["memory_id"]], content[resized["memory_id"]]])
    source = {d.id: d.embedding for d in embedded_store.get(type="memory", include_embeddings=True)}
    for d in store.get(type="memory", include_embeddings=True):
        # reused ones bit for bit; regenerated ones by the same model from the same text
        assert np.allclose(d.embedding, source[d.id], atol=1e-6)


# ---- imported vectors are checked, and stored unit length ------------------------------------------
def exported_with_vectors(store: RagStore, out: Path) -> tuple[dict, dict]:
    fill(store)
    export_pam(store, out)
    emb = load(out / EMBEDDINGS_FILE)
    emb["embeddings"].sort(key=lambda e: e["memory_id"])
    return load(out / MEMORY_STORE_FILE), emb


def test_a_vector_that_is_not_unit_length_is_stored_normalised(embedded_store, open_store, counting, tmp_path):
    out = tmp_path / "out"
    _, emb = exported_with_vectors(embedded_store, out)
    sevens, doubled = emb["embeddings"][0], emb["embeddings"][1]
    sevens["vector"] = [7.0] * sevens["dimensions"]  # labelled with our model, all 7.0
    original = np.asarray(doubled["vector"], dtype=np.float32)
    doubled["vector"] = [2.0 * v for v in doubled["vector"]]
    (out / EMBEDDINGS_FILE).write_text(json.dumps(emb))
    target = open_store("target", counting)
    report = import_pam(target, out)
    assert (report.vectors_reused, report.vectors_embedded, report.vectors_normalised) == (5, 0, 2)
    assert any("2 vectors of local/minilm-l6-v2 were not unit length" in w for w in report.warnings)
    assert report.to_dict()["vectors_normalised"] == 2
    assert counting.document_texts == []
    stored = {d.id: d.embedding for d in target.get(type="memory", include_embeddings=True)}
    for vector in stored.values():
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6
    dim = sevens["dimensions"]
    assert np.allclose(stored[sevens["memory_id"]], np.full(dim, 1 / np.sqrt(dim)), atol=1e-6)
    assert np.allclose(stored[doubled["memory_id"]], original, atol=1e-6)


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999"]


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("model", ["ours", "another"])
def test_a_vector_with_a_non_finite_value_is_refused(exports, open_store, counting, tmp_path, value, model):
    out = copied(exports["memories"], tmp_path)
    emb = load(out / EMBEDDINGS_FILE)
    emb["embeddings"].sort(key=lambda e: e["memory_id"])  # as exported_with_vectors sorts them
    bad = emb["embeddings"][2]
    if model == "another":
        bad["model"] = "openai/text-embedding-3-small"
    bad["vector"][7] = "SENTINEL"
    (out / EMBEDDINGS_FILE).write_text(json.dumps(emb).replace('"SENTINEL"', value))
    target = open_store("target", counting)
    target.upsert_memory("Already here before the import")
    before = snapshot(target)
    counting.document_texts.clear()
    with pytest.raises(ValidationError) as caught:
        import_pam(target, out)
    message = str(caught.value)
    assert (
        f"embeddings.json: embeddings[2].vector: embedding {bad['id']!r} of memory {bad['memory_id']!r} has a "
        f"value that is not a finite number" in message
    ), message
    assert "nothing was written" in message and caught.value.problems[0]["item"] == 2
    assert snapshot(target) == before and counting.document_texts == []


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            lambda e: e.update(dimensions=3, vector=e["vector"][:3]),
            r"embeddings\[1\]\.dimensions: embedding '[^']+' of memory '[^']+' is labelled local/minilm-l6-v2, whose "
            r"vectors have 384 dimensions, but has 3",
        ),
        (
            lambda e: e.update(vector=[0.0] * 384),
            r"embeddings\[1\]\.vector: embedding '[^']+' of memory '[^']+' is all zeros",
        ),
        (
            lambda e: e.update(vector=e["vector"][:-1]),
            r"embeddings\[1\]\.vector: embedding '[^']+' of memory '[^']+' has "
            r"383 values but dimensions is 384",
        ),
    ],
    ids=["other-dimension", "zeros", "short"],
)
def test_a_vector_that_cannot_be_our_models_is_refused(
    embedded_store, open_store, counting, tmp_path, change, expected
):
    out = tmp_path / "out"
    _, emb = exported_with_vectors(embedded_store, out)
    change(emb["embeddings"][1])
    (out / EMBEDDINGS_FILE).write_text(json.dumps(emb))
    target = open_store("target", counting)
    with pytest.raises(ValidationError, match=expected) as caught:
        import_pam(target, out)
    assert "nothing was written" in str(caught.value) and emb["embeddings"][1]["memory_id"] in str(caught.value)
    assert target.count() == 0 and counting.document_texts == []


# ---- deeply nested files: a clean error naming the file, nothing written ---------------------------
def nested(depth: int, leaf="x"):
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


DEEP = "__deep__"


def deep_text(depth: int, as_list: bool = False) -> str:
    """JSON text nested ``depth`` levels (the standard library's encoder cannot write 5,000)."""
    return ("[" * depth + '"x"' + "]" * depth) if as_list else ('{"a":' * depth + '"x"' + "}" * depth)


def deep_memory_metadata(doc, emb, conv):
    doc["memories"][0]["metadata"]["deep"] = DEEP
    return MEMORY_STORE_FILE, "memories[0].metadata.deep", False


def deep_root(doc, emb, conv):
    doc["deep"] = DEEP
    return MEMORY_STORE_FILE, "deep", True


def deep_embeddings(doc, emb, conv):
    emb["embeddings"][0]["extra"] = DEEP
    return EMBEDDINGS_FILE, "embeddings[0].extra", False


def deep_conversation(doc, emb, conv):
    conv["raw_metadata"]["deep"] = DEEP
    return "conversations/conv-a.json", "raw_metadata.deep", False


@pytest.mark.parametrize("place", [deep_memory_metadata, deep_root, deep_embeddings, deep_conversation])
@pytest.mark.parametrize("depth", [500, 5000])
def test_a_deeply_nested_file_is_refused_cleanly(exports, open_store, tmp_path, place, depth):
    out = copied(exports["conversations"], tmp_path)
    doc, emb, conv = load(out / MEMORY_STORE_FILE), load(out / EMBEDDINGS_FILE), load(_conv_a(out))
    file, where, as_list = place(doc, emb, conv)
    doc.pop("integrity")
    for path, data in ((out / MEMORY_STORE_FILE, doc), (out / EMBEDDINGS_FILE, emb), (_conv_a(out), conv)):
        path.write_text(json.dumps(data).replace(json.dumps(DEEP), deep_text(depth, as_list)))
    target = open_store("target")
    with pytest.raises(ValidationError) as caught:
        import_pam(target, out)
    message = str(caught.value)
    assert message.startswith(f"{file}: ") and "nothing was written" in message, message
    assert "nested more than 64 levels deep" in message
    # the JSON path where it goes too deep; beyond what the parser reads at all, the line and column
    assert message.startswith(f"{file}: {where}" if depth == 500 else f"{file}: line 1, column ")
    assert target.count() == 0


def test_nesting_up_to_the_limit_imports(embedded_store, open_store, tmp_path):
    out = tmp_path / "out"
    doc, _ = exported_with_vectors(embedded_store, out)
    # root, memories, the memory, metadata: 4 levels, then 60 more; brackets inside strings do not count
    doc["memories"][0]["metadata"]["deep"] = nested(60, leaf="[[[[{{{{" * 40)
    doc.pop("integrity")
    (out / MEMORY_STORE_FILE).write_text(json.dumps(doc))
    assert import_pam(open_store("target"), out).new == 5
    doc["memories"][0]["metadata"]["deep"] = nested(61)
    (out / MEMORY_STORE_FILE).write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match="nested more than 64 levels deep"):
        import_pam(open_store("other"), out)


def test_import_from_the_package_writer_with_its_checksum(open_store, tmp_path):
    """A file whose checksum is over the package's model dump, not over the raw JSON (nulls spelled out)."""
    memory = MemoryObject.create(
        id="pkg-1",
        type=pam.MemoryType.PREFERENCE,
        content="Prefers tea over coffee",
        platform="claude",
        tags=["drinks"],
    )
    dumped = memory.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw = {**dumped, "summary": None, "custom_type": None, "embedding_ref": None}
    doc = {
        "schema": "portable-ai-memory",
        "schema_version": "1.0",
        "owner": {"id": "someone"},
        "memories": [raw],
        "integrity": {"checksum": pam.compute_integrity_checksum([dumped]), "total_memories": 1},
    }
    assert pam.compute_integrity_checksum([raw]) != doc["integrity"]["checksum"]
    path = tmp_path / "pkg" / "export.json"  # any file name; no embeddings.json beside it
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    store = open_store("store")
    report = import_pam(store, path)
    assert report.new == 1
    stored = store.get_one("pkg-1")
    assert stored.metadata["pam_type"] == "preference" and stored.metadata["tags"] == ["drinks"]


# ---- bad files: rejected with the JSON path, nothing written -------------------------------------
def _mem(doc, i):
    return doc["memories"][i]


def _rehash(doc, i):
    """Keep content_hash and drop the integrity block so only the intended problem is left."""
    _mem(doc, i)["content_hash"] = content_hash(_mem(doc, i)["content"])
    doc.pop("integrity", None)


def bad_tag(doc, emb):
    _mem(doc, 3)["tags"] = ["ok", "Bad Tag"]
    return "memories[3].tags[1]"


def missing_content(doc, emb):
    del _mem(doc, 1)["content"]
    return "memories[1]"


def bad_time(doc, emb):
    _mem(doc, 2)["temporal"]["created_at"] = "last Tuesday"
    return "memories[2].temporal.created_at"


def naive_time(doc, emb):
    _mem(doc, 2)["temporal"]["created_at"] = "2025-01-01T10:00:00"
    return "memories[2].temporal.created_at"


def unknown_type(doc, emb):
    _mem(doc, 0)["type"] = "opinion"
    return "memories[0].type"


def extra_property(doc, emb):
    _mem(doc, 4)["colour"] = "blue"
    return "memories[4]"


def edited_content(doc, emb):
    _mem(doc, 1)["content"] += " (edited)"
    return "memories[1].content_hash"


def tampered(doc, emb):
    _mem(doc, 0)["metadata"]["brain"]["importance"] = 1
    return "integrity.checksum"


def wrong_total(doc, emb):
    doc["integrity"]["total_memories"] = 4
    return "integrity.total_memories"


def duplicate_id(doc, emb):
    _mem(doc, 2)["id"] = _mem(doc, 1)["id"]
    doc.pop("integrity")
    return "memories[2].id"


def wrong_schema(doc, emb):
    doc["schema"] = "pam"
    return "schema"


def major_version(doc, emb):
    doc["schema_version"] = "2.0"
    emb["schema_version"] = "2.0"
    return "schema_version"


def bad_importance(doc, emb):
    _mem(doc, 0)["metadata"]["brain"]["importance"] = 9
    doc.pop("integrity")
    return "memories[0].metadata.brain.importance"


def bad_scope(doc, emb):
    _mem(doc, 0)["metadata"]["brain"]["scope"] = "team:x"
    doc.pop("integrity")
    return "memories[0].metadata.brain.scope"


def bad_extra(doc, emb):
    _mem(doc, 0)["metadata"]["brain"]["extra"] = {"nested": {"a": 1}}
    doc.pop("integrity")
    return "memories[0].metadata.brain.extra.nested"


def ref_to_other_memory(doc, emb):
    _mem(doc, 0)["embedding_ref"] = _mem(doc, 1)["embedding_ref"]
    doc.pop("integrity")
    return "memories[0].embedding_ref"


def ref_to_nothing(doc, emb):
    _mem(doc, 0)["embedding_ref"] = "emb-missing"
    doc.pop("integrity")
    return "memories[0].embedding_ref"


def short_vector(doc, emb):
    emb["embeddings"][2]["vector"] = emb["embeddings"][2]["vector"][:100]
    return "embeddings[2].vector"


def duplicate_memory_id(doc, emb):
    emb["embeddings"][1]["memory_id"] = emb["embeddings"][0]["memory_id"]
    return "embeddings[1].memory_id"


def orphan_embedding(doc, emb):
    emb["embeddings"][3]["memory_id"] = "doc-nobody"
    return "embeddings[3].memory_id"


def vector_of_strings(doc, emb):
    emb["embeddings"][0]["vector"][5] = "0.1"
    return "embeddings[0].vector[5]"


@pytest.mark.parametrize(
    "mutate",
    [
        bad_tag,
        missing_content,
        bad_time,
        naive_time,
        unknown_type,
        extra_property,
        edited_content,
        tampered,
        wrong_total,
        duplicate_id,
        wrong_schema,
        major_version,
        bad_importance,
        bad_scope,
        bad_extra,
        ref_to_other_memory,
        ref_to_nothing,
        short_vector,
        duplicate_memory_id,
        orphan_embedding,
        vector_of_strings,
    ],
)
def test_bad_files_are_rejected_with_their_json_path(exports, open_store, counting, tmp_path, mutate):
    out = copied(exports["memories"], tmp_path)
    doc, emb = load(out / MEMORY_STORE_FILE), load(out / EMBEDDINGS_FILE)
    doc["memories"].sort(key=lambda m: m["content"])  # fixed positions whatever the ids
    path = mutate(doc, emb)
    (out / MEMORY_STORE_FILE).write_text(json.dumps(doc, ensure_ascii=False))
    (out / EMBEDDINGS_FILE).write_text(json.dumps(emb))
    target = open_store("target", counting)
    target.upsert_memory("Already here before the import", tags=["x"])
    before = snapshot(target)
    counting.document_texts.clear()
    with pytest.raises(ValidationError) as caught:
        import_pam(target, out)
    message = str(caught.value)
    assert re.search(rf"(^|[ :]){re.escape(path)}[:.\[ ]", message), message
    assert "nothing was written" in message
    assert any(p["field"].startswith(path) for p in caught.value.problems)
    assert snapshot(target) == before
    assert counting.document_texts == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"schema": "portable-ai-memory", "memories": [', "not valid JSON"),
        ('{"schema": "portable-ai-memory", "x": NaN}', "not valid JSON"),
        ("[1, 2]", "(document root)"),
    ],
)
def test_unparseable_files_are_rejected(embedded_store, tmp_path, text, expected):
    path = tmp_path / MEMORY_STORE_FILE
    path.write_text(text)
    with pytest.raises(ValidationError, match=re.escape(expected)):
        import_pam(embedded_store, path)
    assert embedded_store.count() == 0


def test_missing_paths_are_explained(embedded_store, tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        import_pam(embedded_store, tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValidationError, match=f"no {MEMORY_STORE_FILE} in"):
        import_pam(embedded_store, tmp_path / "empty")


def test_import_never_replaces_another_document_type(embedded_store, open_store, tmp_path):
    fill(embedded_store)
    out = tmp_path / "out"
    export_pam(embedded_store, out)
    first = min(load(out / MEMORY_STORE_FILE)["memories"], key=lambda m: m["id"])
    target = open_store("target")
    target.upsert_doc("OCR reads text in images.", "faq", id=first["id"], topic="ocr")
    before = snapshot(target)
    index = [m["id"] for m in load(out / MEMORY_STORE_FILE)["memories"]].index(first["id"])
    with pytest.raises(ValidationError, match=re.escape(f"memories[{index}].id") + ".*faq document"):
        import_pam(target, out)
    assert snapshot(target) == before


def test_round_trip_over_a_chroma_server(store, open_store, tmp_path):
    fill(store)
    first = export_pam(store, tmp_path / "one", owner_id=OWNER)
    target = open_store("target")
    assert import_pam(target, tmp_path / "one").vectors_reused == 5
    second = export_pam(target, tmp_path / "two", owner_id=OWNER)
    a, b = load(first.memory_store), load(second.memory_store)
    for key in ("export_id", "export_date"):
        a.pop(key), b.pop(key)
    assert a == b


def test_memories_not_exportable_stay_out_of_exports(open_store, tmp_path):
    folder = example_dir(tmp_path)
    doc = load(folder / MEMORY_STORE_FILE)
    doc["memories"][1]["access"]["exportable"] = False
    del doc["integrity"]
    (folder / MEMORY_STORE_FILE).write_text(json.dumps(doc))
    store = open_store("store")
    assert import_pam(store, folder).new == 5
    report = export_pam(store, tmp_path / "out")
    assert report.memories == 4 and report.not_exportable == 1
    exported = load(report.memory_store)
    assert doc["memories"][1]["id"] not in {m["id"] for m in exported["memories"]}
    assert len(load(report.embeddings)["embeddings"]) == 4
    assert pam.validate_embeddings(pam.load(report.embeddings), pam.load(report.memory_store)).is_valid


def test_owner_id_comes_from_the_setting(tmp_path, local_embedder):
    import json as _json

    from brain.app.core import open_store
    from brain.config import Settings
    from brain.features.pam import export_pam

    with open_store(Settings(data_dir=tmp_path / "d", owner_id="household-42"), embedder=local_embedder) as store:
        store.upsert_memory("Alice likes tea")
        export_pam(store, tmp_path / "out")
    assert _json.loads((tmp_path / "out" / "memory-store.json").read_text())["owner"]["id"] == "household-42"


# ---- conversations -------------------------------------------------------------------------------
def fill_conversations(store: RagStore) -> None:
    """Memories (from fill) plus conversations: turns with extra metadata, summaries, a summary-only one."""
    fill(store)
    store.upsert_turn(
        "conv-a",
        "I am planning a trip to Lisbon",
        "Lovely! When are you going?",
        user_ts="2025-05-01T09:00:00+00:00",
        assistant_ts="2025-05-01T09:00:02.5+00:00",
        lang="en",
    )
    store.upsert_turn(
        "conv-a",
        "In June, with my sister",
        "June is a great month for Lisbon.",
        user_ts="2025-05-01T09:01:00+00:00",
        assistant_ts="2025-05-01T09:01:03+00:00",
    )
    # a turn of another scope inside conv-a: only a write that gives its positions (an import, a restore)
    # can make one, since a conversation keeps to its owner's scope
    hotel = {
        "type": "turn",
        "conversation_id": "conv-a",
        "timestamp": "2025-05-01T09:02:00+00:00",
        "scope": "entity:alice",
        "source": "system",
    }
    store.upsert_docs(
        [
            {**hotel, "text": "Book a hotel near the river", "role": "user", "turn_index": 5},
            {**hotel, "text": "Noted: a hotel near the Tagus.", "role": "assistant", "turn_index": 6},
        ]
    )
    store.upsert_summary(
        "conv-a",
        "The user plans a June trip to Lisbon with their sister.",
        turn_range="1-4",
        timestamp="2025-05-01T09:01:10+00:00",
        model_name="stub",
    )
    store.upsert_summary(
        "conv-a", "They want a hotel near the river.", turn_range="5-6", timestamp="2025-05-01T09:02:10+00:00"
    )
    store.upsert_turn("conv-b.2:x", "What is my dentist's name?", "Dr. Silva.", user_ts="2025-06-01T12:00:00+00:00")
    store.upsert_summary(
        "conv-s", "An older conversation whose turns were removed.", timestamp="2025-01-01T00:00:00+00:00"
    )
    store.upsert_memory("Going to Lisbon in June", conversation_id="conv-a", timestamp="2025-05-01T09:03:00+00:00")
    store.upsert_memory("Dentist is Dr. Silva", conversation_id="conv-b.2:x", importance=4)
    store.upsert_memory("Summaries only here", conversation_id="conv-s")


def conversation_docs(store: RagStore) -> dict:
    return {d.id: (d.text, d.metadata) for t in ("turn", "summary") for d in store.get(type=t)}


def test_conversation_files_validate_and_agree_with_the_index(embedded_store, tmp_path):
    fill_conversations(embedded_store)
    report = export_pam(embedded_store, tmp_path / "out", owner_id=OWNER)
    assert (report.conversations, report.messages, report.summaries) == (3, 8, 3)
    assert report.memories == 8
    doc = load(report.memory_store)
    conversation_schema = official_validator("portable-ai-memory-conversation")
    assert not list(official_validator("portable-ai-memory").iter_errors(doc))
    # the package: checksum (memories only) and conversation_ref <-> derived_memories, no warning either
    result = pam.validate(pam.load(report.memory_store))
    assert result.is_valid and not result.warnings, str(result)

    index = {entry["id"]: entry for entry in doc["conversations_index"]}
    assert set(index) == {"conv-a", "conv-b.2:x", "conv-s"}  # brain's ids are the PAM ids
    files = {}
    for conv_id, entry in index.items():
        assert entry["platform"] == "brain" and entry["storage"]["type"] == "file"
        path = report.out_dir / entry["storage"]["ref"]
        assert path.parent == report.conversations_dir
        conv = load(path)
        assert not [e.message for e in conversation_schema.iter_errors(conv)]
        result = pam.validate(pam.load(path))
        assert result.is_valid and not result.warnings, str(result)
        assert conv["id"] == conv_id and conv["schema_version"] == doc["schema_version"]
        assert entry["message_count"] == len(conv["messages"]) and entry["temporal"] == conv["temporal"]
        files[conv_id] = conv
    assert sorted(p.name for p in report.conversations_dir.iterdir()) == sorted(
        p.split("/")[1] for p in (e["storage"]["ref"] for e in index.values())
    )
    # derived_memories is exactly the memories naming the conversation, and every ref is in the index
    memories = {m["content"]: m for m in doc["memories"]}
    for conv_id, entry in index.items():
        naming = sorted(m["id"] for m in doc["memories"] if m["provenance"].get("conversation_ref") == conv_id)
        assert entry["derived_memories"] == naming
    assert index["conv-a"]["derived_memories"] == [memories["Going to Lisbon in June"]["id"]]
    assert index["conv-s"]["derived_memories"] == [memories["Summaries only here"]["id"]]
    assert all(m["provenance"].get("conversation_ref") in (None, *index) for m in doc["memories"])
    assert "conversation_ref" not in memories["Bob likes  late-night jazz"]["provenance"]  # conv-42: no turns

    # messages in turn_index order with brain's ids, times and metadata
    a = files["conv-a"]
    turns = embedded_store.conversation_turns("conv-a")
    assert [m["id"] for m in a["messages"]] == [t.id for t in turns]
    assert [m["role"] for m in a["messages"]] == ["user", "assistant"] * 3
    assert [m["content"] for m in a["messages"]] == [{"type": "text", "text": t.text} for t in turns]
    assert a["messages"][1]["created_at"] == "2025-05-01T09:00:02.500000Z"
    assert a["messages"][0]["raw_metadata"]["brain"] == {
        "turn_index": 1,
        "source": "chat",
        "scope": "global",
        "extra": {"lang": "en"},
    }
    assert a["messages"][4]["raw_metadata"]["brain"] == {"turn_index": 5, "source": "system", "scope": "entity:alice"}
    assert "parent_id" not in a["messages"][0] and a["messages"][1]["parent_id"] == a["messages"][0]["id"]
    assert a["messages"][0]["children_ids"] == [a["messages"][1]["id"]] and "children_ids" not in a["messages"][-1]
    assert a["temporal"] == {"created_at": "2025-05-01T09:00:00Z", "updated_at": "2025-05-01T09:02:10Z"}
    assert a["provider"] == {"name": "brain", "conversation_id": "conv-a"}
    summaries = a["raw_metadata"]["brain"]["summaries"]
    assert [(s["summary_index"], s["turn_range"], s["text"]) for s in summaries] == [
        (1, "1-4", "The user plans a June trip to Lisbon with their sister."),
        (2, "5-6", "They want a hotel near the river."),
    ]
    assert summaries[0]["extra"] == {"model_name": "stub"} and summaries[0]["created_at"] == "2025-05-01T09:01:10Z"
    assert files["conv-s"]["messages"] == [] and len(files["conv-s"]["raw_metadata"]["brain"]["summaries"]) == 1
    # an id that is not a plain file name gets a hashed one
    assert re.fullmatch(r"conversations/conv-[0-9a-f]{32}\.json", index["conv-b.2:x"]["storage"]["ref"])


def test_round_trip_with_conversations(embedded_store, open_store, counting, tmp_path):
    fill_conversations(embedded_store)
    first = export_pam(embedded_store, tmp_path / "one", owner_id=OWNER)
    target = open_store("target", counting)
    report = import_pam(target, tmp_path / "one")
    assert (report.new, report.conversations, report.turns, report.summaries) == (8, 3, 8, 3)
    assert (report.conversation_new, report.conversation_updated, report.conversation_unchanged) == (11, 0, 0)
    assert report.vectors_reused == 8 and not report.messages_skipped and not report.not_imported
    # turns and summaries are embedded from their text; memories' vectors are reused
    assert sorted(counting.document_texts) == sorted(text for text, _ in conversation_docs(embedded_store).values())
    assert conversation_docs(target) == conversation_docs(embedded_store)  # ids, texts, every metadata field
    assert [t.id for t in target.recent_turns("conv-a", 6)] == [t.id for t in embedded_store.recent_turns("conv-a", 6)]

    second = export_pam(target, tmp_path / "two", owner_id=OWNER)
    a, b = load(first.memory_store), load(second.memory_store)
    for key in ("export_id", "export_date"):
        assert a.pop(key) and b.pop(key)
    assert a == b
    one = {p.name: p.read_bytes() for p in first.conversations_dir.iterdir()}
    two = {p.name: p.read_bytes() for p in second.conversations_dir.iterdir()}
    assert one == two and len(one) == 3

    # re-import: nothing written, nothing embedded
    counting.document_texts.clear()
    before = snapshot(target)
    again = import_pam(target, tmp_path / "one")
    assert (again.written, again.unchanged, again.conversation_unchanged) == (0, 8, 11)
    assert snapshot(target) == before and counting.document_texts == []
    # the next exchange goes after the imported turns: explicit turn_index values were kept
    target.upsert_turn("conv-a", "And a museum?", "The Gulbenkian.")
    assert [t.metadata["turn_index"] for t in target.recent_turns("conv-a", 3)] == [6, 7, 8]


FOREIGN = {
    "schema": "portable-ai-memory-conversation",
    "schema_version": "1.0",
    "id": "c-123",
    "provider": {"name": "chatgpt", "conversation_id": "orig-9"},
    "title": "Trip planning",
    "temporal": {"created_at": "2025-02-01T10:00:00Z", "updated_at": "2025-02-01T11:00:00Z"},
    "messages": [
        {
            "id": "m0",
            "role": "system",
            "content": {"type": "text", "text": "You are helpful."},
            "created_at": "2025-02-01T10:00:00Z",
        },
        {
            "id": "m1",
            "role": "user",
            "content": {"type": "text", "text": "Find me a flight to Oslo"},
            "created_at": "2025-02-01T10:00:01Z",
            "token_count": 7,
        },
        {
            "id": "m2",
            "role": "assistant",
            "is_thought": True,
            "content": {"type": "text", "text": "thinking"},
            "created_at": "2025-02-01T10:00:02Z",
        },
        {
            "id": "m3",
            "role": "assistant",
            "model": "gpt-4o",
            "created_at": "2025-02-01T10:00:03Z",
            "content": {
                "type": "multipart",
                "parts": [
                    {"type": "text", "text": "Here are two options."},
                    {"type": "image", "ref": "img.png"},
                    {"type": "code", "text": "SK 4411", "language": "text"},
                ],
            },
        },
        {"id": "m4", "role": "tool", "content": {"type": "text", "text": "{}"}, "created_at": "2025-02-01T10:00:04Z"},
        {"id": "m5", "role": "user", "created_at": "2025-02-01T10:00:05Z", "tool_calls": [{"name": "search"}]},
        {
            "id": "m6",
            "role": "user",
            "content": {"type": "text", "text": "Take the morning one"},
            "created_at": "2025-02-01T10:30:00Z",
            "raw_metadata": {"starred": True},
        },
    ],
    "tags": ["travel"],
}


def foreign_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "foreign"
    (folder / "chats").mkdir(parents=True)
    (folder / "chats" / "c-123.json").write_text(json.dumps(FOREIGN))
    memory = MemoryObject.create(
        id="f-mem-1", type=pam.MemoryType.CONTEXT, content="Flying to Oslo in March", platform="chatgpt"
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    memory["provenance"]["conversation_ref"] = "c-123"
    doc = {
        "schema": "portable-ai-memory",
        "schema_version": "1.0",
        "owner": {"id": "someone"},
        "memories": [memory],
        "conversations_index": [
            {
                "id": "c-123",
                "platform": "chatgpt",
                "title": "Trip planning",
                "message_count": 7,
                "temporal": FOREIGN["temporal"],
                "derived_memories": ["f-mem-1"],
                "storage": {"type": "file", "ref": "chats/c-123.json", "format": "json"},
            },
            {"id": "c-elsewhere", "platform": "chatgpt", "temporal": FOREIGN["temporal"]},
        ],
    }
    (folder / MEMORY_STORE_FILE).write_text(json.dumps(doc))
    return folder


def test_import_of_another_producers_conversation(open_store, tmp_path):
    folder = foreign_dir(tmp_path)
    store = open_store("store")
    report = import_pam(store, folder)
    conv_id = foreign_conversation_id("c-123")
    assert conv_id == foreign_conversation_id("c-123") and conv_id.startswith("conv-")
    assert (report.conversations, report.turns, report.conversation_new) == (1, 3, 3)
    assert report.messages_skipped == {"role system": 1, "role tool": 1, "thought": 1, "no text": 1}
    assert report.not_imported == {"conversations_index": 1}  # c-elsewhere has no file
    turns = store.conversation_turns(conv_id)
    assert [(t.metadata["turn_index"], t.metadata["role"], t.text) for t in turns] == [
        (1, "user", "Find me a flight to Oslo"),
        (2, "assistant", "Here are two options.\n\nSK 4411"),
        (3, "user", "Take the morning one"),
    ]
    assert turns[0].metadata["timestamp"] == "2025-02-01T10:00:01+00:00"
    assert all(t.metadata["source"] == "import" and t.metadata["scope"] == "global" for t in turns)
    # the memory is linked to its conversation by provenance.conversation_ref
    assert store.get_one("f-mem-1").metadata["conversation_id"] == conv_id

    # idempotent: the same ids again
    again = import_pam(store, folder)
    assert again.written == 0 and (again.unchanged, again.conversation_unchanged) == (1, 3)
    assert len(store.conversation_turns(conv_id)) == 3

    # exported again: the producer's id, title, provider, tags and message fields are kept
    out = export_pam(store, tmp_path / "out")
    doc = load(out.memory_store)
    assert [e["id"] for e in doc["conversations_index"]] == ["c-123"]
    entry = doc["conversations_index"][0]
    assert entry["platform"] == "chatgpt" and entry["title"] == "Trip planning" and entry["tags"] == ["travel"]
    assert entry["derived_memories"] == ["f-mem-1"] and doc["memories"][0]["provenance"]["conversation_ref"] == "c-123"
    conv = load(out.out_dir / entry["storage"]["ref"])
    assert conv["provider"] == FOREIGN["provider"] and conv["temporal"] == FOREIGN["temporal"]
    assert conv["raw_metadata"]["brain"]["conversation_id"] == conv_id
    assert conv["messages"][0]["token_count"] == 7 and conv["messages"][1]["model"] == "gpt-4o"
    assert conv["messages"][2]["raw_metadata"]["starred"] is True
    assert not list(official_validator("portable-ai-memory-conversation").iter_errors(conv))
    assert pam.validate(pam.load(out.memory_store)).is_valid
    # and brain's own export imports into another store as the same conversation
    other = open_store("other")
    import_pam(other, out.out_dir)
    assert conversation_docs(other) == conversation_docs(store)


def _conv_a(folder: Path) -> Path:
    entry = next(e for e in load(folder / MEMORY_STORE_FILE)["conversations_index"] if e["id"] == "conv-a")
    return folder / entry["storage"]["ref"]


def _edit(path: Path, change) -> None:
    data = load(path)
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda c: c["messages"][1].update(role="robot"), r"conversations/conv-a\.json: messages\[1\]\.role: "),
        (
            lambda c: c["messages"][2].update(created_at="yesterday"),
            r"conversations/conv-a\.json: messages\[2\]\.created_at",
        ),
        (lambda c: c.update(extra_field=1), r"conversations/conv-a\.json: \(document root\): .*extra_field"),
        (
            lambda c: c["messages"][0]["raw_metadata"]["brain"].update(turn_index=0),
            r"conversations/conv-a\.json: messages\[0\]\.raw_metadata\.brain: turn_index",
        ),
        (
            lambda c: c["messages"][0]["raw_metadata"]["brain"].update(colour="red"),
            r"conversations/conv-a\.json: messages\[0\]\.raw_metadata\.brain\.colour: is not a field",
        ),
        (
            lambda c: c["raw_metadata"]["brain"]["summaries"][0].update(turn_range="4-1"),
            r"conversations/conv-a\.json: raw_metadata\.brain\.summaries\[0\]: turn_range",
        ),
        (
            lambda c: c["raw_metadata"]["brain"].update(conversation_id="not a conv id"),
            r"conversations/conv-a\.json: raw_metadata\.brain\.conversation_id: conversation_id must look like",
        ),
        (lambda c: c.update(id="conv-other"), r"conversations/conv-a\.json: id: is 'conv-other' but .*'conv-a'"),
        (lambda c: c.update(schema_version="1.1"), r"conversations/conv-a\.json: schema_version: is '1\.1'"),
        (lambda c: c["messages"][3].update(id=c["messages"][0]["id"]), r"is also used in conversations/conv-a\.json"),
    ],
    ids=[
        "role",
        "time",
        "extra-property",
        "turn-index",
        "brain-field",
        "turn-range",
        "conversation-id",
        "id-mismatch",
        "version",
        "duplicate-id",
    ],
)
def test_bad_conversation_files_are_rejected_and_nothing_is_written(exports, open_store, tmp_path, change, expected):
    out = copied(exports["conversations"], tmp_path)
    _edit(_conv_a(out), change)
    target = open_store("target")
    with pytest.raises(ValidationError, match=expected) as caught:
        import_pam(target, out)
    assert "nothing was written" in str(caught.value)
    assert target.count() == 0


def test_a_missing_conversation_file_is_named(embedded_store, open_store, tmp_path):
    fill_conversations(embedded_store)
    out = export_pam(embedded_store, tmp_path / "out").out_dir
    _conv_a(out).unlink()
    target = open_store("target")
    with pytest.raises(
        ValidationError,
        match=r"conversations_index\[\d\]\.storage\.ref: names the conversation "
        r"file conversations/conv-a\.json, which does not exist",
    ):
        import_pam(target, out)
    assert target.count() == 0
    _edit(out / MEMORY_STORE_FILE, lambda d: d["conversations_index"][0]["storage"].update(ref="../../etc/passwd"))
    with pytest.raises(ValidationError, match="outside the export directory"):
        import_pam(target, out)


def test_export_without_conversations(embedded_store, tmp_path):
    fill_conversations(embedded_store)
    out = tmp_path / "out"
    first = export_pam(embedded_store, out)
    assert first.conversations == 3 and len(list(first.conversations_dir.iterdir())) == 3
    written = sorted(f"conversations/{p.name}" for p in first.conversations_dir.iterdir())
    report = export_pam(embedded_store, out, conversations=False)
    assert (report.conversations, report.messages, report.summaries) == (0, 0, 0)
    assert report.conversations_dir is None and report.removed == written
    assert list((out / "conversations").iterdir()) == []
    doc = load(out / MEMORY_STORE_FILE)
    assert "conversations_index" not in doc
    refs = {m["content"]: m["provenance"].get("conversation_ref") for m in doc["memories"]}
    assert refs["Going to Lisbon in June"] == "conv-a" and refs["Bob likes  late-night jazz"] == "conv-42"
    assert pam.validate(pam.load(out / MEMORY_STORE_FILE)).is_valid
    # the memories' checksum is over memories only: the same either way but for conversation_ref
    assert doc["integrity"]["checksum"] == integrity_checksum(doc["memories"])


def test_a_failed_export_keeps_the_previous_conversation_files(embedded_store, tmp_path):
    fill_conversations(embedded_store)
    out = tmp_path / "out"
    export_pam(embedded_store, out)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    embedded_store.upsert_turn("conv-new", "hello", "hi")
    embedded_store.upsert_memory("A very large number", big=2**60)
    with pytest.raises(ValidationError, match="cannot be written as RFC 8785"):
        export_pam(embedded_store, out)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_export_removes_only_its_own_stale_conversation_files(tmp_path, local_embedder):
    from brain.app.core import open_store
    from brain.config import Settings
    from brain.features.pam import export_pam

    with open_store(Settings(data_dir=tmp_path / "d"), embedder=local_embedder) as store:
        store.upsert_turn("conv-keep", "hello", "hi")
        store.upsert_turn("conv-gone", "bye", "see you")
        out = tmp_path / "out"
        export_pam(store, out)
        assert (out / "conversations" / "conv-gone.json").exists()
        (out / "conversations" / "notes.json").write_text('{"mine": true}')
        store.delete(type="turn", where={"conversation_id": "conv-gone"})
        report = export_pam(store, out)
    assert report.removed == ["conversations/conv-gone.json"]
    assert report.replaced == sorted(["conversations/conv-keep.json", EMBEDDINGS_FILE, MEMORY_STORE_FILE])
    assert not (out / "conversations" / "conv-gone.json").exists()
    assert (out / "conversations" / "conv-keep.json").exists()
    assert (out / "conversations" / "notes.json").read_text() == '{"mine": true}'  # not ours: kept


def test_an_older_export_of_a_global_memory_about_someone_imports_as_global(embedded_store, open_store, tmp_path):
    """Exports written before the entity became the scope could name an entity on a global memory;
    it imports, stays global (visible to everyone, as it was) and loses the entity."""
    embedded_store.upsert_memory("The office is closed on Fridays", importance=4)
    out = tmp_path / "out"
    export_pam(embedded_store, out)
    doc = load(out / MEMORY_STORE_FILE)
    doc["memories"][0]["metadata"]["brain"]["entity"] = "bob"
    del doc["integrity"]
    (out / MEMORY_STORE_FILE).write_text(json.dumps(doc))
    target = open_store("target")
    assert import_pam(target, out).new == 1
    stored = target.get(type="memory")[0]
    assert stored.metadata["scope"] == "global" and "entity" not in stored.metadata
    assert [h.id for h in target.retrieve_memories("office closed", 1, entity="alice", relevance=False)] == [stored.id]
