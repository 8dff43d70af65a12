"""Following the change feed (:mod:`brain.store.feed`): what other processes wrote, applied to this
process's in-process state (the indexes, the turn cache, every subscriber with ``cache = True``).

Applying a record is fetching the current version of its ids from the store: present ids are
upserted into the caches, absent ones removed. That is the same whatever the operation was (an
upsert, an in-place edit, an importance change, a delete), it does not depend on the order in which
records are applied, and applying one twice changes nothing. So a record is applied when it is first
seen and again whenever its state changes (``pending`` -> ``done`` or ``aborted``), and once more
when it has stayed ``pending`` past the grace period (its writer died between the claim and the
confirmation): from then on the caches hold what Chroma holds for those ids.

The follower's position (:attr:`FeedFollower.applied`) is the highest sequence up to which every
record is settled and applied. A read that asks for "at least sequence N" (:meth:`wait_for`) waits
until the position reaches N. Records this store wrote itself are skipped: its caches took them as
they were committed.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from brain.model.errors import Backoff, StoreError, StoreUnavailable, ValidationError, retry
from brain.store.chroma import ChromaAccess
from brain.store.events import WriteEvent, WriteEvents, WriteSubscriber
from brain.store.feed import PENDING_GRACE_SECONDS, ChangeFeed, FeedRecord, FeedWriter
from brain.store.indexes import HasState
from brain.store.live import LiveBound, follow_live
from brain.store.positions import PositionClaims

log = logging.getLogger(__name__)

#: how long a read that asks for a sequence waits for this process to reach it
WAIT_SECONDS = 10.0
#: a read of a record's ids that failed is tried again after 0.05 and 0.1 s before the poll fails
FETCH_RETRIES = Backoff(first=0.05, retries=2)
#: how often :meth:`FeedFollower.wait_for` polls: from 20 ms, doubling, at most every 0.5 s
WAIT_POLLS = Backoff(first=0.02, retries=None, cap=0.5)


def check_sequence(value: object) -> int:
    """A sequence a read asks for: a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError.of(
            "min_sequence", f"min_sequence must be a whole number >= 0 (a write's sequence), not {value!r}"
        )
    return value


