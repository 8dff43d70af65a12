"""EngramMirror: engramai opening our file, the row mapping, writes, recall, coverage, backfill."""

from __future__ import annotations

import logging
import sqlite3
import threading

import numpy as np
import pytest

from brain.features.mirror import EngramMirror
from brain.model.errors import ValidationError
from brain.model.results import Document

MODEL = "local/minilm-l6-v2"
TS = "2026-03-01T10:00:00+00:00"
EPOCH = 1772359200.0


def meta(doc_type="memory", **extra):
    base = {"type": doc_type, "timestamp": TS, "ts_epoch": EPOCH, "source": "chat", "scope": "global"}
    if doc_type == "memory":
        base.update(importance=3, tags=[])
    return {**base, **extra}


MEMORIES = [
    (
        "mem-passport",
        "Alice keeps her passport in the blue drawer",
        meta(importance=5, scope="entity:alice", entity="alice", tags=["travel"]),
    ),
    (
        "mem-veg",
        "Alice is vegetarian and loves lentil soup",
        meta(importance=4, scope="entity:alice", entity="alice", tags=["food"]),
    ),
    ("mem-piano", "Bob practises the piano every Tuesday evening", meta(importance=2, tags=["music", "episodic"])),
    (
        "mem-trip",
        "The team offsite is planned for Lisbon in May",
        meta(importance=1, conversation_id="conv-42", mood="excited", score=0.25),
    ),
]


@pytest.fixture(autouse=True)
def _no_engram_extractor(monkeypatch):
    """engramai would call an LLM to extract facts when these are set; the tests use its raw storage."""
    for key in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "ENGRAM_EXTRACTOR_MODEL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent-home-for-engram")


@pytest.fixture
def vectors(local_embedder):
    return local_embedder.embed_documents([text for _, text, _ in MEMORIES])


@pytest.fixture
def mirror(tmp_path, vectors):
    m = EngramMirror(tmp_path / "mirror.db", MODEL)
    m.upsert([{"id": i, "text": t, "metadata": md, "embedding": v} for (i, t, md), v in zip(MEMORIES, vectors)])
    yield m
    m.close()


def open_engram(path):
    from engram import Memory

    mem = Memory(str(path))
    mem.set_extractor(None)
    return mem


# ---- engramai reads and writes our file --------------------------------------------------------
def test_engram_recalls_our_memories_by_keyword_and_adds_its_own(mirror, tmp_path):
    path = tmp_path / "mirror.db"
    mem = open_engram(path)
    try:
        assert len(mem) == len(MEMORIES)
        hits = mem.recall("passport", limit=3)
        assert [h["id"] for h in hits] == ["mem-passport"]
        assert hits[0]["content"] == MEMORIES[0][1]
        assert hits[0]["type"] == "factual" and hits[0]["layer"] == "core" and hits[0]["importance"] == 1.0
        assert [h["id"] for h in mem.recall("piano Tuesday", limit=3)] == ["mem-piano"]
        assert mem.recall("piano", limit=3)[0]["type"] == "episodic"  # from the tag
        own = mem.add("Carol prefers window seats on long flights", type="opinion", importance=0.7, extract=False)
        assert [h["id"] for h in mem.recall("window seats", limit=3)] == [own]
        stats = mem.stats()
        assert stats["total_memories"] == len(MEMORIES) + 1
    finally:
        mem.close()
    # our side: the row engram wrote is foreign, the file is consistent, our tables kept their shape
    assert mirror.ids(foreign=True) == {own}
    (carol,) = mirror.get([own])
    assert carol.foreign and carol.text.startswith("Carol prefers")
    assert carol.metadata["engram_type"] == "opinion" and carol.metadata["importance"] == 4
    assert mirror.integrity_check() == "ok"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        cols = [r[1] for r in raw.execute("PRAGMA table_info(memory_embeddings)")]
        assert cols == ["memory_id", "model", "embedding", "dimensions", "created_at"]
        accesses = raw.execute("SELECT COUNT(*) FROM access_log WHERE memory_id = 'mem-passport'").fetchone()[0]
    assert accesses >= 2  # creation + engram's recall
    reopened = EngramMirror(path, MODEL)
    assert reopened.migration is None and reopened.count() == len(MEMORIES) + 1
    # our writes after engram's: FTS follows updates, deletes cascade through engram's links
    reopened.upsert(
        [{"id": "mem-passport", "text": "Alice keeps her visa in the red folder", "metadata": MEMORIES[0][2]}]
    )
    reopened.delete(["mem-piano"])
    from engram.store import SQLiteStore

    store = SQLiteStore(str(path))  # engram's keyword search itself (its recall falls back to every row)
    try:
        assert store.search_fts("passport") == []
        assert [e.id for e in store.search_fts("visa")] == ["mem-passport"]
        assert store.search_fts("piano") == [] and store.get("mem-piano") is None
    finally:
        store.close()
    assert reopened.integrity_check() == "ok"


