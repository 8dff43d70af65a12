"""Retrieval per document type: memories ranked by score from their in-process index; persona,
FAQ and summaries by similarity (in process when indexed, else Chroma's filtered query); turns and
summaries of one conversation in order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from brain.config import Settings
from brain.model.errors import ValidationError
from brain.model.results import Document, GatedHits, Hit, MemoryHit
from brain.model.schemas import (
    GLOBAL_SCOPE,
    DocType,
    check_k,
    check_last_used,
    entity_scope,
    from_chroma,
    parse_timestamp,
    valid_conversation_id,
    valid_name,
)
from brain.providers.embeddings import Embedder
from brain.rules.filters import to_chroma_where
from brain.rules.memories import search_scopes
from brain.rules.ranking import ScoreWeights
from brain.rules.relevance import (
    FIRST_PERSON_FLOOR_Z,
    FIRST_PERSON_STAND_OUT_Z,
    METADATA_KEY,
    Calibration,
    EmbedderTuning,
    calibrate,
    recorded,
    spread_scale,
    tuning_for,
)
from brain.store.chroma import ChromaAccess
from brain.store.indexes import HasState, InProcessState, memory_index
from brain.store.memory_query import MemoryQuery
from brain.store.plan import check_vector
from brain.store.reads import get_documents, type_value
from brain.text.keywords import in_first_person

if TYPE_CHECKING:
    from brain.store.pipeline import WritePipeline

# persona, faq and summaries rank by similarity alone
SIMILARITY_ONLY = ScoreWeights(similarity=1.0, importance=0.0, recency=0.0)

#: picks the version of a versioned type (the persona) readers see, from its documents' metadata
VersionRule = Callable[[Iterable[dict[str, object]]], "str | None"]


class Retrieval:
    """The store's read side over Chroma and the in-process state."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        dimension: int,
        chroma: ChromaAccess,
        state: InProcessState,
        persona_version: VersionRule | None = None,
    ):
        self.settings = settings
        self.embedder = embedder
        self.dimension = dimension
        self.chroma = chroma
        self.state = state
        # searches rank by the reference formula; the context by RAG_MEMORY_RANKING (context_weights),
        # whose relevance floor and margin wait for the embedder's calibration
        self.weights = ScoreWeights.reference(settings)
        self._context_weights: ScoreWeights | None = None
        self.persona_version = persona_version
        self._calibration: Calibration | None = None
        self._calibrating = threading.Lock()

    @property
    def gated(self) -> bool:
        """Whether the relevance ranking is on (``RAG_MEMORY_RANKING=relevance``)."""
        return self.settings.memory_ranking == "relevance"

    def calibration(self) -> Calibration:
        """The embedder's relevance calibration (:mod:`brain.rules.relevance`): the one the collection
        records for this embedder and data, else measured now and recorded."""
        with self._calibrating:
            if self._calibration is None:
                collection = self.chroma.collection
                metadata = dict(collection.metadata or {})
                across = self.tuning().across_floor_z is not None
                cal = recorded(metadata, self.embedder, across=across)
                if cal is None:
                    cal = calibrate(self.embedder, across=across)
                    collection.modify(metadata={**metadata, METADATA_KEY: cal.to_json()})
                self._calibration = cal
            return self._calibration

    def use_calibration(self, calibration: Calibration) -> None:
        """Rank with ``calibration`` (for embedders that cannot embed the calibration data, e.g. a
        benchmark's precomputed vectors, measured on their own unrelated pairs); recorded like a
        measured one."""
        with self._calibrating:
            metadata = dict(self.chroma.collection.metadata or {})
            self.chroma.collection.modify(metadata={**metadata, METADATA_KEY: calibration.to_json()})
            self._calibration = calibration
            self._context_weights = None

    def memory_weights(self, relevance: bool = True) -> ScoreWeights:
        """The score memories are ranked by: with ``relevance`` the context's (``RAG_MEMORY_RANKING``;
        under the relevance ranking with the calibrated floor, unless ``RAG_RELEVANCE_FLOOR`` is set, and
        margin), else the reference formula of the ``RAG_WEIGHT_*`` settings."""
        if not relevance or not self.gated:
            return self.weights
        if self._context_weights is None:
            s, cal, tuned = self.settings, self.calibration(), self.tuning()
            floor = cal.floor(tuned.floor_z) if s.relevance_floor is None else s.relevance_floor
            first_person = (
                (cal.floor(FIRST_PERSON_FLOOR_Z), cal.margin(FIRST_PERSON_STAND_OUT_Z), cal.mean)
                if s.relevance_first_person
                else None
            )
            self._context_weights = ScoreWeights.relevance(
                s,
                floor=floor,
                margin=cal.margin(tuned.margin),
                spread=spread_scale(cal),
                first_person=first_person,
                across_floor=None if tuned.across_floor_z is None else cal.across_floor(tuned.across_floor_z),
            )
        return self._context_weights

    def tuning(self) -> EmbedderTuning:
        """The gate's distances in standard deviations: the ``RAG_RELEVANCE_*_Z`` / ``RAG_RELEVANCE_MARGIN``
        settings where set, else the ones chosen for this embedder."""
        s, tuned = self.settings, tuning_for(self.embedder.name)
        return EmbedderTuning(
            floor_z=tuned.floor_z if s.relevance_floor_z is None else s.relevance_floor_z,
            similarity_floor_z=(
                tuned.similarity_floor_z if s.relevance_similarity_floor_z is None else s.relevance_similarity_floor_z
            ),
            margin=tuned.margin if s.relevance_margin is None else s.relevance_margin,
            across_floor_z=tuned.across_floor_z if s.relevance_across_floor_z is None else s.relevance_across_floor_z,
        )

    def similarity_floor(self) -> float | None:
        """The lowest similarity a FAQ entry or summary is shown at (None: the reference ranking, no floor)."""
        if not self.gated:
            return None
        return self.calibration().floor(self.tuning().similarity_floor_z)

    def memories(
        self,
        query: str | None,
        k: int | None,
        entity: str | None,
        *,
        tags: Sequence[str] | None,
        min_importance: int | None,
        all_scopes: bool,
        now: datetime | float | None,
        query_vector: np.ndarray | None,
        relevance: bool = False,
        topic_texts: Sequence[str] = (),
        as_of: datetime | str | float | None = None,
    ) -> GatedHits[MemoryHit]:
        k = self.settings.memory_top_k if k is None else check_k(k)
        at = None if as_of is None else _epoch(as_of, "as_of")
        if at is not None and now is None:
            now = at  # recency as it was then
        scopes = search_scopes(entity, all_scopes=all_scopes)
        if tags is not None and (isinstance(tags, str) or not all(isinstance(t, str) for t in tags)):
            raise ValidationError(f"tags must be a list of strings, got {tags!r}")
        text = query if isinstance(query, str) and query.strip() else None  # what the lexical part matches
        # a message in the first person, asked for an entity, speaks of that entity
        about = entity_scope(entity) if relevance and entity and text and in_first_person(text) else None
        return self._ranked(
            self.query_vector(query, query_vector),
            k,
            self.memory_weights(relevance),
            _epoch(now),
            scopes,
            tags,
            min_importance,
            query_text=text,
            topic_texts=topic_texts,
            at=at,
            about=about,
        )

    def core_memories(
        self,
        entity: str,
        k: int,
        min_importance: int,
        query: str | None,
        query_vector: np.ndarray | None,
        now: datetime | float | None = None,
    ) -> GatedHits[MemoryHit]:
        """The facts about ``entity`` always shown: its own active memories (not global ones, not another
        entity's) of at least ``min_importance``, by :meth:`ScoreWeights.core`."""
        return self._ranked(
            self.query_vector(query, query_vector),
            k,
            ScoreWeights.core(self.settings),
            _epoch(now),
            frozenset({entity_scope(entity)}),
            None,
            min_importance,
        )

    def _ranked(
        self,
        vector: np.ndarray,
        k: int,
        weights: ScoreWeights,
        now: float,
        scopes: Any,
        tags: Any,
        min_importance: int | None,
        **options: Any,
    ) -> GatedHits[MemoryHit]:
        """The memory index's exact top ``k`` under ``weights``, each hit's metadata as stored."""
        index = self.state.index_for(DocType.MEMORY.value)
        assert index is not None  # settings guarantee memory is indexed
        hits = index.search(MemoryQuery(vector, k, weights, now, scopes, tags, min_importance, **options))
        for hit in hits:
            hit.metadata = from_chroma(hit.metadata)
        return hits

    def search(
        self,
        query: str | None,
        k: int,
        doc_type: str | DocType | None,
        where: Mapping[str, object] | None,
        query_vector: np.ndarray | None,
        scopes: Collection[str] | None = None,
    ) -> list[Hit]:
        """Plain similarity search over any documents (Chroma's vector index, filtered); with
        ``scopes``, documents of those scopes only."""
        k = check_k(k)
        vector = self.query_vector(query, query_vector)
        scope = None if scopes is None else sorted(scopes)
        got = self.chroma.collection.query(
            query_embeddings=[vector],
            n_results=k,
            where=to_chroma_where(where, type=type_value(doc_type), scope=scope),
            include=["documents", "metadatas", "distances"],
        )
        return [
            Hit(id=i, text=d or "", metadata=from_chroma(m), similarity=1.0 - float(dist))
            for i, d, m, dist in zip(got["ids"][0], got["documents"][0], got["metadatas"][0], got["distances"][0])
        ]

    def query_vector(self, query: str | None, query_vector: np.ndarray | None) -> np.ndarray:
        """``query_vector`` checked, or ``query`` embedded."""
        if query_vector is None:
            if not isinstance(query, str) or not query.strip():
                raise ValidationError("query must be a non-empty string")
            return self.embedder.embed_query(query)
        vec, problem = check_vector(query_vector, self.dimension)
        if problem or vec is None:
            raise ValidationError(f"query_vector: {problem}")
        return vec

    def similar(
        self,
        query: str | None,
        k: int,
        doc_type: DocType,
        equals: Mapping[str, object],
        query_vector: np.ndarray | None = None,
        scopes: Collection[str] | None = None,
    ) -> list[Hit]:
        """Exact similarity search of one type: in process when indexed, else Chroma's filtered query;
        with ``scopes``, documents of those scopes only (None: every scope)."""
        k = check_k(k)
        equals = {key: value for key, value in equals.items() if value is not None}
        vector = self.query_vector(query, query_vector)
        index = self.state.index_for(doc_type.value)
        if index is None:
            return self.search(None, k, doc_type, equals or None, vector, scopes)
        rows = index.search(
            MemoryQuery(vector, k, SIMILARITY_ONLY, 0.0, scopes=scopes, equals=equals or None, rows="all")
        )
        return [Hit(id=r.id, text=r.text, metadata=from_chroma(r.metadata), similarity=r.similarity) for r in rows]

    def persona(
        self, query: str | None, k: int, query_vector: np.ndarray | None, scopes: Collection[str] | None = None
    ) -> list[Hit]:
        """Sections of the persona version ``persona_version`` picks among the sections of ``scopes``
        (every section without a rule)."""
        equals: dict[str, object] = {}
        if self.persona_version is not None:
            index = self.state.index_for(DocType.PERSONA.value)
            metas = (
                index.metadatas(scopes)
                if index is not None
                else [
                    d.metadata
                    for d in get_documents(
                        self.chroma,
                        None,
                        where=None,
                        doc_type=DocType.PERSONA.value,
                        limit=None,
                        offset=None,
                        include_embeddings=False,
                        scopes=None,
                    )
                ]
            )
            if scopes is not None:  # another scope's sections never decide which version this reader sees
                metas = [m for m in metas if m.get("scope", GLOBAL_SCOPE) in scopes]
            version = self.persona_version(metas)
            if version is None:
                return []
            equals["version"] = version
        return self.similar(query, k, DocType.PERSONA, equals, query_vector, scopes)

    def resident(self, ids: Sequence[str], scopes: Collection[str] | None = None) -> tuple[list[Document], list[str]]:
        """The documents of ``ids`` the in-process indexes hold, in ``scopes`` (None: every scope), read without
        Chroma; and the ids they do not hold (their part not resident, or a type searched through Chroma)."""
        found, missing = [], []
        indexes = [index for t in self.settings.indexed_types if (index := self.state.index_for(t)) is not None]
        for doc_id in dict.fromkeys(ids):
            row = next((r for index in indexes if (r := index.document(doc_id)) is not None), None)
            if row is None:
                missing.append(doc_id)
                continue
            metadata = from_chroma(row[1])
            if scopes is None or metadata.get("scope", GLOBAL_SCOPE) in scopes:
                found.append(Document(id=doc_id, text=row[0], metadata=metadata))
        return found, missing

    def conversation_turns(self, conversation_id: str, scopes: Collection[str] | None = None) -> list[Document]:
        turns = self.state.turns(valid_conversation_id(conversation_id))
        return turns if scopes is None else [d for d in turns if d.metadata.get("scope", GLOBAL_SCOPE) in scopes]

    def conversation_summaries(self, conversation_id: str, scopes: Collection[str] | None = None) -> list[Document]:
        docs = get_documents(
            self.chroma,
            None,
            where={"conversation_id": valid_conversation_id(conversation_id)},
            doc_type=DocType.SUMMARY.value,
            limit=None,
            offset=None,
            include_embeddings=False,
            scopes=None if scopes is None else sorted(scopes),
        )
        return sorted(docs, key=lambda d: d.metadata.get("summary_index") or 0)