class FeedFollower:
    """Applies other processes' writes from ``feed`` to the caches subscribed to ``events``.

    ``lock`` is the store's lock: applying a record and this store's own writes never interleave
    (a version fetched before an own write must not be applied after it). ``rebuild`` rebuilds the
    caches from the store, for a follower that fell behind the feed's compaction."""

    def __init__(
        self,
        feed: ChangeFeed,
        chroma: ChromaAccess,
        events: WriteEvents,
        lock: threading.RLock,
        writer: str,
        *,
        interval: float,
        rebuild: Callable[[], None],
        grace: float = PENDING_GRACE_SECONDS,
        swapped: Callable[[int], object] | None = None,
    ):
        self.feed = feed
        self.chroma = chroma
        self.events = events
        self.writer = writer
        self.interval = interval
        self.grace = grace
        self._lock = lock
        self._rebuild = rebuild
        self._swapped = swapped  # a re-index swapped the live collection (at a sequence): the store moves to it
        self.applied = 0
        # records above the position as last applied: seq -> (state, when first seen)
        self._seen: dict[int, tuple[str, float]] = {}
        self._last_check = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.position()

    def rebind(self, chroma: ChromaAccess, rebuild: Callable[[], None]) -> None:
        """Fetch from ``chroma`` from now on (the store moved to another collection)."""
        self.chroma, self._rebuild = chroma, rebuild

    # ---- the position --------------------------------------------------------------------------
    def position(self) -> None:
        """Start after the feed's settled records: the caches are built from the store from now on,
        so they hold every write settled before; what is still pending is applied when it settles."""
        with self._lock:
            records = self.feed.after(0, with_ids=False)
            open_ = [r.seq for r in records if not r.settled and r.writer != self.writer]
            self.applied = (min(open_) - 1) if open_ else (records[-1].seq if records else 0)
            self._seen.clear()

    def resume(self, sequence: int) -> str | None:
        """Follow from ``sequence``: the caches were just loaded as they were at it (an index
        snapshot), so every record after it is applied now, this store's own too (they may predate
        the load). Returns why that is impossible (records after it were compacted, or the feed never
        reached it), changing nothing, or None once applied."""
        with self._lock:
            records = self.feed.after(sequence)
            if records and records[0].seq != sequence + 1:
                return (
                    f"the change feed was compacted past it (its sequence is {sequence}, the oldest record "
                    f"after it {records[0].seq})"
                )
            if not records and sequence > 0 and not self.feed.after(sequence - 1, with_ids=False):
                return f"the change feed holds no record {sequence} (it was reset since)"
            self.applied = sequence
            self._seen.clear()
            self._last_check = time.monotonic()
            self._apply(records, own=True)
            return None

    # ---- polling -------------------------------------------------------------------------------
    def poll(self, *, force: bool = False) -> int:
        """Apply what other processes wrote since the last poll, when the last one is older than the
        interval (or ``force``). Returns how many records of other writers are above the position
        or were applied (0: nothing of theirs moved)."""
        if not force and time.monotonic() - self._last_check < self.interval:
            return 0
        self._start_thread()
        with self._lock:
            self._last_check = time.monotonic()
            records = self.feed.after(self.applied)
            if records and records[0].seq > self.applied + 1:
                log.warning(
                    "the change feed was compacted past this process's position (%d; oldest record %d): "
                    "rebuilding the in-process state from the store",
                    self.applied,
                    records[0].seq,
                )
                self.position()
                self._rebuild()
                return len(records)
            return self._apply(records)

    def _apply(self, records: list[FeedRecord], *, own: bool = False) -> int:
        now = time.monotonic()
        # the states are kept only once the caches have the records' ids: a fetch that fails leaves
        # them to the next poll, which fetches again
        seen = dict(self._seen)
        fetch: dict[str, None] = {}
        moved = 0
        swap: int | None = None
        for record in records:
            if record.writer == self.writer and not own:
                seen[record.seq] = ("done", now)
                continue
            moved += 1
            if record.op == "swap":  # done once the pointer names the new collection; no ids to fetch
                state, first = seen.get(record.seq, (None, now))
                if record.settled:
                    if state != record.state and record.state == "done":
                        swap = record.seq
                    seen[record.seq] = (record.state, first)
                elif state is None:
                    seen[record.seq] = ("pending", now)
                elif state == "pending" and now - first > self.grace:  # the pointer says whether it happened
                    seen[record.seq], swap = ("expired", first), record.seq
                continue
            state, first = seen.get(record.seq, (None, now))
            if state == record.state:
                if state == "pending" and now - first > self.grace:
                    log.warning(
                        "change feed record %d (%s of %d ids) stayed pending for %.0f s: its writer is "
                        "taken as dead, and the store's current version applied",
                        record.seq,
                        record.op,
                        len(record.ids),
                        now - first,
                    )
                    fetch.update(dict.fromkeys(record.ids))
                    seen[record.seq] = ("expired", first)
                continue
            if not (record.state == "void" and state is None):  # a void record that was never pending wrote nothing
                fetch.update(dict.fromkeys(record.ids))
            seen[record.seq] = (record.state, first)
        if swap is not None and self._swapped is not None:
            self._swapped(swap)  # the caches are rebuilt from the new collection; the fetch below is moot
        if fetch:
            self._resync(list(fetch), records[-1].seq)
        self._seen = seen
        while self.applied + 1 in self._seen and self._seen[self.applied + 1][0] != "pending":
            self.applied += 1
            del self._seen[self.applied]
        return moved

    def _resync(self, ids: list[str], sequence: int) -> None:
        """Tell the caches what the store holds now for ``ids``."""
        rows: dict[str, tuple[str, dict[str, object], Any]] = {}
        for page in self._fetch(ids):
            for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"]):
                rows[i] = (d or "", dict(m or {}), e)
        gone = tuple(i for i in ids if i not in rows)
        if gone:
            self.events.publish_to_caches(WriteEvent(sequence, "delete", gone))
        if rows:
            vectors = np.asarray([r[2] for r in rows.values()], dtype=np.float32)
            self.events.publish_to_caches(
                WriteEvent(
                    sequence,
                    "upsert",
                    tuple(rows),
                    tuple(r[0] for r in rows.values()),
                    tuple(r[1] for r in rows.values()),
                    vectors,
                )
            )

    def _fetch(self, ids: list[str]) -> list[dict[str, Any]]:
        """The current version of ``ids``. Chroma can fail internally on a read of ids another process
        is deleting at that moment (``Error finding id``); the read is tried again before it fails."""

        def noted(exc: BaseException, _: int, wait: float) -> None:
            log.info("change feed: reading %d ids failed (%s); trying again in %.2f s", len(ids), exc, wait)

        return retry(
            lambda: self.chroma.get_ids(ids, ["documents", "metadatas", "embeddings"]),
            FETCH_RETRIES,
            on=StoreError,
            before_wait=noted,
        )

    def wait_for(self, sequence: int, timeout: float = WAIT_SECONDS) -> None:
        """Return once every write up to ``sequence`` is applied here (read-your-writes for a client
        that wrote through another process); raises :class:`StoreUnavailable` after ``timeout``."""
        deadline = time.monotonic() + timeout
        pauses = WAIT_POLLS.waits()
        while self.applied < sequence:
            self.poll(force=True)
            if self.applied >= sequence:
                return
            if time.monotonic() > deadline:
                head = self.feed.head()
                why = (
                    f"the feed's last write is {head}: sequence {sequence} was never written"
                    if head < sequence
                    else "a write before it is still unfinished"
                )
                raise StoreUnavailable(
                    f"this process has applied the change feed up to sequence {self.applied}, "
                    f"not {sequence}, after {timeout:g} s ({why}); retry the read"
                )
            time.sleep(next(pauses))

    # ---- the background thread -----------------------------------------------------------------
    def _start_thread(self) -> None:
        if self._thread is not None or self._stop.is_set() or self.interval <= 0:
            return
        self._thread = threading.Thread(
            target=_follow, args=(weakref.ref(self), self._stop, self.interval), name="brain-feed-follower", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()


def _follow(ref: weakref.ref[FeedFollower], stop: threading.Event, interval: float) -> None:
    """Poll every ``interval`` while the follower lives and is not closed; back off while the store
    is unreachable (the requests report that themselves)."""
    pause = interval
    while not stop.wait(pause):
        follower = ref()
        if follower is None:
            return
        try:
            follower.poll()
            pause = interval
        except StoreUnavailable as exc:
            pause = min(max(pause * 2, interval), 30.0)
            log.info("change feed: %s; next try in %.0f s", exc, pause)
        except Exception:  # the thread must survive to keep following; the error is logged
            log.exception("change feed: applying other processes' writes failed; next try in %.0f s", pause)
        finally:
            del follower


class FeedHolder(Protocol):
    """A store, as far as reading its change feed's positions goes."""

    follower: FeedFollower | None
    feed_writer: FeedWriter | None


class Followed(LiveBound, HasState, Protocol):
    """A store, as far as attaching its change feed goes (:class:`brain.store.Store`)."""

    follower: FeedFollower | None
    events: WriteEvents

    def subscribe(self, subscriber: WriteSubscriber, *, close: Callable[[], None] | None = None) -> WriteSubscriber: ...

    def on_close(self, close: Callable[[], None]) -> None: ...


def attach_feed(store: Followed, feed: ChangeFeed, positions: PositionClaims | None = None) -> FeedFollower:
    """Number ``store``'s writes in ``feed`` (each write adds its record) and follow the other
    processes' records from it (see :mod:`brain.store.feed`); with ``positions``, claim the
    ``turn_index`` and ``summary_index`` of new turns and summaries across processes
    (:mod:`brain.store.positions`). Called once, by the opener, before anything is written or read."""
    with store.lock:
        writer = FeedWriter(feed)
        store.events.use_sequencer(writer)
        store.subscribe(writer)
        store.feed_writer = writer
        store.writes.positions, store.writes.writer = positions, writer.writer
        follower = FeedFollower(
            feed,
            store.chroma,
            store.events,
            store.lock,
            writer.writer,
            interval=store.settings.feed_interval_seconds,
            rebuild=store.state.rebuild,
            swapped=_follow_live_of(weakref.ref(store)),
        )
        store.follower = follower
        store.state.follower = follower
        store.on_close(follower.close)
        return follower


def _follow_live_of(ref: weakref.ref[Followed]) -> Callable[[int], object]:
    """What the follower calls on a swap record: a weak reference, so that the follower (and its
    thread) never keep a store alive that its owner let go."""

    def swapped(sequence: int) -> object:
        store = ref()
        return follow_live(store, since=sequence) if store is not None else False

    return swapped


def catch_up(store: FeedHolder, min_sequence: int | None = None, *, timeout: float = WAIT_SECONDS) -> None:
    """Apply to ``store`` what other processes wrote, now; with ``min_sequence``, wait (up to ``timeout``
    seconds, then :class:`StoreUnavailable`) until every write up to it is applied. Without a change
    feed (the embedded store, which one process owns) there is nothing to apply."""
    follower = store.follower
    if follower is None:
        return
    if min_sequence is None:
        follower.poll(force=True)
    else:
        follower.wait_for(check_sequence(min_sequence), timeout)


def last_sequence(store: FeedHolder) -> int | None:
    """The change feed's sequence of the latest write ``store`` committed (None without a feed): a
    read elsewhere that asks for at least it sees that write."""
    return None if store.feed_writer is None else store.feed_writer.last_sequence


__all__ = [
    "WAIT_SECONDS",
    "FeedFollower",
    "FeedHolder",
    "Followed",
    "attach_feed",
    "catch_up",
    "check_sequence",
    "last_sequence",
]