def test_engram_created_file_is_adopted(tmp_path):
    """A file engramai made first (with its v1 embeddings table) becomes a v2 mirror keeping engram's rows."""
    path = tmp_path / "engram-first.db"
    mem = open_engram(path)
    own = mem.add("Dana collects vintage postcards", type="relational", extract=False)
    mem.close()
    mirror = EngramMirror(path, MODEL)
    assert mirror.migration is not None and mirror.migration.migrated == 0
    mirror.upsert([{"id": "ours", "text": "Postcards arrive on Fridays", "metadata": meta()}])
    assert mirror.ids(foreign=True) == {own} and mirror.ids(foreign=False) == {"ours"}
    assert {h.id for h in mirror.keyword_recall("postcards", 5)} == {own, "ours"}
    assert mirror.integrity_check() == "ok"


# ---- the mapping -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "metadata, memory_type, layer, importance, namespace",
    [
        (meta(importance=5), "factual", "core", 1.0, "default"),
        (meta(importance=4), "factual", "working", 0.8, "default"),
        (meta(importance=3, scope="entity:bob", entity="bob"), "factual", "working", 0.6, "entity:bob"),
        (meta(importance=2, tags=["x", "Procedural"]), "procedural", "archive", 0.4, "default"),
        (meta(importance=1, engram_type="causal", tags=["opinion"]), "causal", "archive", 0.2, "default"),
        (meta("turn", conversation_id="conv-1", role="user", turn_index=1), "episodic", "working", 0.6, "default"),
        (meta("summary", conversation_id="conv-1", summary_index=1), "episodic", "working", 0.6, "default"),
        (meta("faq", topic="ocr", _specialist_name="ocr", _version="kb-1"), "factual", "archive", 0.6, "default"),
        (meta("persona", version="v1", topic="tone"), "procedural", "core", 1.0, "default"),
    ],
)
def test_row_mapping(tmp_path, metadata, memory_type, layer, importance, namespace):
    path = tmp_path / "m.db"
    m = EngramMirror(path, MODEL)
    m.upsert([{"id": "d1", "text": "some text", "metadata": metadata}])
    with sqlite3.connect(path) as raw:
        row = raw.execute(
            "SELECT memory_type, layer, importance, namespace, created_at, source FROM memories"
        ).fetchone()
    assert row == (memory_type, layer, pytest.approx(importance), namespace, EPOCH, "chat")
    (doc,) = m.get(["d1"])
    assert doc.metadata == metadata and not doc.foreign  # lossless way back


def test_metadata_round_trip_is_lossless(mirror):
    got = {d.id: d for d in mirror.iter_documents(batch=1)}
    assert list(got) == [i for i, _, _ in MEMORIES]  # insertion order, across page boundaries
    for doc_id, text, metadata in MEMORIES:
        assert got[doc_id].text == text
        assert got[doc_id].metadata == metadata
    assert isinstance(got["mem-trip"].metadata["score"], float) and got["mem-trip"].metadata["mood"] == "excited"
    doc_id, text, metadata, embedding = got["mem-veg"]  # unpacks like a tuple
    assert embedding.shape == (384,)


# ---- writes ---------------------------------------------------------------------------------------
def test_upsert_is_idempotent_and_accepts_documents(mirror, tmp_path, vectors):
    path = tmp_path / "mirror.db"
    docs = [Document(id=i, text=t, metadata=md, embedding=v) for (i, t, md), v in zip(MEMORIES, vectors)]
    with sqlite3.connect(path) as raw:
        before = raw.execute("SELECT rowid, * FROM memories ORDER BY id").fetchall()
    assert mirror.upsert(docs) == len(docs)
    assert mirror.upsert(docs) == len(docs)
    with sqlite3.connect(path) as raw:
        after = raw.execute("SELECT rowid, * FROM memories ORDER BY id").fetchall()
        log_rows = raw.execute("SELECT memory_id, accessed_at FROM access_log ORDER BY memory_id").fetchall()
        emb = raw.execute("SELECT COUNT(*) FROM memory_embeddings").fetchone()[0]
    assert after == before
    assert log_rows == sorted((i, EPOCH) for i, _, _ in MEMORIES)  # one creation row each, at ts_epoch
    assert emb == len(MEMORIES)
    assert mirror.integrity_check() == "ok"


