"""The Engram Embedding Protocol v2: BLOBs, validation codes, other writers' files, v1 migration, versions."""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import struct

import numpy as np
import pytest

from brain.features.mirror import (
    BLOB_LENGTH_INVALID,
    DIMENSION_MISMATCH,
    LEGACY_MODEL,
    MODEL_NAME_INVALID,
    NON_FINITE_VALUE,
    EmbeddingProtocolError,
    EngramMirror,
    check_model_name,
    decode_embedding,
    encode_embedding,
)
from brain.model.errors import BrainError
from brain.shells.cli.reports import migration_text

MODEL = "local/minilm-l6-v2"


def meta(**extra):
    base = {
        "type": "memory",
        "timestamp": "2026-03-01T10:00:00+00:00",
        "ts_epoch": 1772359200.0,
        "source": "chat",
        "scope": "global",
        "importance": 3,
        "tags": [],
    }
    return {**base, **extra}


# ---- serialisation ---------------------------------------------------------------------------------
def test_round_trip_is_bit_exact_little_endian_float32():
    rng = np.random.default_rng(7)
    special = np.array(
        [
            0.0,
            -0.0,
            1e-45,
            -1e-45,
            np.finfo(np.float32).max,
            np.finfo(np.float32).min,
            np.finfo(np.float32).tiny,
            1.0,
            -1.0,
        ],
        dtype=np.float32,
    )
    for vec in (special, rng.standard_normal(384).astype(np.float32), rng.standard_normal(768).astype(np.float32)):
        blob = encode_embedding(vec)
        assert blob == struct.pack(f"<{len(vec)}f", *vec.tolist())  # raw LE float32, no header
        assert len(blob) == 4 * len(vec)
        back = decode_embedding(blob, len(vec))
        assert back.dtype == np.float32
        assert back.tobytes() == vec.tobytes()  # bit for bit, signed zero included


def test_encoding_float64_input_rounds_to_float32():
    vec = [0.1, 0.2, 1 / 3]
    assert decode_embedding(encode_embedding(vec), 3).tolist() == np.asarray(vec, dtype=np.float32).tolist()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_rejected_both_ways(bad):
    with pytest.raises(EmbeddingProtocolError) as info:
        encode_embedding([0.1, bad, 0.3])
    assert info.value.code == NON_FINITE_VALUE
    blob = struct.pack("<3f", 0.1, bad, 0.3)
    with pytest.raises(EmbeddingProtocolError) as info:
        decode_embedding(blob, 3)
    assert info.value.code == NON_FINITE_VALUE


