"""Hybrid retrieval over the turns of one conversation: pure ranking, no store access.

The caller hands in the turns (``Document`` objects with ``embedding`` set, e.g. from
``store.get(where={"conversation_id": cid}, type="turn", include_embeddings=True)``) and a query
(its text and its embedding). Every turn is scored; the top ``k`` come back with their parts::

    own(t)    = dense * z(cosine(P q, P t)) + lexical * z(bm25(q, t))
    fused(t)  = own(t) + session * z(max own(u) over the turns u of t's session)
    score(t)  = fused(t) + neighbour * max(fused(previous turn), fused(next turn))
                + speaker * [t's speaker is named in q] + time * [q asks when, and t speaks of a time]

- ``z`` standardises a signal over the conversation's turns (mean 0, standard deviation 1), so the
  two signals add in the same unit whatever their raw scales; a signal that does not vary (no
  query word occurs anywhere) contributes nothing.
- ``P`` takes the speakers' names out of the vectors: with ``name_vectors`` (each speaker's name embedded
  by the same embedder), the dense signal compares what is left of the query and of each turn once the
  names' directions are removed (projection onto the complement of their span). A question names
  people ("What kind of art does Caroline make?"), and so do the other speaker's replies ("Wow,
  Caroline, that painting is awesome!"): on the raw vectors those replies come close to the question
  by the name alone, ahead of the turn that answers it. Who is asked about is the speaker bonus's and
  BM25's business; the dense signal is left the meaning. Without ``name_vectors``, ``P`` is the identity.
- The lexical signal is Okapi BM25 (:mod:`brain.text.bm25`) over the keyword tokens of
  :mod:`brain.text.keywords` (stemmed words without stop words). A turn's lexical document is its
  text plus its speaker's name and the words of its date ("8 May 2023"), so "what did Caroline say
  in May 2023" matches on who and when as well as on what; and, with ``previous_words``, the words
  of the turn before it in the same session. An answer rarely repeats its question ("What did you
  paint?" / "A sunrise over the lake."), and a question about it uses the words of both.
- Questions name people. When the query names exactly one of the conversation's speakers (the
  ``speaker`` metadata), that speaker's turns get a bonus of ``speaker`` standard deviations: a
  question about what someone did or said is answered by their own words (on the LoCoMo
  conversations the method was chosen on, 97% of the evidence turns of such questions). The bonus
  says who spoke the turn, not what it is about, so it is not shared with the turn's session or
  neighbours (shared, it would go to the other speaker's every reply and cancel itself). A name used
  to address someone ("Melanie, what did I paint?", "what did I paint, Melanie?") does not name the
  one asked about.
- A question that asks when ("When did ...", "what year ...", "how long ago ...") is answered by a turn
  that says when: "yesterday", "last week", "two years ago", a weekday, a month, a year. Those turns
  get a bonus of ``time`` standard deviations for such a question (on the LoCoMo conversations the
  method was chosen on, 78% of the evidence turns of temporal questions have such a word, and 11% of
  all turns). English words, as the lexical signal's stemmer is English.
- A session is a stretch of the conversation without a pause longer than :data:`SESSION_GAP_SECONDS`
  (by the turns' timestamps). Where the question's best match lies, the rest of that talk is more
  likely to answer it too: each turn gets a share of its session's best own score (standardised
  over the turns; a conversation of one session gets nothing from it).
- A turn is often only understood with its neighbour ("What did you paint?" / "A sunrise."): each
  turn also gets a share of the better of its two neighbours' scores.

One conversation at a time: a few thousand turns score in milliseconds, so there is no candidate
pre-selection and the ranking is exact. The BM25 index is the costly part; build a
:class:`TurnIndex` once and search it many times when the turns do not change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

import numpy as np

from brain.model.errors import Problem, ValidationError
from brain.model.results import Document
from brain.model.schemas import check_k, parse_timestamp
from brain.model.vectors import unit_rows
from brain.text import BM25Index, tokenize

__all__ = [
    "SESSION_GAP_SECONDS",
    "TurnHit",
    "TurnIndex",
    "TurnSearchWeights",
    "asks_when",
    "search_turns",
    "speaks_of_time",
]


#: a pause longer than this between two turns starts a new session (the usual inactivity timeout of
#: a visit in web analytics; a chat resumed after it is another sitting)
SESSION_GAP_SECONDS = 30 * 60

_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)


@dataclass(frozen=True)
class TurnSearchWeights:
    """The few parameters of the ranking. The defaults are round values; ``session`` was chosen among
    0.15, 0.3, 0.5 and 0.75, and ``neighbour`` among 0, 0.25 and 0.5 once the previous turn's words
    joined the lexical document, ``speaker`` among 1, 1.5, 2 and 3 once it stopped being shared
    with neighbours (1.5 to 3 measure alike), and ``time`` among 0.25, 0.5 and 1, on three LoCoMo
    conversations, with two others kept out of the choice (bench/LOCOMO_RESULTS.md says which, and
    how each part does)."""

    dense: float = 0.5
    lexical: float = 0.5
    speaker: float = 2.0
    time: float = 0.5
    neighbour: float = 0.25
    session: float = 0.3
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    previous_words: bool = True

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        if not isinstance(self.previous_words, bool):
            problems.append(
                Problem("previous_words", f"previous_words must be True or False, got {self.previous_words!r}")
            )
        for name in ("dense", "lexical", "speaker", "neighbour", "session", "time", "bm25_k1", "bm25_b"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                problems.append(Problem(name, f"{name} must be a finite number >= 0, got {value!r}"))
        if not problems:
            if self.bm25_k1 <= 0:
                problems.append(Problem("bm25_k1", f"bm25_k1 must be > 0, got {self.bm25_k1!r}"))
            if self.bm25_b > 1:
                problems.append(Problem("bm25_b", f"bm25_b must be between 0 and 1, got {self.bm25_b!r}"))
            if self.dense == 0 and self.lexical == 0:
                problems.append(Problem("dense", "dense and lexical cannot both be 0: nothing would rank by the query"))
        if problems:
            raise ValidationError("; ".join(p.message for p in problems), problems)


@dataclass
class TurnHit:
    """A ranked turn: ``score = dense_part + lexical_part + speaker_part + session_part + neighbour_part
    + time_part``.

    ``similarity`` is the raw cosine similarity and ``bm25`` the raw BM25 score, for display;
    ``content_similarity`` the cosine the dense part standardises (the names taken out; equal to
    ``similarity`` when the index has no name vectors); the parts are in standard deviations over the
    conversation's turns.
    """

    id: str
    text: str
    metadata: dict[str, object]
    score: float
    similarity: float
    bm25: float
    dense_part: float
    lexical_part: float
    speaker_part: float
    neighbour_part: float
    session_part: float = 0.0
    time_part: float = 0.0
    content_similarity: float | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _standardised(values: np.ndarray) -> np.ndarray:
    spread = float(values.std()) if values.size else 0.0
    if spread <= 1e-12:
        return np.zeros_like(values)
    standard: np.ndarray = (values - values.mean()) / spread
    return standard


def _plain_words(text: str) -> list[str]:
    """Lower-case words, unstemmed and with stop words kept: names are compared as written."""
    return tokenize(text, stem=False, stop_words=False)


_TIME_UNITS = (
    r"(?:day|week|weekend|month|year|night|morning|afternoon|evening|summer|winter|spring|fall|autumn"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
)
#: words that say when: relative times, weekdays, months ("may" and "march" only next to a number: they
#: are verbs too), years
_TIME_WORDS = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|recently|(?:last|next|this|past) " + _TIME_UNITS + r"s?"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|january|february|april|june|july|august|september"
    r"|october|november|december|(?:may|march)\s+\d|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:may|march)\b"
    r"|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_ASKS_WHEN = re.compile(r"^\W*when\b|\b(?:what|which) (?:year|month|day|date|week)\b|\bhow long ago\b", re.IGNORECASE)


def asks_when(text: str) -> bool:
    """Whether a question asks when something happened ("When did ...", "In what year ...")."""
    return bool(_ASKS_WHEN.search(text))


def speaks_of_time(text: str) -> bool:
    """Whether a turn says when something happened ("yesterday", "last week", "in June", "2022")."""
    return bool(_TIME_WORDS.search(text))


def _without_address(text: str, name: str) -> str:
    """``text`` without ``name`` where it addresses someone: opening the text before a comma, colon or
    exclamation mark (after a greeting, if any), or closing it after a comma."""
    name = re.escape(name.strip())
    text = re.sub(rf"^\s*(?:(?:hey|hi|hello|ok|okay|so|and)\W+)?{name}\s*[,:!]", " ", text, flags=re.IGNORECASE)
    return re.sub(rf",\s*{name}\s*[?!.]*\s*$", " ", text, flags=re.IGNORECASE)


def _date_words(metadata: Mapping[str, object]) -> str:
    """'8 May 2023' for a turn stored at 2023-05-08T13:56:00+00:00; '' without a usable timestamp."""
    value = metadata.get("timestamp")
    if value is None:
        return ""
    try:
        when: datetime = parse_timestamp(value)
    except ValueError:
        return ""
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year}"


def _sessions(metadatas: Sequence[dict[str, object]]) -> np.ndarray:
    """Each turn's session number (turns in conversation order): a new session after a pause longer
    than :data:`SESSION_GAP_SECONDS`; a turn without a usable time stays in the session before it."""
    numbers = np.zeros(len(metadatas), dtype=np.int64)
    session, last = 0, None
    for i, meta in enumerate(metadatas):
        epoch = meta.get("ts_epoch")
        if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) and math.isfinite(epoch):
            if last is not None and epoch - last > SESSION_GAP_SECONDS:
                session += 1
            last = float(epoch)
        numbers[i] = session
    return numbers


def _order_key(position: int, metadata: Mapping[str, object]) -> tuple[float, float, int]:
    index = metadata.get("turn_index")
    index = index if isinstance(index, int) and not isinstance(index, bool) else math.inf
    epoch = metadata.get("ts_epoch")
    epoch = float(epoch) if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) else math.inf
    return (index, epoch, position)


class TurnIndex:
    """The turns of one conversation, ready to be searched (vectors normalised, BM25 built).

    Turns are put in conversation order (``turn_index``, then time, then the order given), which
    defines each turn's neighbours. ``name_vectors`` maps names (the speakers') to their embeddings by
    the turns' embedder; their directions are left out of the dense signal (see the module docstring).
    """

    def __init__(
        self,
        turns: Sequence[Document],
        weights: TurnSearchWeights | None = None,
        *,
        name_vectors: Mapping[str, object] | None = None,
    ):
        self.weights = weights if weights is not None else TurnSearchWeights()
        if not isinstance(self.weights, TurnSearchWeights):
            raise ValidationError.of(
                "weights", f"weights must be a TurnSearchWeights, got {type(self.weights).__name__}"
            )
        turns = self._checked_turns(turns)
        order = sorted(range(len(turns)), key=lambda i: _order_key(i, turns[i].metadata))
        self.turns: list[Document] = [turns[i] for i in order]
        self.dimension = int(np.asarray(turns[0].embedding).shape[0]) if turns else None
        if self.turns:
            vectors = np.stack([np.asarray(t.embedding, dtype=np.float32) for t in self.turns])
            self.vectors = unit_rows(vectors)
        else:
            self.vectors = np.zeros((0, 0), dtype=np.float32)
        self._names = self._name_basis(name_vectors)
        self.content_vectors = self.without_names(self.vectors)
        self.sessions = _sessions([t.metadata for t in self.turns])
        # sessions are runs of consecutive turns: where each starts, for a per-session maximum
        self._session_starts = (
            np.flatnonzero(np.r_[True, self.sessions[1:] != self.sessions[:-1]])
            if self.turns
            else np.zeros(0, dtype=np.int64)
        )
        speakers = [t.metadata.get("speaker") for t in self.turns]
        self.speakers = [s if isinstance(s, str) and s.strip() else None for s in speakers]
        # a speaker is "named" in a query when every word of the name is there
        self._speaker_words = {s: set(_plain_words(s)) for s in dict.fromkeys(self.speakers) if s and _plain_words(s)}
        self.lexical = BM25Index(self._lexical_documents(), k1=self.weights.bm25_k1, b=self.weights.bm25_b)
        self.speaks_of_time = np.array([speaks_of_time(t.text) for t in self.turns], dtype=bool)

    def __len__(self) -> int:
        return len(self.turns)

    def _lexical_documents(self) -> list[list[str]]:
        """Each turn's BM25 tokens: its text, speaker and date, then the previous turn's text when that
        turn is in the same session (and ``previous_words`` is on)."""
        texts = [tokenize(t.text) for t in self.turns]  # words are cut one by one: token lists concatenate
        own = [
            words + tokenize(" ".join(filter(None, (s, _date_words(t.metadata)))))
            for words, t, s in zip(texts, self.turns, self.speakers)
        ]
        if not self.weights.previous_words:
            return own
        return [
            own[i] + texts[i - 1] if i and self.sessions[i] == self.sessions[i - 1] else own[i] for i in range(len(own))
        ]

    def _name_basis(self, name_vectors: object) -> np.ndarray | None:
        """An orthonormal basis (columns) of the span of the name vectors; None without any."""
        if name_vectors is None:
            return None
        if not isinstance(name_vectors, Mapping):
            raise ValidationError.of(
                "name_vectors", f"name_vectors must map each name to its embedding, got {type(name_vectors).__name__}"
            )
        rows = []
        for name, vector in name_vectors.items():
            try:
                row = np.asarray(vector, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValidationError.of("name_vectors", f"the vector of {name!r} must be a list of numbers") from None
            if row.ndim != 1 or not np.isfinite(row).all() or not np.any(row):
                raise ValidationError.of(
                    "name_vectors", f"the vector of {name!r} must be a non-zero, finite 1-d vector"
                )
            if self.dimension is not None and row.shape[0] != self.dimension:
                raise ValidationError.of(
                    "name_vectors",
                    f"the vector of {name!r} has {row.shape[0]} dimensions but "
                    f"the turns are {self.dimension}-d; embed the names with the turns' embedder",
                )
            rows.append(row)
        if not rows or self.dimension is None:
            return None
        # names embedded alike ("Jon", "Jo") span fewer directions than there are names: keep the real ones
        basis, spread, _ = np.linalg.svd(unit_rows(np.stack(rows), dtype=np.float64).T, full_matrices=False)
        return basis[:, spread > 1e-6 * spread[0]]

    def without_names(self, vectors: np.ndarray) -> np.ndarray:
        """``vectors`` (unit rows, or one unit vector) with the names' directions removed, at unit length
        again; a vector that was nothing but a name keeps its own direction."""
        if self._names is None or vectors.size == 0:
            return vectors
        x = np.asarray(vectors, dtype=np.float64)
        rest = x - (x @ self._names) @ self._names.T
        # a vector that was (almost) only a name has no content left to compare: it keeps its own direction
        empty = np.linalg.norm(rest, axis=-1) < 1e-3
        rest = np.where(np.expand_dims(empty, -1), x, rest)
        return unit_rows(rest)

    @staticmethod
    def _checked_turns(turns: object) -> list[Document]:
        if isinstance(turns, (str, bytes, dict)) or not isinstance(turns, Sequence):
            raise ValidationError.of("turns", f"turns must be a list of Document objects, got {type(turns).__name__}")
        problems: list[Problem] = []
        checked: list[Document] = []
        dimension = None
        conversations: set[str] = set()
        seen: set[str] = set()
        for i, turn in enumerate(turns):
            if not isinstance(turn, Document):
                problems.append(Problem("turn", f"turn {i} must be a Document, got {type(turn).__name__}", i))
                continue
            if not isinstance(turn.text, str):
                problems.append(Problem("text", f"turn {i} ({turn.id!r}): text must be a string", i))
            if turn.id in seen:
                problems.append(Problem("id", f"turn {i}: id {turn.id!r} appears twice", i))
            seen.add(turn.id)
            if not isinstance(turn.metadata, dict):
                problems.append(Problem("metadata", f"turn {i} ({turn.id!r}): metadata must be a dict", i))
                continue
            if turn.metadata.get("conversation_id") is not None:
                conversations.add(turn.metadata["conversation_id"])
            if turn.embedding is None:
                problems.append(
                    Problem(
                        "embedding",
                        f"turn {i} ({turn.id!r}) has no embedding; fetch turns with include_embeddings=True",
                        i,
                    )
                )
                continue
            vector = np.asarray(turn.embedding, dtype=np.float32)
            if vector.ndim != 1 or vector.size == 0:
                problems.append(Problem("embedding", f"turn {i} ({turn.id!r}): embedding must be a 1-d vector", i))
                continue
            if dimension is None:
                dimension = vector.shape[0]
            if vector.shape[0] != dimension:
                problems.append(
                    Problem(
                        "embedding",
                        f"turn {i} ({turn.id!r}): embedding has {vector.shape[0]} "
                        f"dimensions, the first turn has {dimension}",
                        i,
                    )
                )
            elif not np.isfinite(vector).all() or not np.any(vector):
                problems.append(
                    Problem("embedding", f"turn {i} ({turn.id!r}): embedding is all zeros or not finite", i)
                )
            checked.append(Document(id=turn.id, text=turn.text, metadata=turn.metadata, embedding=vector))
        if len(conversations) > 1:
            names = ", ".join(sorted(map(str, conversations)))
            problems.append(
                Problem(
                    "conversation_id",
                    f"turns come from several conversations ({names}); search one conversation at a time",
                )
            )
        if problems:
            message = "; ".join(p.message for p in problems[:5])
            if len(problems) > 5:
                message += f"; and {len(problems) - 5} more"
            raise ValidationError(message, problems)
        return checked

    def _query(self, query_text: object, query_vector: object) -> tuple[list[str], np.ndarray]:
        if not isinstance(query_text, str) or not query_text.strip():
            raise ValidationError.of("query_text", f"query_text must be a non-empty string, got {query_text!r}")
        try:
            vector = np.asarray(query_vector, dtype=np.float32)
        except (TypeError, ValueError):
            raise ValidationError.of("query_vector", "query_vector must be a list of numbers") from None
        if vector.ndim != 1 or vector.size == 0:
            raise ValidationError.of("query_vector", f"query_vector must be a 1-d vector, got shape {vector.shape}")
        if not np.isfinite(vector).all() or not np.any(vector):
            raise ValidationError.of("query_vector", "query_vector is all zeros or contains NaN/Inf")
        if self.dimension is not None and vector.shape[0] != self.dimension:
            raise ValidationError.of(
                "query_vector",
                f"query_vector has {vector.shape[0]} dimensions but the turns are "
                f"{self.dimension}-d; embed the query with the store's embedder",
            )
        return tokenize(query_text), unit_rows(vector)

    def named_speaker(self, query_text: str) -> str | None:
        """The one speaker of this conversation the query names, or None (none or several named). A name
        that only addresses someone, first or last and set off by a comma, does not count."""
        named = [
            s
            for s, name_words in self._speaker_words.items()
            if name_words <= set(_plain_words(_without_address(query_text, s)))
        ]
        return named[0] if len(named) == 1 else None

    def similarities(self, query_vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of every turn (conversation order) to a unit query vector."""
        sims: np.ndarray = self.vectors @ query_vector
        return sims

    def search(self, query_text: str, query_vector: object, k: int) -> list[TurnHit]:
        """The ``k`` best turns for the query, best first (ties: earlier turn first)."""
        k = check_k(k)
        tokens, vector = self._query(query_text, query_vector)
        if not self.turns:
            return []
        w = self.weights
        similarity = self.similarities(vector)
        content = similarity if self._names is None else self.content_vectors @ self.without_names(vector)
        bm25 = self.lexical.scores(tokens)
        dense_part = w.dense * _standardised(content)
        lexical_part = w.lexical * _standardised(bm25)
        own = dense_part + lexical_part
        session_part = np.zeros(len(self.turns))
        if w.session and len(self._session_starts) > 1:
            best = np.maximum.reduceat(own, self._session_starts)
            session_part = w.session * _standardised(best)[self.sessions]
        fused = own + session_part
        neighbour_part = np.zeros(len(self.turns))
        if w.neighbour and len(self.turns) > 1:
            best = np.full(len(self.turns), -np.inf)
            best[1:] = fused[:-1]
            best[:-1] = np.maximum(best[:-1], fused[1:])
            neighbour_part = w.neighbour * best
        speaker = self.named_speaker(query_text)
        speaker_part = np.zeros(len(self.turns))
        if speaker is not None and w.speaker:
            speaker_part[[s == speaker for s in self.speakers]] = w.speaker
        time_part = np.zeros(len(self.turns))
        if w.time and asks_when(query_text):
            time_part[self.speaks_of_time] = w.time
        score = fused + neighbour_part + speaker_part + time_part
        top = np.lexsort((np.arange(len(score)), -score))[:k]
        return [
            TurnHit(
                id=self.turns[i].id,
                text=self.turns[i].text,
                metadata=self.turns[i].metadata,
                score=float(score[i]),
                similarity=float(similarity[i]),
                bm25=float(bm25[i]),
                dense_part=float(dense_part[i]),
                lexical_part=float(lexical_part[i]),
                speaker_part=float(speaker_part[i]),
                neighbour_part=float(neighbour_part[i]),
                session_part=float(session_part[i]),
                time_part=float(time_part[i]),
                content_similarity=float(content[i]),
            )
            for i in top
        ]


def search_turns(
    query_text: str,
    query_vector: object,
    turns: Sequence[Document],
    k: int,
    weights: TurnSearchWeights | None = None,
    *,
    name_vectors: Mapping[str, object] | None = None,
) -> list[TurnHit]:
    """The ``k`` turns of one conversation that best answer the query, best first.

    ``turns`` are ``Document`` objects with embeddings (``store.get(..., include_embeddings=True)``);
    ``query_vector`` is the query embedded by the same embedder, and ``name_vectors`` the speakers' names
    (see :class:`TurnIndex`). Fewer than ``k`` turns: all of them.
    """
    return TurnIndex(turns, weights, name_vectors=name_vectors).search(query_text, query_vector, k)