def test_changed_text_drops_stale_vectors(mirror):
    mirror.upsert_embeddings([("mem-veg", np.ones(8))], "other/model")
    assert set(mirror.embeddings("mem-veg")) == {MODEL, "other/model"}
    mirror.upsert([{"id": "mem-veg", "text": "Alice eats fish again", "metadata": MEMORIES[1][2]}])
    assert mirror.embeddings("mem-veg") == {}
    assert mirror.get(["mem-veg"])[0].embedding is None
    # a metadata-only change keeps them
    mirror.upsert_embeddings([("mem-piano", np.ones(8))], "other/model")
    mirror.upsert([{"id": "mem-piano", "text": MEMORIES[2][1], "metadata": {**MEMORIES[2][2], "importance": 5}}])
    assert set(mirror.embeddings("mem-piano")) == {MODEL, "other/model"}
    assert mirror.get(["mem-piano"])[0].metadata["importance"] == 5


def test_invalid_batches_write_nothing(tmp_path):
    m = EngramMirror(tmp_path / "m.db", MODEL)
    good = {"id": "a", "text": "fine", "metadata": meta()}
    bad_cases = [
        {"id": "", "text": "x", "metadata": meta()},
        {"id": "b", "text": None, "metadata": meta()},
        {"id": "b", "text": "x", "metadata": {**meta(), "type": "note"}},
        {"id": "b", "text": "x", "metadata": {**meta(), "importance": 9}},
        {"id": "b", "text": "x", "metadata": {**meta(), "scope": "team"}},
        {"id": "b", "text": "x", "metadata": {**meta(), "ts_epoch": float("nan")}},
        {"id": "b", "text": "x", "metadata": {**meta(), "weird": float("inf")}},
        {"id": "b", "text": "x", "metadata": {**meta(), "obj": object()}},
        good,  # the same id twice in one batch
        "not a document",
    ]
    for bad in bad_cases:
        with pytest.raises(ValidationError) as info:
            m.upsert([good, bad])
        assert info.value.problems and info.value.problems[0]["item"] == 1
        assert m.count() == 0


def test_delete_cascades(mirror, tmp_path):
    mirror.upsert_embeddings([("mem-veg", np.ones(8))], "other/model")
    assert mirror.delete(["mem-veg", "mem-trip", "no-such-id"]) == 2
    assert mirror.ids() == {"mem-passport", "mem-piano"}
    with sqlite3.connect(tmp_path / "mirror.db") as raw:
        left = {r[0] for r in raw.execute("SELECT memory_id FROM memory_embeddings")}
        logged = {r[0] for r in raw.execute("SELECT memory_id FROM access_log")}
    assert left == logged == {"mem-passport", "mem-piano"}
    assert mirror.keyword_recall("lentil", 3) == []
    assert mirror.integrity_check() == "ok"


def test_transaction_rolls_back_everything(mirror):
    with pytest.raises(RuntimeError):
        with mirror.transaction():
            mirror.upsert([{"id": "new", "text": "will vanish", "metadata": meta()}])
            mirror.delete(["mem-veg"])
            assert mirror.count() == len(MEMORIES)  # inside: our own uncommitted writes are visible
            raise RuntimeError("chroma failed")
    assert "new" not in mirror.ids() and "mem-veg" in mirror.ids()
    with mirror.transaction():
        mirror.upsert([{"id": "kept", "text": "stays", "metadata": meta()}])
        with pytest.raises(RuntimeError):
            with mirror.transaction():  # a savepoint
                mirror.delete(["mem-veg"])
                raise RuntimeError("inner")
    assert {"kept", "mem-veg"} <= mirror.ids()


def test_concurrent_writers_from_threads(tmp_path):
    m = EngramMirror(tmp_path / "m.db", MODEL)
    errors = []

    def write(t):
        try:
            for i in range(20):
                m.upsert(
                    [
                        {
                            "id": f"t{t}-{i}",
                            "text": f"thread {t} item {i}",
                            "metadata": meta(),
                            "embedding": np.full(4, t + 1.0),
                        }
                    ]
                )
                m.recall(np.ones(4), 3)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert m.count() == 80 and m.integrity_check() == "ok"


