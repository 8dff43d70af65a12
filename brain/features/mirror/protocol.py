"""The Engram Embedding Protocol v2: how vectors are stored in ``memory_embeddings``.

One row per ``(memory_id, model)``; ``embedding`` is the vector as raw little-endian float32 with no
header, ``dimensions`` its length, ``created_at`` an ISO 8601 UTC time. ``engram_meta`` records
``embedding_protocol_version = '2'``. Every blob is validated before it is written and after it is
read; a failure raises :class:`EmbeddingProtocolError` whose ``code`` is one of

- ``BLOB_LENGTH_INVALID``: the blob's length is not a multiple of 4 (or is 0),
- ``DIMENSION_MISMATCH``: length / 4 differs from ``dimensions`` (or from the model's other vectors),
- ``NON_FINITE_VALUE``: a NaN or an infinity,
- ``MODEL_NAME_INVALID``: the model is not ``provider/model`` (exactly one ``/``, no whitespace,
  at most 256 characters).

Version 1 files (``memory_embeddings`` keyed by ``memory_id`` alone, the vector as JSON text, maybe no
``model`` or ``dimension`` column; engramai 2.1.0 still creates that shape) are migrated on open by
:func:`migrate_v1`: each row becomes a v2 BLOB row, ``unknown/legacy`` stands for a missing model,
dimensions are inferred. A row that cannot be migrated is skipped, its ``memory_id`` logged, and the
:class:`MigrationReport` lists it.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from brain.model.errors import EmbeddingProtocolError

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 2
VERSION_KEY = "embedding_protocol_version"
LEGACY_MODEL = "unknown/legacy"
MAX_MODEL_NAME = 256

BLOB_LENGTH_INVALID = "BLOB_LENGTH_INVALID"
DIMENSION_MISMATCH = "DIMENSION_MISMATCH"
NON_FINITE_VALUE = "NON_FINITE_VALUE"
MODEL_NAME_INVALID = "MODEL_NAME_INVALID"
ERROR_CODES = (BLOB_LENGTH_INVALID, DIMENSION_MISMATCH, NON_FINITE_VALUE, MODEL_NAME_INVALID)

_FLOAT32_LE = np.dtype("<f4")
_MODEL_RE = re.compile(r"[^/\s]+/[^/\s]+")


# ---- model names and blobs ----------------------------------------------------------------------
def check_model_name(model: object) -> str:
    """``model`` if it is a valid ``provider/model`` name, else raise ``MODEL_NAME_INVALID``."""
    if not isinstance(model, str):
        raise EmbeddingProtocolError(MODEL_NAME_INVALID, f"model name must be a string, got {type(model).__name__}")
    if len(model) > MAX_MODEL_NAME:
        raise EmbeddingProtocolError(
            MODEL_NAME_INVALID, f"model name has {len(model)} characters, at most {MAX_MODEL_NAME} are allowed"
        )
    if not _MODEL_RE.fullmatch(model):
        raise EmbeddingProtocolError(
            MODEL_NAME_INVALID,
            f"model name {model!r} must be 'provider/model': exactly one '/', text on both sides, no whitespace",
        )
    return model


def as_vector(vector: object, *, memory_id: str | None = None, model: str | None = None) -> np.ndarray:
    """A 1-d, finite, non-empty float32 array, or ``EmbeddingProtocolError``."""
    try:
        arr = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingProtocolError(
            DIMENSION_MISMATCH, f"the embedding is not a list of numbers ({exc})", memory_id=memory_id, model=model
        ) from None
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise EmbeddingProtocolError(
            DIMENSION_MISMATCH,
            f"the embedding must be a non-empty 1-d vector, got shape {arr.shape}",
            memory_id=memory_id,
            model=model,
        )
    if not np.isfinite(arr).all():
        raise EmbeddingProtocolError(
            NON_FINITE_VALUE, "the embedding contains NaN or infinite values", memory_id=memory_id, model=model
        )
    return arr


def encode_embedding(vector: object, *, memory_id: str | None = None, model: str | None = None) -> bytes:
    """The v2 BLOB of ``vector``: raw little-endian float32, no header."""
    return as_vector(vector, memory_id=memory_id, model=model).astype(_FLOAT32_LE, copy=False).tobytes()


def check_blob(
    blob: object, dimensions: object, *, memory_id: str | None = None, model: str | None = None, stored_as: str = "blob"
) -> None:
    """Raise unless ``blob`` is ``dimensions`` little-endian float32 values (length checks only).
    ``stored_as`` is the value's SQLite storage class (``typeof``): a reader selects it beside the value
    because a TEXT value that is not UTF-8 cannot even be fetched, and must be a bad row, not a crash."""
    if stored_as != "blob":
        raise EmbeddingProtocolError(
            BLOB_LENGTH_INVALID,
            f"the embedding is stored as SQLite {stored_as}, not as a BLOB",
            memory_id=memory_id,
            model=model,
        )
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise EmbeddingProtocolError(
            BLOB_LENGTH_INVALID,
            f"the embedding must be a BLOB, got {type(blob).__name__}",
            memory_id=memory_id,
            model=model,
        )
    size = len(blob)
    if size == 0 or size % 4:
        raise EmbeddingProtocolError(
            BLOB_LENGTH_INVALID,
            f"the BLOB has {size} bytes, not a positive multiple of 4",
            memory_id=memory_id,
            model=model,
        )
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or size // 4 != dimensions:
        raise EmbeddingProtocolError(
            DIMENSION_MISMATCH,
            f"the BLOB holds {size // 4} float32 values but dimensions is {dimensions!r}",
            memory_id=memory_id,
            model=model,
        )


def decode_embedding(
    blob: Any, dimensions: Any, *, memory_id: str | None = None, model: str | None = None, stored_as: str = "blob"
) -> np.ndarray:
    """The float32 vector of a v2 BLOB, validated (storage class, length, dimensions, finiteness)."""
    check_blob(blob, dimensions, memory_id=memory_id, model=model, stored_as=stored_as)
    vec = np.frombuffer(bytes(blob), dtype=_FLOAT32_LE).astype(np.float32)
    if not np.isfinite(vec).all():
        raise EmbeddingProtocolError(
            NON_FINITE_VALUE, "the stored embedding contains NaN or infinite values", memory_id=memory_id, model=model
        )
    return vec


def decode_matrix(
    ids: list[str], blobs: list[Any], dimensions: list[Any], *, model: str, stored_as: list[str] | None = None
) -> tuple[np.ndarray, list[int], list[tuple[str, str]]]:
    """Many BLOBs of one model as an ``(n, d)`` float32 matrix, each validated as by :func:`decode_embedding`.

    A row that breaks the protocol is left out rather than failing the others: returns the matrix of the
    good rows, their positions in ``ids``, and ``(id, reason)`` for each row left out. ``d`` is the first
    good row's dimension; a row of another dimension is left out. ``stored_as``: as for :func:`check_blob`.
    """
    kinds = stored_as if stored_as is not None else ["blob"] * len(blobs)
    kept: list[int] = []
    problems: list[tuple[str, str]] = []
    dim: int | None = None
    for j, (memory_id, blob, d, kind) in enumerate(zip(ids, blobs, dimensions, kinds)):
        try:
            check_blob(blob, d, memory_id=memory_id, model=model, stored_as=kind)
            if dim is not None and d != dim:
                raise EmbeddingProtocolError(
                    DIMENSION_MISMATCH,
                    f"{d}-d vector among {dim}-d vectors of the same model",
                    memory_id=memory_id,
                    model=model,
                )
        except EmbeddingProtocolError as exc:
            problems.append((memory_id, str(exc)))
            continue
        dim = d if dim is None else dim
        kept.append(j)
    if not kept or dim is None:  # a kept row sets dim
        return np.empty((0, 0), dtype=np.float32), [], problems
    matrix = np.frombuffer(b"".join(bytes(blobs[j]) for j in kept), dtype=_FLOAT32_LE).reshape(len(kept), dim)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        message = str(EmbeddingProtocolError(NON_FINITE_VALUE, "the stored embedding contains NaN or infinite values"))
        problems += [
            (ids[kept[j]], f"{message} (memory {ids[kept[j]]!r}, model {model!r})") for j in np.flatnonzero(~finite)
        ]
        kept = [kept[j] for j in np.flatnonzero(finite)]
        matrix = matrix[finite]
    return matrix.astype(np.float32), kept, problems


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


# ---- the version -------------------------------------------------------------------------------
def read_version(conn: sqlite3.Connection) -> int | None:
    """``embedding_protocol_version`` from ``engram_meta``; None when absent (or no meta table)."""
    try:
        row = conn.execute("SELECT value FROM engram_meta WHERE key = ?", (VERSION_KEY,)).fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None:
        return None
    try:
        return int(str(row[0]).strip())
    except ValueError:
        log.warning("engram_meta.%s is %r, not a number; treating the file as version 1", VERSION_KEY, row[0])
        return 1


def write_version(conn: sqlite3.Connection, version: int = PROTOCOL_VERSION) -> None:
    conn.execute("INSERT OR REPLACE INTO engram_meta (key, value) VALUES (?, ?)", (VERSION_KEY, str(version)))


def table_columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> dict[str, dict[str, object]]:
    """``{column: {"type", "notnull", "pk"}}`` of a table of ``schema`` (empty when it does not exist)."""
    rows = conn.execute('SELECT name, type, "notnull", pk FROM pragma_table_info(?, ?)', (table, schema)).fetchall()
    return {r[0]: {"type": (r[1] or "").upper(), "notnull": bool(r[2]), "pk": int(r[3])} for r in rows}


def is_v2_table(columns: dict[str, dict[str, object]]) -> bool:
    """Whether ``memory_embeddings`` already has the v2 shape (whatever the meta table says)."""
    needed = {"memory_id", "model", "embedding", "dimensions", "created_at"}
    if not needed <= set(columns):
        return False
    pk = sorted((c["pk"], name) for name, c in columns.items() if c["pk"])
    return [name for _, name in pk] == ["memory_id", "model"] and columns["embedding"]["type"] == "BLOB"


# ---- v1 -> v2 ----------------------------------------------------------------------------------
@dataclass
class SkippedRow:
    memory_id: str | None
    reason: str


@dataclass
class MigrationReport:
    """What opening an older file did: rows moved to v2 and rows left behind (with why)."""

    from_version: int | None
    to_version: int = PROTOCOL_VERSION
    migrated: int = 0
    skipped: list[SkippedRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "migrated": self.migrated,
            "skipped": [{"memory_id": s.memory_id, "reason": s.reason} for s in self.skipped],
        }


def _legacy_vector(raw: object) -> list[float] | np.ndarray:
    """A v1 ``embedding`` value (JSON text, JSON bytes or raw float32 bytes) as numbers."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        data = bytes(raw)
        try:
            numbers: list[float] = json.loads(data.decode("utf-8"))  # checked by the caller
            return numbers
        except (UnicodeDecodeError, json.JSONDecodeError):
            if len(data) == 0 or len(data) % 4:
                raise EmbeddingProtocolError(
                    BLOB_LENGTH_INVALID, f"a {len(data)}-byte binary embedding is not float32 values"
                ) from None
            return np.frombuffer(data, dtype=_FLOAT32_LE)
    if isinstance(raw, str):
        try:
            parsed: list[float] = json.loads(raw)  # checked by the caller
            return parsed
        except json.JSONDecodeError as exc:
            raise EmbeddingProtocolError(DIMENSION_MISMATCH, f"the embedding text is not JSON ({exc.msg})") from None
    raise EmbeddingProtocolError(BLOB_LENGTH_INVALID, f"the embedding is {type(raw).__name__}, not JSON text or a BLOB")


