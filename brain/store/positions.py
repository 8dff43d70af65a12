"""Per-conversation positions (``turn_index``, ``summary_index``) that stay unique and consecutive
when several processes append to one conversation.

Each write that appends ``k`` turns (or summaries) to a conversation claims a block of ``k``
positions ``[start, start + k)`` as one record in a third collection beside the store's
(``<collection>__positions``), its Chroma id made of the kind, the conversation and ``start``. The
claim is a compare-and-set on Chroma's ``add``, which keeps the first record under an id (see
:mod:`brain.store.feed`): a writer reads the blocks of the conversation that end at or after what it
knows (the highest position its own turn cache shows, plus one), adds its block at the highest end it
read, and reads again. It holds the block when the record is its own and no other block overlaps it;
when another writer took that start, it tries again at the highest end it read. Every block starts
where the highest block its writer read ends, so two blocks never overlap and there is no gap
between them. A conversation written before positions were claimed (no blocks yet) starts after its
highest stored position.

A write that fails after its claim leaves its block unused: the positions of a failed write are a
gap, as its turns are absent. The records are small (no text, the conversation id) and stay as long
as their conversation: one per write to it; forgetting an entity releases its conversations'.

**The owner.** A conversation belongs to one scope: the scope of its first turns
(:meth:`PositionClaims.claim_owner`). The claim is the same compare-and-set: a record under an id of
the conversation alone, whose first ``add`` wins; every writer appending turns reads it back and
appends only in the scope it names. Two entities starting one new conversation id at once: one of them
owns it, the other's write is refused. Released with the positions.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from brain.model.errors import StoreUnavailable
from brain.store.chroma import GuardedCollection

log = logging.getLogger(__name__)

POSITIONS_SUFFIX = "__positions"
MAX_CLAIMS = 1000
OWNER = "owner"
_VECTOR = [1.0]


@dataclass(frozen=True, slots=True)
class Block:
    start: int
    end: int
    writer: str


def block_id(kind: str, conversation: str, start: int) -> str:
    digest = hashlib.sha256(conversation.encode("utf-8")).hexdigest()[:32]
    return f"{kind}:{digest}:{start:012d}"


def owner_id(conversation: str) -> str:
    return f"{OWNER}:{hashlib.sha256(conversation.encode('utf-8')).hexdigest()[:32]}"


class PositionClaims:
    """The position blocks of one store's conversations, claimed across processes."""

    def __init__(self, client: Any, collection: str, where: str):
        name = collection + POSITIONS_SUFFIX
        try:
            col = client.get_or_create_collection(
                name, embedding_function=None, metadata={"brain": "conversation positions", "of": collection}
            )
        except Exception as exc:  # connection or server errors from chromadb
            raise StoreUnavailable(f"cannot open the position claims {name!r}: {exc}") from exc
        self.col = GuardedCollection(col, where)
        self.name = name
        self._ends: dict[tuple[str, str], int] = {}  # the highest end this process has read, per conversation

    def claim(self, kind: str, conversation: str, count: int, floor: int, writer: str) -> int:
        """Claim ``count`` consecutive positions of ``kind`` in ``conversation``; returns the first.
        ``floor``: the next position as this process sees the conversation (its highest stored one + 1)."""
        key = (kind, conversation)
        known = max(floor, self._ends.get(key, 0))
        blocks = self._blocks(kind, conversation, known)
        candidate = max((b.end for b in blocks), default=known)
        for _ in range(MAX_CLAIMS):
            self.col.add(
                ids=[block_id(kind, conversation, candidate)],
                documents=[""],
                embeddings=[_VECTOR],
                metadatas=[
                    {
                        "kind": kind,
                        "conversation": conversation,
                        "start": candidate,
                        "end": candidate + count,
                        "writer": writer,
                    }
                ],
            )
            blocks = self._blocks(kind, conversation, candidate)
            mine = [b for b in blocks if b.start == candidate and b.writer == writer]
            clash = [b for b in blocks if b.start != candidate and b.start < candidate + count and b.end > candidate]
            top = max(b.end for b in blocks)
            self._ends[key] = max(self._ends.get(key, 0), top)
            if mine and not clash:
                return candidate
            if mine:  # cannot happen while every claim starts at an end it read; kept unused
                log.warning("position block %s of %s overlaps another; claiming after it", candidate, conversation)
            candidate = top
        raise StoreUnavailable(
            f"could not claim {kind} positions in conversation {conversation!r} after "
            f"{MAX_CLAIMS} attempts; too many writers at once, retry the write"
        )

    def claim_owner(self, conversation: str, scope: str, writer: str) -> str:
        """The scope that owns ``conversation``: ``scope`` when this is the first claim, else the scope
        of the claim that came first."""
        record = owner_id(conversation)
        for _ in range(MAX_CLAIMS):
            self.col.add(
                ids=[record],
                documents=[""],
                embeddings=[_VECTOR],
                metadatas=[{"kind": OWNER, "conversation": conversation, "scope": scope, "writer": writer}],
            )
            got = self.col.get(ids=[record], include=["metadatas"])
            if got["ids"]:
                return str(got["metadatas"][0]["scope"])
            # released between the add and the read (the conversation was forgotten): claim again
        raise StoreUnavailable(
            f"could not claim the owner of conversation {conversation!r} after {MAX_CLAIMS} attempts; retry the write"
        )

    def release(self, conversations: list[str]) -> None:
        """Forget the claimed positions of ``conversations`` (their documents are gone): such an id
        used again starts at position 1."""
        for conversation in conversations:
            self.col.delete(where={"conversation": conversation})
            self._ends = {k: v for k, v in self._ends.items() if k[1] != conversation}

    def _blocks(self, kind: str, conversation: str, end_from: int) -> list[Block]:
        got = self.col.get(
            where={"$and": [{"conversation": conversation}, {"kind": kind}, {"end": {"$gte": end_from}}]},
            include=["metadatas"],
        )
        return [Block(int(m["start"]), int(m["end"]), str(m["writer"])) for m in got["metadatas"]]


class ClaimsHolder(Protocol):
    """What holds a store's claims (:class:`brain.store.pipeline.WritePipeline`)."""

    positions: PositionClaims | None


class HasClaims(Protocol):
    """A store, as far as its claims go."""

    lock: threading.RLock

    @property
    def writes(self) -> ClaimsHolder: ...


def release_positions(store: HasClaims, conversations: Sequence[str]) -> None:
    """Forget the positions ``store`` claimed for ``conversations`` across processes, once their turns
    and summaries are deleted: such an id used again starts at ``turn_index`` 1 (without a change feed,
    positions come from the stored documents alone, and there is nothing to forget)."""
    claims = store.writes.positions
    if claims is not None:
        with store.lock:
            claims.release(list(conversations))


__all__ = [
    "OWNER",
    "POSITIONS_SUFFIX",
    "Block",
    "ClaimsHolder",
    "HasClaims",
    "PositionClaims",
    "block_id",
    "owner_id",
    "release_positions",
]