# ---- recall -------------------------------------------------------------------------------------------
def test_recall_matches_brute_force_with_filters(tmp_path):
    rng = np.random.default_rng(3)
    n, d = 300, 16
    vecs = rng.standard_normal((n, d)).astype(np.float32)
    scopes = ["global", "entity:alice", "entity:bob"]
    docs = []
    for i in range(n):
        doc_type = "memory" if i % 3 else "faq"
        md = meta(doc_type, scope=scopes[i % 3]) if doc_type == "memory" else meta("faq")
        if doc_type == "memory" and md["scope"] != "global":
            md["entity"] = md["scope"][7:]
        docs.append({"id": f"d{i:03d}", "text": f"doc {i}", "metadata": md, "embedding": vecs[i]})
    m = EngramMirror(tmp_path / "m.db", MODEL)
    m.upsert(docs)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    for _ in range(20):
        q = rng.standard_normal(d).astype(np.float32)
        sims = unit @ (q / np.linalg.norm(q))
        for types, allowed in ((None, None), (["memory"], {"memory"})):
            for scope_filter in (None, ["global", "entity:alice"]):
                rows = [
                    i
                    for i, doc in enumerate(docs)
                    if (allowed is None or doc["metadata"]["type"] in allowed)
                    and (scope_filter is None or doc["metadata"]["scope"] in scope_filter)
                ]
                expected = sorted(rows, key=lambda i: -sims[i])[:7]
                hits = m.recall(q, 7, types=types, scopes=scope_filter)
                assert [h.id for h in hits] == [f"d{i:03d}" for i in expected]
                assert [h.similarity for h in hits] == pytest.approx([float(sims[i]) for i in expected], abs=1e-5)
    assert m.recall(np.ones(d), 5, types=["persona"]) == []
    assert len(m.recall(np.ones(d), 1000)) == n


def test_recall_sees_writes_of_other_connections(mirror, tmp_path, local_embedder):
    q = local_embedder.embed_query("where is the passport?")
    assert mirror.recall(q, 1)[0].id == "mem-passport"
    with sqlite3.connect(tmp_path / "mirror.db") as raw:
        raw.execute("PRAGMA foreign_keys = ON")
        raw.execute("DELETE FROM memories WHERE id = 'mem-passport'")
    assert "mem-passport" not in [h.id for h in mirror.recall(q, 4)]
    mirror.upsert(
        [
            {
                "id": "mem-passport-2",
                "text": "passport",
                "metadata": meta(),
                "embedding": local_embedder.embed_documents(["Alice's passport is in the drawer"])[0],
            }
        ]
    )
    assert mirror.recall(q, 1)[0].id == "mem-passport-2"


def test_keyword_recall(mirror):
    hits = mirror.keyword_recall("What does Alice eat? lentil soup!", 3)
    assert hits[0].id == "mem-veg"
    assert {h.id for h in hits} == {"mem-veg", "mem-passport"}  # "alice" matches both; soup ranks first
    assert [h.id for h in mirror.keyword_recall("alice", 5, scopes=["global"])] == []
    assert [h.id for h in mirror.keyword_recall('piano OR NOT " *', 5, types=["memory"])] == ["mem-piano"]
    with pytest.raises(ValidationError):
        mirror.keyword_recall("?!", 3)


def test_coverage_warning(tmp_path, caplog):
    m = EngramMirror(tmp_path / "m.db", MODEL)
    m.upsert(
        [
            {"id": f"d{i}", "text": f"t{i}", "metadata": meta(), **({"embedding": np.ones(3)} if i == 0 else {})}
            for i in range(4)
        ]
    )
    with caplog.at_level(logging.WARNING, logger="brain.features.mirror"):
        assert [h.id for h in m.recall(np.ones(3), 4)] == ["d0"]
    assert "1 of 4 memories (25%)" in caplog.text
    caplog.clear()
    m.upsert_embeddings([("d1", np.ones(3))], MODEL)
    with caplog.at_level(logging.WARNING, logger="brain.features.mirror"):
        assert len(m.recall(np.ones(3), 4)) == 2
    assert "memories" not in caplog.text  # 50% is enough
    assert m.coverage().ratio == 0.5 and m.coverage("x/y").with_vectors == 0