def _legacy_model(raw: object) -> str:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return LEGACY_MODEL
    name = str(raw).strip()
    try:
        return check_model_name(name)
    except EmbeddingProtocolError:
        # engramai records bare model names ("nomic-embed-text"): keep them under a provider of their own
        return check_model_name(f"legacy/{name}")


def migrate_v1(conn: sqlite3.Connection, create_v2_table: Iterable[str]) -> MigrationReport:
    """Rewrite a v1 ``memory_embeddings`` as v2 in the caller's open transaction.

    ``create_v2_table`` are the statements that create the v2 table and its index.
    """
    from_version = read_version(conn)
    columns = table_columns(conn, "memory_embeddings")
    report = MigrationReport(from_version=from_version)
    if not columns:
        for statement in create_v2_table:
            conn.execute(statement)
        write_version(conn)
        return report
    dim_column = "dimensions" if "dimensions" in columns else "dimension" if "dimension" in columns else None
    select = ", ".join(
        [
            "memory_id",
            "embedding",
            "model" if "model" in columns else "NULL",
            dim_column or "NULL",
            "created_at" if "created_at" in columns else "NULL",
        ]
    )
    rows = conn.execute(f"SELECT {select} FROM memory_embeddings").fetchall()  # column names from pragma, not input
    known = {r[0] for r in conn.execute("SELECT id FROM memories")}
    conn.execute("ALTER TABLE memory_embeddings RENAME TO memory_embeddings_v1")
    conn.execute("DROP INDEX IF EXISTS idx_embeddings_model")
    for statement in create_v2_table:
        conn.execute(statement)
    now = now_iso()
    seen: set[tuple[str, str]] = set()
    good: list[tuple[str, str, bytes, int, str]] = []
    for memory_id, raw, model_raw, dim_raw, created in rows:
        try:
            if not isinstance(memory_id, str) or not memory_id:
                raise EmbeddingProtocolError(BLOB_LENGTH_INVALID, "the row has no memory_id")
            if memory_id not in known:
                raise KeyError("no memory with this id (orphaned embedding)")
            model = _legacy_model(model_raw)
            vector = as_vector(_legacy_vector(raw), memory_id=memory_id, model=model)
            if dim_raw is not None and int(dim_raw) != vector.shape[0]:
                raise EmbeddingProtocolError(
                    DIMENSION_MISMATCH,
                    f"{vector.shape[0]} values but the row says {dim_raw} dimensions",
                    memory_id=memory_id,
                    model=model,
                )
            if (memory_id, model) in seen:
                raise KeyError(f"a second embedding for model {model!r}")
        except (EmbeddingProtocolError, KeyError, ValueError, TypeError) as exc:
            reason = exc.args[0] if isinstance(exc, KeyError) else str(exc)
            log.warning("mirror migration: skipped the embedding of memory %r: %s", memory_id, reason)
            report.skipped.append(SkippedRow(memory_id if isinstance(memory_id, str) else None, reason))
            continue
        seen.add((memory_id, model))
        good.append((memory_id, model, encode_embedding(vector), int(vector.shape[0]), str(created or now)))
    conn.executemany(
        "INSERT INTO memory_embeddings (memory_id, model, embedding, dimensions, created_at) VALUES (?, ?, ?, ?, ?)",
        good,
    )
    conn.execute("DROP TABLE memory_embeddings_v1")
    write_version(conn)
    report.migrated = len(good)
    log.log(
        logging.WARNING if report.skipped else logging.INFO,
        "embedding protocol v%s -> v%s: %d embedding rows migrated, %d skipped%s",
        report.from_version or 1,
        report.to_version,
        report.migrated,
        len(report.skipped),
        "".join(f"\n  skipped {s.memory_id!r}: {s.reason}" for s in report.skipped[:20]),
    )
    return report


# ---- coverage ----------------------------------------------------------------------------------
@dataclass
class Coverage:
    model: str
    memories: int
    with_vectors: int

    @property
    def ratio(self) -> float:
        return self.with_vectors / self.memories if self.memories else 1.0

    @property
    def sufficient(self) -> bool:
        """At least half the memories have a vector of the model (the protocol's threshold)."""
        return self.ratio >= 0.5

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ratio": self.ratio, "sufficient": self.sufficient}


@dataclass
class BackfillReport:
    """What a backfill embedded, and the coverage it left."""

    embedded: int
    coverage: Coverage

    def to_dict(self) -> dict[str, object]:
        return {"embedded": self.embedded, "coverage": self.coverage.to_dict()}


def coverage(conn: sqlite3.Connection, model: str) -> Coverage:
    memories = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    with_vectors = conn.execute("SELECT COUNT(*) FROM memory_embeddings WHERE model = ?", (model,)).fetchone()[0]
    return Coverage(model, int(memories), int(with_vectors))
