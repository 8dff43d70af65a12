"""The change feed: one record per write, in a second Chroma collection beside the store's
(``<collection>__feed``), so that every process using the same Chroma server learns what the others
wrote, in one order, through the client it already has.

A record is ``{seq, op, state, writer, at}`` in its metadata and the written ids (JSON) as its
document; its Chroma id is the sequence number, zero-padded (:func:`record_id`). It holds no text, no
metadata and no vector of the documents: a follower fetches the current version of the ids from the
store (:mod:`brain.store.follower`), so a record says *which* ids changed, never *how*.

**The sequence without a lock server.** Chroma's ``add`` of an id that exists already does nothing
(no error, no overwrite; the first write stays), on the embedded client and on ``chroma run`` alike,
and a read after a write sees it. So adding the record of sequence ``n`` is a compare-and-set: a writer
adds ``n`` with its own token, then reads every record from ``n - 1`` up. The claim holds when record
``n`` carries its token and follows record ``n - 1`` (or is the highest). Otherwise another writer
took ``n`` and this one tries the number after the highest it saw. Record ``n - 1`` can be missing
for two reasons: ``n`` is the feed's first number (a writer racing for ``n + 1`` may already be above
it), or compaction deleted both (a writer that had not written for a long time). Compaction leaves a
marker of its horizon before it deletes, so the writer can tell: a number at or below the horizon is
marked ``void`` (followers may be past it) and the writer tries again above the highest. Every claim is at most one
above the highest record its writer has read, so the claimed numbers stay contiguous, and a number is
never claimed twice. The writer that ends up with
the highest number always keeps it, so racing writers all finish.

**The life of a record** follows the write's two phases (:mod:`brain.store.events`): it is claimed
``pending`` before Chroma is written, then set ``done`` when Chroma took the write or ``aborted`` when
it was undone. A writer killed in between leaves it ``pending``: a follower fetches its ids when it sees
it and again when it settles, or once it is older than the follower's grace period
(:data:`PENDING_GRACE_SECONDS`), so what it serves ends up as what Chroma holds, whatever the writer
managed to write.

**Compaction.** The writer that claims a multiple of :data:`COMPACT_EVERY` deletes the records more
than ``keep`` below it (``BRAIN_FEED_KEEP``). A follower that finds the records it needs gone (the
first record after its position is not the next number) rebuilds its state from the store.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from brain.model.errors import StoreUnavailable
from brain.store.chroma import GuardedCollection
from brain.store.events import WriteEvent, WriteSubscriber

log = logging.getLogger(__name__)

State = Literal["pending", "done", "aborted", "void"]
#: states after which a record changes no more
SETTLED: frozenset[str] = frozenset({"done", "aborted", "void"})
#: the suffix of the feed collection's name, after the store's collection name
FEED_SUFFIX = "__feed"
#: a writer that claims a multiple of this compacts the feed
COMPACT_EVERY = 1000
#: a pending record older than this (by the follower's clock, from when it first saw it) is taken as
#: settled: its writer died between the claim and the confirmation
PENDING_GRACE_SECONDS = 30.0
#: the id prefix of a compaction's horizon marker (metadata ``{horizon}``, no ``seq``: never a record)
HORIZON_PREFIX = "horizon-"
#: how many times a writer tries to claim a number before it gives up (each loss is another writer's win)
MAX_CLAIMS = 1000
# the feed's vectors: Chroma needs one per record; the feed is never searched by similarity
_VECTOR = [1.0]


def record_id(seq: int) -> str:
    """The Chroma id of the record of sequence ``seq`` (zero-padded: ids sort as the numbers do)."""
    return f"{seq:020d}"


@dataclass(frozen=True, slots=True)
class FeedRecord:
    seq: int
    op: str
    state: str
    writer: str
    at: float
    ids: tuple[str, ...] = ()

    @property
    def settled(self) -> bool:
        return self.state in SETTLED


def feed_name(collection: str) -> str:
    return collection + FEED_SUFFIX


class ChangeFeed:
    """The feed collection of one store: claim, settle, read and compact records."""

    def __init__(self, client: Any, collection: str, where: str, *, keep: int):
        try:
            col = client.get_or_create_collection(
                feed_name(collection), embedding_function=None, metadata={"brain": "change feed", "of": collection}
            )
        except Exception as exc:  # connection or server errors from chromadb
            raise StoreUnavailable(f"cannot open the change feed {feed_name(collection)!r}: {exc}") from exc
        self.col = GuardedCollection(col, where)
        self.name = feed_name(collection)
        self.keep = keep
        self.max_batch_size = int(client.get_max_batch_size())
        self._head = 0  # the highest sequence this process has seen in the feed
        self._lock = threading.Lock()

    # ---- writing -------------------------------------------------------------------------------
    def claim(self, op: str, ids: Sequence[str], writer: str) -> int:
        """Claim the next sequence number for a write of ``op`` on ``ids``: its record is added
        ``pending``. Returns the number."""
        body = json.dumps(list(ids))
        with self._lock:
            candidate = self._head + 1
        for _ in range(MAX_CLAIMS):
            meta = {"seq": candidate, "op": op, "state": "pending", "writer": writer, "at": time.time()}
            self.col.add(ids=[record_id(candidate)], documents=[body], metadatas=[meta], embeddings=[_VECTOR])
            around = self.col.get(where={"seq": {"$gte": candidate - 1}}, include=["metadatas"])
            metas = {int(m["seq"]): m for m in around["metadatas"]}
            mine = metas.get(candidate, {}).get("writer") == writer
            top = max(metas, default=candidate)
            if mine and (top == candidate or candidate - 1 in metas or not self._freed(candidate)):
                self._seen(candidate)
                if candidate % COMPACT_EVERY == 0:
                    self.compact(candidate)
                return candidate
            if mine:  # a number compaction had freed, below records followers may be past: not used
                self.settle(candidate, "void")
            self._seen(top)
            candidate = top + 1
        raise StoreUnavailable(
            f"could not claim a sequence number in the change feed {self.name!r} after "
            f"{MAX_CLAIMS} attempts; too many writers at once, retry the write"
        )

    def settle(self, seq: int, state: State) -> None:
        self.col.update(ids=[record_id(seq)], metadatas=[{"state": state}])

    def compact(self, below: int) -> int:
        """Delete the records more than ``keep`` below sequence ``below``; returns the horizon (the
        highest sequence deleted, or 0)."""
        horizon = below - self.keep
        if horizon <= 0:
            return 0
        try:
            # the marker goes first: a writer that finds a number free can then tell it was deleted
            self.col.upsert(
                ids=[f"{HORIZON_PREFIX}{horizon:020d}"],
                documents=[""],
                embeddings=[_VECTOR],
                metadatas=[{"horizon": horizon}],
            )
            self.col.delete(where={"horizon": {"$lt": horizon}})
            self.col.delete(where={"seq": {"$lte": horizon}})
        except StoreUnavailable as exc:  # another writer compacts next time; the write itself is done
            log.warning("could not compact the change feed %s: %s", self.name, exc)
            return 0
        return horizon

    def _freed(self, seq: int) -> bool:
        """Whether compaction has deleted sequence ``seq`` (its horizon marker is at or above it)."""
        return bool(self.col.get(where={"horizon": {"$gte": seq}}, include=[], limit=1)["ids"])

    def _seen(self, seq: int) -> None:
        with self._lock:
            self._head = max(self._head, seq)

    # ---- reading -------------------------------------------------------------------------------
    def after(self, seq: int, *, with_ids: bool = True) -> list[FeedRecord]:
        """Every record above ``seq``, in sequence order."""
        include = ["metadatas", "documents"] if with_ids else ["metadatas"]
        records: list[FeedRecord] = []
        offset = 0
        while True:
            page = self.col.get(where={"seq": {"$gt": seq}}, include=include, limit=self.max_batch_size, offset=offset)
            for n, meta in enumerate(page["metadatas"]):
                ids = tuple(json.loads(page["documents"][n] or "[]")) if with_ids else ()
                records.append(
                    FeedRecord(
                        int(meta["seq"]),
                        str(meta.get("op")),
                        str(meta.get("state")),
                        str(meta.get("writer")),
                        float(meta.get("at") or 0.0),
                        ids,
                    )
                )
            if len(page["ids"]) < self.max_batch_size:
                break
            offset += len(page["ids"])
        records.sort(key=lambda r: r.seq)
        if records:
            self._seen(records[-1].seq)
        return records

    def head(self) -> int:
        """The highest sequence in the feed (0 when it is empty)."""
        records = self.after(self._head, with_ids=False)
        return records[-1].seq if records else self._head


class FeedWriter(WriteSubscriber):
    """This store's side of the feed: it numbers the store's writes (the sequencer of
    :class:`~brain.store.events.WriteEvents`: the claim adds the ``pending`` record) and settles each
    record when the write is committed or aborted."""

    def __init__(self, feed: ChangeFeed):
        self.feed = feed
        self.writer = uuid.uuid4().hex  # this store's token: its own records are not applied again
        self.last_sequence = 0  # the highest sequence of a write this store committed

    def claim(self, op: str, ids: Sequence[str]) -> int:
        return self.feed.claim(op, ids, self.writer)

    def commit(self, event: WriteEvent) -> None:
        self.last_sequence = max(self.last_sequence, event.sequence)
        self._settle(event, "done")

    def abort(self, event: WriteEvent) -> None:
        self._settle(event, "aborted")

    def _settle(self, event: WriteEvent, state: State) -> None:
        try:
            self.feed.settle(event.sequence, state)
        except StoreUnavailable as exc:
            # the write itself is decided; a follower treats the record as settled after its grace period
            log.warning(
                "change feed record %d stays pending (%s): other processes see it within %.0f s",
                event.sequence,
                exc,
                PENDING_GRACE_SECONDS,
            )


__all__ = [
    "COMPACT_EVERY",
    "FEED_SUFFIX",
    "PENDING_GRACE_SECONDS",
    "SETTLED",
    "ChangeFeed",
    "FeedRecord",
    "FeedWriter",
    "feed_name",
    "record_id",
]