# ---- backfill ----------------------------------------------------------------------------------------
def test_backfill_is_resumable_after_an_interruption(tmp_path, local_embedder):
    path = tmp_path / "m.db"
    m = EngramMirror(path, MODEL, batch_size=100)
    texts = [f"memory number {i} about {['cats', 'trains', 'tea', 'rain'][i % 4]}" for i in range(250)]
    m.upsert([{"id": f"m{i:03d}", "text": t, "metadata": meta()} for i, t in enumerate(texts)])
    calls = []

    def flaky(batch):
        calls.append(len(batch))
        if len(calls) == 2:
            raise ConnectionError("embedder went away")
        return local_embedder.embed_documents(batch)

    with pytest.raises(ConnectionError):
        m.backfill(flaky, progress=False)
    assert calls == [100, 100]
    assert m.coverage().with_vectors == 100  # the first transaction was committed
    m.close()

    m = EngramMirror(path, MODEL, batch_size=100)  # a new process resumes
    calls.clear()

    def steady(batch):
        calls.append(len(batch))
        return local_embedder.embed_documents(batch)

    assert m.backfill(steady, progress=False) == 150
    assert calls == [100, 50]  # only what was missing
    assert m.coverage().with_vectors == 250
    assert m.backfill(steady, progress=False) == 0 and calls == [100, 50]
    expected = local_embedder.embed_documents([texts[7], texts[249]])
    got = m.get(["m007", "m249"])
    np.testing.assert_array_equal(got[0].embedding, expected[0])
    np.testing.assert_array_equal(got[1].embedding, expected[1])


def test_backfill_of_a_second_model_and_batch_limits(tmp_path):
    m = EngramMirror(tmp_path / "m.db", MODEL, batch_size=100)
    m.upsert([{"id": f"m{i}", "text": f"text {i}", "metadata": meta(), "embedding": np.ones(4)} for i in range(120)])
    sizes = []

    def embed(batch):
        sizes.append(len(batch))
        return np.array([[len(t), 1.0] for t in batch], dtype=np.float32)

    assert m.backfill(embed, "toy/length", progress=False) == 120
    assert sizes == [100, 20]
    assert m.models() == {MODEL: 120, "toy/length": 120}
    assert m.embeddings("m100")["toy/length"].tolist() == [8.0, 1.0]
    for bad in (99, 1001, "500"):
        with pytest.raises(ValidationError):
            EngramMirror(tmp_path / "n.db", MODEL, batch_size=bad)


def test_cached_vectors_survive_other_writers_unrelated_commits(mirror, tmp_path, local_embedder):
    q = local_embedder.embed_query("who plays the piano?")
    assert mirror.recall(q, 1)[0].id == "mem-piano"
    cache = mirror._cache
    mem = open_engram(tmp_path / "mirror.db")
    try:
        assert mem.recall("piano", limit=2)  # engram logs the access: a commit recall does not depend on
    finally:
        mem.close()
    assert mirror.recall(q, 1)[0].id == "mem-piano" and mirror._cache is cache
    with sqlite3.connect(tmp_path / "mirror.db") as raw:  # a scope change does matter
        raw.execute("UPDATE memories SET namespace = 'entity:bob' WHERE id = 'mem-piano'")
        raw.execute(
            "UPDATE memories SET metadata = ? WHERE id = 'mem-piano'",
            (mapping_json({**MEMORIES[2][2], "scope": "entity:bob", "entity": "bob"}),),
        )
    assert mirror.recall(q, 1, scopes=["global"])[0].id != "mem-piano"
    assert mirror._cache is not cache


def mapping_json(metadata):
    from brain.features.mirror.mapping import metadata_json

    return metadata_json(metadata)


def test_chroma_shaped_metadata_is_stored_as_the_store_reads_it(tmp_path):
    """to_chroma() drops empty tag lists; the mirror keeps what store.get() returns (tags [])."""
    from brain.model.schemas import validate_metadata

    stored = validate_metadata("memory", {"timestamp": TS, "importance": 2}).to_chroma()
    assert "tags" not in stored
    m = EngramMirror(tmp_path / "m.db", MODEL)
    m.upsert([{"id": "x", "text": "no tags here", "metadata": stored}])
    assert m.get(["x"])[0].metadata == {**stored, "tags": []}


def test_count_by_type(mirror):
    mirror.upsert(
        [{"id": "t1", "text": "hi", "metadata": meta("turn", conversation_id="conv-1", role="user", turn_index=1)}]
    )
    assert mirror.count_by_type() == {"memory": 4, "turn": 1}
    assert mirror.stats()["by_type"] == {"memory": 4, "turn": 1}