@pytest.mark.parametrize("size", [0, 1, 2, 3, 5, 7, 1537])
def test_blob_lengths_that_are_not_float32_values(size):
    with pytest.raises(EmbeddingProtocolError) as info:
        decode_embedding(b"\x00" * size, max(size // 4, 1))
    assert info.value.code == BLOB_LENGTH_INVALID


def test_blob_length_must_match_dimensions():
    blob = struct.pack("<4f", 1, 2, 3, 4)
    for dims in (3, 5, 0):
        with pytest.raises(EmbeddingProtocolError) as info:
            decode_embedding(blob, dims, memory_id="m1", model=MODEL)
        assert info.value.code == DIMENSION_MISMATCH
        assert "m1" in str(info.value) and info.value.memory_id == "m1"
    assert decode_embedding(blob, 4).tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "name",
    [
        "minilm",
        "a/b/c",
        "a /b",
        "a/b c",
        "a/b\n",
        "\ta/b",
        "/model",
        "provider/",
        "",
        "p/" + "m" * 255,
        42,
        None,
    ],
)
def test_bad_model_names(name):
    with pytest.raises(EmbeddingProtocolError) as info:
        check_model_name(name)
    assert info.value.code == MODEL_NAME_INVALID


@pytest.mark.parametrize("name", ["local/minilm-l6-v2", "ollama/nomic-embed-text:latest", "p/" + "m" * 254, "a/b"])
def test_good_model_names(name):
    assert check_model_name(name) == name


def test_protocol_error_is_a_named_brain_error():
    assert issubclass(EmbeddingProtocolError, BrainError)
    err = EmbeddingProtocolError(DIMENSION_MISMATCH, "x", memory_id="a", model="p/m")
    assert err.code == DIMENSION_MISMATCH and err.model == "p/m"


# ---- writes and reads through the mirror -------------------------------------------------------
def test_bad_vectors_reject_the_whole_batch(tmp_path, caplog):
    mirror = EngramMirror(tmp_path / "m.db", MODEL)
    good = {"id": "ok", "text": "fine", "metadata": meta(), "embedding": np.ones(4, np.float32)}
    cases = {
        NON_FINITE_VALUE: np.array([1, np.nan, 0, 0], np.float32),
        DIMENSION_MISMATCH: np.ones((2, 2), np.float32),
    }
    for code, vec in cases.items():
        with (
            caplog.at_level(logging.WARNING, logger="brain.features.mirror"),
            pytest.raises(EmbeddingProtocolError) as info,
        ):
            mirror.upsert([good, {"id": "bad", "text": "x", "metadata": meta(), "embedding": vec}])
        assert info.value.code == code
        assert "bad" in str(info.value)
        assert mirror.count() == 0
    assert "rejected" in caplog.text
    # the model's dimension is fixed by its first vector
    mirror.upsert([good])
    with pytest.raises(EmbeddingProtocolError) as info:
        mirror.upsert([{"id": "b", "text": "x", "metadata": meta(), "embedding": np.ones(5, np.float32)}])
    assert info.value.code == DIMENSION_MISMATCH
    assert mirror.ids() == {"ok"}
    with pytest.raises(EmbeddingProtocolError) as info:
        EngramMirror(tmp_path / "n.db", "minilm")
    assert info.value.code == MODEL_NAME_INVALID
    with pytest.raises(EmbeddingProtocolError) as info:
        mirror.upsert_embeddings([("ok", np.ones(3))], "not a model")
    assert info.value.code == MODEL_NAME_INVALID


@pytest.mark.parametrize(
    "blob, dims, code",
    [
        (b"\x00\x00\x80", 1, BLOB_LENGTH_INVALID),
        (struct.pack("<4f", 1, 2, 3, 4), 3, DIMENSION_MISMATCH),
        (struct.pack("<4f", 1, math.inf, 3, 4), 4, NON_FINITE_VALUE),
        (struct.pack("<4f", 1, math.nan, 3, 4), 4, NON_FINITE_VALUE),
        ("text", 4, BLOB_LENGTH_INVALID),  # TEXT, not a BLOB: made below with ||, not valid UTF-8
    ],
)
def test_corrupt_stored_rows_raise_on_read_and_recall_leaves_them_out(tmp_path, caplog, blob, dims, code):
    path = tmp_path / "m.db"
    mirror = EngramMirror(path, MODEL)
    mirror.upsert(
        [
            {"id": "a", "text": "alpha", "metadata": meta(), "embedding": np.ones(4, np.float32)},
            {"id": "b", "text": "beta", "metadata": meta(), "embedding": np.arange(1, 5, dtype=np.float32)},
        ]
    )
    with sqlite3.connect(path) as raw:
        if blob == "text":  # a BLOB concatenated with || is TEXT; these bytes are not UTF-8
            raw.execute(
                "UPDATE memory_embeddings SET embedding = x'0000c07f' || substr(embedding, 5) WHERE memory_id = 'a'"
            )
            assert raw.execute("SELECT typeof(embedding) FROM memory_embeddings WHERE memory_id = 'a'").fetchone() == (
                "text",
            )
        else:
            raw.execute(
                "UPDATE memory_embeddings SET embedding = ?, dimensions = ? WHERE memory_id = 'a'", (blob, dims)
            )
    for read in (lambda: mirror.get(["a"]), lambda: list(mirror.iter_documents()), lambda: mirror.embeddings("a")):
        with pytest.raises(EmbeddingProtocolError) as info:
            read()
        assert info.value.code == code and info.value.memory_id == "a"
    [doc] = mirror.get(["a"], bad_vectors="skip")
    assert doc.embedding is None and code in doc.vector_problem and doc.text == "alpha"
    with caplog.at_level(logging.WARNING, logger="brain.features.mirror"):
        hits = mirror.recall(np.ones(4), 5)
    assert [h.id for h in hits] == ["b"]
    assert code in caplog.text and "'a'" in caplog.text and "brain mirror sync" in caplog.text


# ---- a v2 file written by another implementation -------------------------------------------------
def test_reads_a_v2_file_written_byte_by_byte_with_plain_sqlite(tmp_path):
    """Another writer following only the spec: its own tables, BLOBs packed with struct."""
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE engram_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO engram_meta VALUES ('embedding_protocol_version', '2');
        CREATE TABLE memories (id TEXT PRIMARY KEY, content TEXT NOT NULL, summary TEXT DEFAULT '',
            tokens TEXT DEFAULT '', memory_type TEXT NOT NULL, layer TEXT NOT NULL, created_at REAL NOT NULL,
            working_strength REAL NOT NULL DEFAULT 1.0, core_strength REAL NOT NULL DEFAULT 0.0,
            importance REAL NOT NULL DEFAULT 0.3, pinned INTEGER NOT NULL DEFAULT 0,
            consolidation_count INTEGER NOT NULL DEFAULT 0, last_consolidated REAL, source TEXT DEFAULT '',
            contradicts TEXT DEFAULT '', contradicted_by TEXT DEFAULT '',
            namespace TEXT NOT NULL DEFAULT 'default', metadata TEXT);
        CREATE TABLE memory_embeddings (
            memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            model TEXT NOT NULL, embedding BLOB NOT NULL, dimensions INTEGER NOT NULL,
            created_at TEXT NOT NULL, PRIMARY KEY (memory_id, model));
        CREATE INDEX idx_embeddings_model ON memory_embeddings(model);
        """
    )
    vectors = {"m-north": (1.0, 0.0, 0.0), "m-east": (0.0, 1.0, 0.0), "m-mixed": (0.6, 0.8, 0.0)}
    ours = json.dumps({"brain": meta(importance=5, tags=["geo"])})
    for i, (mid, vec) in enumerate(vectors.items()):
        conn.execute(
            "INSERT INTO memories (id, content, memory_type, layer, created_at, importance, namespace, metadata) "
            "VALUES (?, ?, 'factual', 'working', ?, 0.5, ?, ?)",
            (mid, f"{mid} points somewhere", 1.7e9 + i, "default" if i else "entity:alice", ours if i == 2 else None),
        )
        blob = b"".join(struct.pack("<f", x) for x in vec)  # per the spec: 4 bytes per value, little-endian
        conn.execute(
            "INSERT INTO memory_embeddings VALUES (?, ?, ?, ?, ?)", (mid, MODEL, blob, 3, "2026-01-01T00:00:00Z")
        )
        conn.execute(
            "INSERT INTO memory_embeddings VALUES (?, ?, ?, ?, ?)",
            (mid, "other/model", struct.pack("<2f", 1.0, float(i)), 2, "2026-01-01T00:00:00Z"),
        )
    conn.commit()
    conn.close()

    mirror = EngramMirror(path, MODEL)
    assert mirror.migration is None and mirror.protocol_version == 2
    got = {d.id: d for d in mirror.iter_documents()}
    assert set(got) == set(vectors)
    for mid, vec in vectors.items():
        assert got[mid].embedding.tolist() == pytest.approx(list(vec))
    assert got["m-north"].foreign and got["m-north"].metadata["scope"] == "entity:alice"
    assert not got["m-mixed"].foreign and got["m-mixed"].metadata == meta(importance=5, tags=["geo"])
    hits = mirror.recall(np.array([1.0, 0.1, 0.0]), 3)
    assert [h.id for h in hits] == ["m-north", "m-mixed", "m-east"]
    assert hits[0].similarity == pytest.approx(1 / math.sqrt(1.01), abs=1e-6)
    assert [h.id for h in mirror.recall(np.array([1.0, 0.0, 0.0]), 3, scopes=["global"])] == ["m-mixed", "m-east"]
    # the FTS index was built for rows written before it existed
    assert [h.id for h in mirror.keyword_recall("east", 5)] == ["m-east"]
    assert mirror.integrity_check() == "ok"


# ---- several models -------------------------------------------------------------------------------
def test_several_models_per_memory_and_recall_uses_only_the_configured_one(tmp_path):
    path = tmp_path / "m.db"
    a = EngramMirror(path, "prov/model-a")
    a.upsert(
        [
            {"id": "x", "text": "x text", "metadata": meta(), "embedding": np.array([1, 0, 0], np.float32)},
            {"id": "y", "text": "y text", "metadata": meta(), "embedding": np.array([0, 1, 0], np.float32)},
            {"id": "z", "text": "z text", "metadata": meta()},
        ]
    )
    # model b: 2-d, and pointing the other way; z has only a b vector, x only an a vector
    a.upsert_embeddings([("y", [1.0, 0.0]), ("z", [0.9, 0.1])], "prov/model-b")
    assert a.models() == {"prov/model-a": 2, "prov/model-b": 2}
    both = a.embeddings("y")
    assert set(both) == {"prov/model-a", "prov/model-b"}
    assert both["prov/model-b"].tolist() == [1.0, 0.0]
    assert [h.id for h in a.recall(np.array([1, 0, 0]), 5)] == ["x", "y"]
    b = EngramMirror(path, "prov/model-b")
    assert [h.id for h in b.recall(np.array([1.0, 0.0]), 5)] == ["y", "z"]
    with pytest.raises(EmbeddingProtocolError) as info:
        b.recall(np.array([1, 0, 0]), 5)  # a model-a query against model-b vectors
    assert info.value.code == DIMENSION_MISMATCH
    c = EngramMirror(path, "prov/model-c")
    assert c.recall(np.array([1, 0, 0]), 5) == []  # no vectors of the model: empty, no fallback
    # replacing one model's vector leaves the other's alone
    a.upsert_embeddings([("y", [0.0, 0.0, 1.0])], "prov/model-a")
    assert a.embeddings("y")["prov/model-b"].tolist() == [1.0, 0.0]
    assert a.embeddings("y")["prov/model-a"].tolist() == [0.0, 0.0, 1.0]


# ---- v1 -> v2 migration --------------------------------------------------------------------------
def _v1_file(path, engram_shape: bool):
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE memories (id TEXT PRIMARY KEY, content TEXT NOT NULL, summary TEXT DEFAULT '', "
        "tokens TEXT DEFAULT '', memory_type TEXT NOT NULL, layer TEXT NOT NULL, created_at REAL NOT NULL, "
        "working_strength REAL NOT NULL DEFAULT 1.0, core_strength REAL NOT NULL DEFAULT 0.0, "
        "importance REAL NOT NULL DEFAULT 0.3, pinned INTEGER NOT NULL DEFAULT 0, "
        "consolidation_count INTEGER NOT NULL DEFAULT 0, last_consolidated REAL, source TEXT DEFAULT '')"
    )
    if engram_shape:  # what engramai 2.1.0 creates
        conn.execute(
            "CREATE TABLE memory_embeddings (memory_id TEXT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE, "
            "embedding TEXT NOT NULL, model TEXT NOT NULL, dimension INTEGER NOT NULL)"
        )
    else:  # the oldest shape: no model, no dimensions
        conn.execute("CREATE TABLE memory_embeddings (memory_id TEXT PRIMARY KEY, embedding TEXT NOT NULL)")
    for i in range(8):
        conn.execute(
            "INSERT INTO memories (id, content, memory_type, layer, created_at) VALUES (?, ?, 'factual', 'working', ?)",
            (f"m{i}", f"memory number {i}", 1.7e9 + i),
        )
    return conn


def _insert_v1(conn, engram_shape, memory_id, embedding, model="nomic-embed-text", dimension=None):
    if engram_shape:
        dim = dimension if dimension is not None else (len(json.loads(embedding)) if embedding.startswith("[") else 3)
        conn.execute("INSERT INTO memory_embeddings VALUES (?, ?, ?, ?)", (memory_id, embedding, model, dim))
    else:
        conn.execute("INSERT INTO memory_embeddings VALUES (?, ?)", (memory_id, embedding))


@pytest.mark.parametrize("engram_shape", [False, True], ids=["minimal-v1", "engramai-2.1.0-v1"])
def test_migration_from_v1_with_corrupt_rows(tmp_path, caplog, engram_shape):
    path = tmp_path / "v1.db"
    conn = _v1_file(path, engram_shape)
    good = {"m0": [0.25, -0.5, 1.0], "m1": [1e-3, 2.0, 3.5], "m2": [0.0, 0.0, 1.0]}
    for mid, vec in good.items():
        _insert_v1(conn, engram_shape, mid, json.dumps(vec))
    corrupt = {
        "m3": "not json at all",
        "m4": "[0.1, NaN, 0.3]",
        "m5": "[]",
        "m6": '["a", "b"]',
        "ghost": "[1.0, 2.0, 3.0]",  # no such memory
    }
    for mid, text in corrupt.items():
        _insert_v1(conn, engram_shape, mid, text)
    if engram_shape:
        _insert_v1(conn, True, "m7", "[1.0, 2.0]", model="openai/text-embedding-3-small", dimension=3)  # lies
        corrupt["m7"] = "dimension"
    conn.commit()
    conn.close()

    with caplog.at_level(logging.WARNING, logger="brain.features.mirror"):
        mirror = EngramMirror(path, MODEL)
    report = mirror.migration
    assert report is not None and report.from_version is None
    assert report.migrated == len(good)
    assert sorted(s.memory_id for s in report.skipped) == sorted(corrupt)
    for mid in corrupt:
        assert repr(mid) in caplog.text  # each skipped row logged with its memory_id
    assert f"{len(good)} embedding rows migrated, {len(corrupt)} skipped" in migration_text(report)
    legacy = "legacy/nomic-embed-text" if engram_shape else LEGACY_MODEL
    assert mirror.models() == {legacy: len(good)}
    for mid, vec in good.items():
        assert mirror.embeddings(mid)[legacy].tolist() == np.asarray(vec, np.float32).tolist()
    with sqlite3.connect(path) as raw:
        cols = {r[1]: r[2] for r in raw.execute("PRAGMA table_info(memory_embeddings)")}
        version = raw.execute("SELECT value FROM engram_meta WHERE key = 'embedding_protocol_version'").fetchone()
        blob, dims = raw.execute(
            "SELECT embedding, dimensions FROM memory_embeddings WHERE memory_id = 'm0'"
        ).fetchone()
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert cols == {
        "memory_id": "TEXT",
        "model": "TEXT",
        "embedding": "BLOB",
        "dimensions": "INTEGER",
        "created_at": "TEXT",
    }
    assert version == ("2",)
    assert blob == struct.pack("<3f", *good["m0"]) and dims == 3
    assert "memory_embeddings_v1" not in tables
    assert mirror.integrity_check() == "ok"
    mirror.close()
    again = EngramMirror(path, MODEL)  # already v2: nothing more to do
    assert again.migration is None and again.models() == {legacy: len(good)}


def test_a_newer_protocol_version_only_warns(tmp_path, caplog):
    path = tmp_path / "m.db"
    EngramMirror(path, MODEL).upsert([{"id": "a", "text": "alpha", "metadata": meta(), "embedding": np.ones(3)}])
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE engram_meta SET value = '3' WHERE key = 'embedding_protocol_version'")
    with caplog.at_level(logging.WARNING, logger="brain.features.mirror"):
        mirror = EngramMirror(path, MODEL)
    assert mirror.protocol_version == 3 and mirror.migration is None
    assert "protocol version 3" in caplog.text
    assert mirror.get(["a"])[0].embedding.tolist() == [1.0, 1.0, 1.0]
    with sqlite3.connect(path) as raw:  # never downgraded
        assert raw.execute("SELECT value FROM engram_meta WHERE key = 'embedding_protocol_version'").fetchone() == (
            "3",
        )


def test_a_new_file_declares_version_2(tmp_path):
    mirror = EngramMirror(tmp_path / "deep" / "dir" / "m.db", MODEL)
    assert mirror.migration is None
    with sqlite3.connect(tmp_path / "deep" / "dir" / "m.db") as raw:
        meta_rows = dict(raw.execute("SELECT key, value FROM engram_meta"))
        indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
    assert meta_rows == {"embedding_protocol_version": "2", "schema_version": "1", "brain_vector_changes": "0"}
    assert "idx_embeddings_model" in indexes
    assert mode == "wal"
