"""Older turns of a conversation that match the user's message, for the context's ``related`` section.

The ranking is :mod:`brain.rules.turn_search` (dense + BM25, speaker, session, neighbouring turns); this module
feeds it from the store and keeps each conversation's :class:`~brain.rules.turn_search.TurnIndex` in
process, rebuilt when the conversation's turns change, with each turn's vector fetched once and each
speaker's name embedded once (the index leaves the names out of its dense signal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brain.features.chat.prompt import ContextItem, explain
from brain.model.results import Document
from brain.model.vectors import unit_rows
from brain.providers.cache import LRUCache
from brain.rules.ranking import to_unit_length

if TYPE_CHECKING:
    from brain.rules.turn_search import TurnIndex
    from brain.store import Store

#: conversations whose turn search index is kept in process
TURN_INDEXES_CACHED = 256

#: speakers' names whose embedding is kept in process
NAME_VECTORS_CACHED = 4096

#: the related section is shown when the conversation's closest older turn reaches the embedder's calibrated
#: floor at this many standard deviations above unrelated pairs' mean similarity (MiniLM: 0.395). A long
#: conversation nearly always holds some turn faintly like any message, so a lower floor shows unrelated
#: turns. On the tuning LoCoMo conversations (conv-26, conv-30, conv-41), whole conversations, a question
#: asked of its own conversation finds its closest turn at 0.475 or more nine times in ten, one asked of
#: another conversation at 0.41 or less: 3 sd left 22% of the foreign questions' sections empty, 4 sd 69%,
#: 4.5 sd 87% (and 0.8% of the own ones), 5 sd 95% (3.1%).
RELATED_TURN_FLOOR_Z = 4.5
#: the lower floor when the message names one of the conversation's speakers (then it is about this
#: conversation's people): with it, 4.5 sd empties 0.3% of the own questions' sections on those conversations
RELATED_TURN_NAMED_FLOOR_Z = 3.0


class RelatedTurns:
    """Finds the older turns that best match a message. Thread-safe (a race builds an index twice)."""

    def __init__(self, store: Store, *, cached: int = TURN_INDEXES_CACHED):
        self.store = store
        # conversation -> (its turn ids, TurnIndex, turn vectors by id), least recently used first
        self._indexes: LRUCache[str, tuple[tuple[str, ...], TurnIndex, dict[str, Any]]] = LRUCache(cached)
        # (embedder name, speaker's name) -> the name embedded as a document
        self._names: LRUCache[tuple[str, str], Any] = LRUCache(NAME_VECTORS_CACHED)

    def name_vectors(self, names: Any) -> dict[str, Any]:
        """Each of ``names`` embedded by the store's embedder as a document (the turns are documents),
        each embedded once per process."""
        embedder = self.store.embedder
        wanted = list(dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()))
        found = {n: self._names.get((embedder.name, n)) for n in wanted}
        missing = [n for n, v in found.items() if v is None]
        if missing:
            for name, vector in zip(missing, embedder.embed_documents(missing)):
                self._names.put((embedder.name, name), vector)
                found[name] = vector
        return found

    def floor(self) -> float | None:
        """The similarity the closest turn must reach for the section to be shown (None: the reference
        ranking, no gate)."""
        retrieval = self.store.retrieval
        return retrieval.calibration().floor(RELATED_TURN_FLOOR_Z) if retrieval.gated else None

    def named_floor(self) -> float:
        """The floor instead of :meth:`floor` for a message naming one of the conversation's speakers."""
        return self.store.retrieval.calibration().floor(RELATED_TURN_NAMED_FLOOR_Z)

    def find(
        self,
        conversation_id: str,
        user_message: str,
        vector: Any,
        recent: set[str],
        k: int,
        entity: str | None = None,
        *,
        floor: float | None = None,
        relevance: dict[str, dict[str, Any]] | None = None,
    ) -> list[ContextItem]:
        """The ``k`` turns outside ``recent`` (ids of the recent window) that best match the message;
        with ``entity``, among the turns it may see.

        With a similarity ``floor`` (:meth:`floor`) the section is gated as a whole: it is empty unless
        the closest of those turns reaches the floor (or :meth:`named_floor`, when the message names one of
        the conversation's speakers). Each turn is not held to it: a chat turn's cosine
        to a question is low even when it answers it (on LoCoMo, dropping each top-10 turn below 0.35
        loses half of the evidence), while a conversation that has nothing on the message seldom has a
        turn close to it. ``relevance`` (a dict) receives what the gate did under the key ``"related"``."""
        turns = self.store.conversation_turns(conversation_id, entity=entity)
        if len(turns) <= len(recent):
            return []
        index = self.index(conversation_id, turns)
        hits = index.search(user_message, vector, min(len(turns), k + len(recent)))
        items = []
        for h in hits:
            if h.id in recent:
                continue
            scores = {
                "score": h.score,
                "similarity": h.similarity,
                "content_similarity": h.similarity if h.content_similarity is None else h.content_similarity,
                "bm25": h.bm25,
                "dense_part": h.dense_part,
                "lexical_part": h.lexical_part,
                "speaker_part": h.speaker_part,
                "session_part": h.session_part,
                "neighbour_part": h.neighbour_part,
                "time_part": h.time_part,
            }
            items.append(ContextItem(h.id, h.text, h.metadata, scores, why=explain("related", scores, floor)))
        items = items[:k]
        if floor is None or not items:
            return items
        older = [i for i, turn in enumerate(index.turns) if turn.id not in recent]
        best = float(index.similarities(unit_rows(vector))[older].max())
        if best < floor and index.named_speaker(user_message) is not None:
            floor = min(floor, self.named_floor())
        shown = items if best >= floor else []
        if relevance is not None:
            relevance["related"] = {
                "floor": floor,
                "best_similarity": best,
                "candidates": len(items),
                "below_floor": len(items) - len(shown),
                "shown": len(shown),
            }
        return shown

    def note_vectors(self, conversation_id: str, vectors: Mapping[str, object]) -> None:
        """The vectors of turns just written to ``conversation_id`` (as stored: unit length), for its next
        search; a conversation not searched yet reads them all when it first is."""
        cached = self._indexes.get(conversation_id)
        if cached is not None:
            unit = {doc_id: to_unit_length(vector)[0] for doc_id, vector in vectors.items()}
            self._indexes.put(conversation_id, (cached[0], cached[1], {**cached[2], **unit}))

    def refresh(self, conversation_id: str) -> None:
        """Rebuild the index of a conversation already searched, after an exchange was written to it: the
        work is done once the answer is out rather than when the next message waits for its context."""
        if self._indexes.get(conversation_id) is not None:
            self.index(conversation_id, self.store.conversation_turns(conversation_id))

    def index(self, conversation_id: str, turns: list[Document]) -> TurnIndex:
        """The conversation's search index over ``turns``, rebuilt when they changed."""
        from brain.rules.turn_search import TurnIndex  # on first use: keeps `import brain.features.chat` light

        key = tuple(t.id for t in turns)
        cached = self._indexes.get(conversation_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        vectors = cached[2] if cached is not None else {}
        missing = [t.id for t in turns if t.id not in vectors]
        if missing:
            # by id alone: the ids are turns already, and a type filter makes Chroma scan metadata
            vectors = {**vectors, **{d.id: d.embedding for d in self.store.get(missing, include_embeddings=True)}}
        with_vectors = [t for t in turns if t.id in vectors]
        names = self.name_vectors(t.metadata.get("speaker") for t in with_vectors)
        index = TurnIndex(
            [type(t)(id=t.id, text=t.text, metadata=t.metadata, embedding=vectors[t.id]) for t in with_vectors],
            name_vectors=names or None,
        )
        self._indexes.put(conversation_id, (key, index, {t.id: vectors[t.id] for t in with_vectors}))
        return index


__all__ = ["NAME_VECTORS_CACHED", "RELATED_TURN_FLOOR_Z", "TURN_INDEXES_CACHED", "RelatedTurns"]