def _epoch(now: datetime | str | float | None, field: str = "now") -> float:
    if now is None:
        return time.time()
    if isinstance(now, (datetime, str)) or isinstance(now, bool):
        try:
            return parse_timestamp(now, field).timestamp()
        except ValueError as exc:
            raise ValidationError.of(field, str(exc)) from None
    return float(now)


class RetrievalOwner(HasState, Protocol):
    """A store, as far as the functions over its retrieval go."""

    settings: Settings
    lock: threading.RLock
    retrieval: Retrieval
    writes: WritePipeline


def core_memories(
    store: RetrievalOwner,
    entity: str,
    k: int | None = None,
    *,
    query: str | None = None,
    query_vector: np.ndarray | None = None,
    min_importance: int | None = None,
    now: datetime | float | None = None,
) -> list[MemoryHit]:
    """The facts about ``entity`` a context always shows, whatever the message: its own current memories
    in ``store`` (never global ones or another entity's) of at least ``min_importance`` (default
    ``RAG_CORE_MIN_IMPORTANCE``), most important first, then the closest to ``query`` (or
    ``query_vector``), then the newest; ``k`` defaults to ``RAG_CORE_TOP_K``."""
    s = store.settings
    k = s.core_top_k if k is None else check_k(k)
    floor = s.core_min_importance if min_importance is None else min_importance
    return store.retrieval.core_memories(valid_name(entity), k, floor, query, query_vector, now)


def record_memory_use(store: RetrievalOwner, used: Mapping[str, float]) -> int:
    """Persist when memories of ``store`` were last retrieved: ``{memory id: epoch}`` -> ``last_used`` in
    their metadata (never moved back in time), as a ``metadata`` write: intent-logged and announced to the
    subscribers like any write (the mirror keeps content, not access times, so it skips it). Only
    ``last_used`` is sent, so values another process changed meanwhile are kept. Memories deleted
    meanwhile are skipped. Returns how many were written."""
    times, bad = {}, []
    for key, value in used.items():
        try:
            times[key] = check_last_used(value)
        except ValueError:
            bad.append(key)
    if bad:
        raise ValidationError.of(
            "used", f"last-use times must be epoch seconds (finite, >= 0); bad entries for {bad[:5]}"
        )
    with store.lock:
        metas = memory_index(store).set_last_used(times)
        if metas:
            store.writes.update_metadata({i: {"last_used": m["last_used"]} for i, m in metas.items()})
    return len(metas)


__all__ = ["SIMILARITY_ONLY", "Retrieval", "RetrievalOwner", "VersionRule", "core_memories", "record_memory_use"]
