"""What the mirror's modules share: the documents it hands out, the SQL that reads our rows, small helpers."""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from brain.features.mirror.integrity import corruption_named

_CHUNK = 500  # ids per IN (...) list


@dataclass
class MirrorDocument:
    """One mirrored document. Unpacks as ``id, text, metadata, embedding``.

    ``metadata`` is our metadata, rebuilt from the row's JSON (for a foreign row, derived from engram's
    columns, see :mod:`brain.features.mirror.mapping`); ``embedding`` is the configured model's vector or None;
    ``foreign`` marks rows engram wrote itself; ``vector_problem`` says why a stored vector that could
    not be read was left out (only when the reader asked to skip such vectors).
    """

    id: str
    text: str
    metadata: dict[str, object]
    embedding: np.ndarray | None = field(default=None, repr=False)
    foreign: bool = False
    vector_problem: str | None = None

    def __iter__(self) -> Iterator[object]:
        return iter((self.id, self.text, self.metadata, self.embedding))


@dataclass
class KeywordHit:
    """A full-text match. ``bm25`` is its BM25 relevance from SQLite FTS5 (higher is better): it depends
    on the query and on the whole file, so it ranks the hits of one query and is no cosine similarity."""

    id: str
    text: str
    metadata: dict[str, object]
    bm25: float

    @property
    def score(self) -> float:
        return self.bm25

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "text": self.text, "metadata": self.metadata, "bm25": self.bm25}


@dataclass
class RecallMatrix:
    """The configured model's unit vectors with what recall filters on, for one state of the file."""

    generation: int
    data_version: int
    changes: str
    ids: list[str]
    matrix: np.ndarray  # (n, d) float32, rows L2-normalised
    type_codes: np.ndarray
    type_names: dict[str, int]
    scope_codes: np.ndarray
    scope_names: dict[str, int]

    def mask(self, types: Iterable[str] | None, scopes: Iterable[str] | None) -> np.ndarray | None:
        mask = None
        for codes, names, wanted in (
            (self.type_codes, self.type_names, types),
            (self.scope_codes, self.scope_names, scopes),
        ):
            if wanted is None:
                continue
            chosen = [names[w] for w in as_list(wanted) if w in names]
            part = np.isin(codes, np.asarray(chosen, dtype=codes.dtype))
            mask = part if mask is None else mask & part
        return mask


class MirrorParts:
    """What the mirror's parts (writes, reads, recall, erase) use of one another and of the connection;
    :class:`~brain.features.mirror.store.EngramMirror`, assembled from them, provides all of it."""

    if TYPE_CHECKING:
        model: str
        path: Path
        batch_size: int
        _conn: sqlite3.Connection
        _lock: threading.RLock
        _generation: int
        _cache: RecallMatrix | None

        def transaction(self) -> AbstractContextManager[MirrorParts]: ...
        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
        def _check_open(self) -> None: ...
        def _undo(self, *statements: str) -> None: ...
        def _document(self, row: tuple[object, ...], *, skip_bad_vector: bool = False) -> MirrorDocument: ...


_Part = TypeVar("_Part", bound=MirrorParts)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def named_corruption(method: Callable[Concatenate[_Part, _P], _R]) -> Callable[Concatenate[_Part, _P], _R]:
    """SQLite's corruption errors inside ``method`` become :class:`MirrorCorrupt` naming the file."""

    @functools.wraps(method)
    def wrapper(self: _Part, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with corruption_named(self.path):
            return method(self, *args, **kwargs)

    return wrapper


def as_list(values: Iterable[str] | str) -> list[str]:
    return [values] if isinstance(values, str) else list(values)


def chunks(seq: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(seq), size):
        yield seq[start : start + size]


def marks(n: int) -> str:
    return ",".join("?" * n)


# our rows carry {"brain": {"type": ...}} in metadata; anything else (or malformed JSON) is engram's own
IS_OURS = "(json_valid(m.metadata) AND coalesce(json_type(m.metadata, '$.brain.type') = 'text', 0))"
BRAIN_FIELD = "(CASE WHEN json_valid(m.metadata) THEN json_extract(m.metadata, '$.brain.{}') END)"
ROW_COLUMNS = "m.id, m.content, m.metadata, m.memory_type, m.created_at, m.importance, m.namespace"
SELECT_ROWS = f"SELECT m.rowid, {ROW_COLUMNS} FROM memories m"
# The stored vector, its SQLite storage class and its dimensions. Only a BLOB is fetched as such: a TEXT
# value (``x'..' || ...`` makes one) that is not UTF-8 cannot be fetched at all, and would stop every
# reader at that row; the storage class lets the reader report it as a bad vector instead.
VECTOR_COLUMNS = "CASE WHEN typeof(e.embedding) = 'blob' THEN e.embedding END, typeof(e.embedding), e.dimensions"
SELECT_DOCS = (
    f"SELECT m.rowid, {ROW_COLUMNS}, {VECTOR_COLUMNS} FROM memories m "
    "LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND e.model = ?"
)
SELECT_MATRIX = (
    f"SELECT e.memory_id, {VECTOR_COLUMNS}, {BRAIN_FIELD.format('type')}, m.namespace, "
    f"{BRAIN_FIELD.format('scope')} "
    "FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id WHERE e.model = ? ORDER BY m.rowid"
)
# An update touches only the columns derived from our document, and only when one of them changed:
# engram's own columns (strengths, pinned, consolidation, contradictions) are left alone, and an
# unchanged document costs no FTS work.
UPSERT_MEMORY = """
INSERT INTO memories (id, content, memory_type, layer, created_at, working_strength, core_strength, importance,
                      source, namespace, metadata)
VALUES (:id, :content, :memory_type, :layer, :created_at, 1.0, :core_strength, :importance, :source, :namespace,
        :metadata)
ON CONFLICT(id) DO UPDATE SET
    content = excluded.content, memory_type = excluded.memory_type, layer = excluded.layer,
    created_at = excluded.created_at, importance = excluded.importance, source = excluded.source,
    namespace = excluded.namespace, metadata = excluded.metadata
WHERE content IS NOT excluded.content OR memory_type IS NOT excluded.memory_type OR layer IS NOT excluded.layer
   OR created_at IS NOT excluded.created_at OR importance IS NOT excluded.importance
   OR source IS NOT excluded.source OR namespace IS NOT excluded.namespace OR metadata IS NOT excluded.metadata
"""
UPSERT_HASH = "INSERT OR REPLACE INTO brain_content_hashes (memory_id, hash) VALUES (?, ?)"
UPSERT_EMBEDDING = (
    "INSERT OR REPLACE INTO memory_embeddings (memory_id, model, embedding, dimensions, created_at) "
    "VALUES (?, ?, ?, ?, ?)"
)
