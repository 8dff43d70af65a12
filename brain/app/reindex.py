"""Switching the embedding model of a store: a blue/green re-index.

:func:`run` builds a collection for the new model beside the live one (``<name>__g<n>``, see
:mod:`brain.store.live`), copies every document of every type into it with its text and metadata
unchanged, and flips the live pointer to it. Then:

- **Vectors.** A memory whose vector of the new model the mirror keeps (Embedding Protocol v2 keeps
  several models per memory), for the same text and dimension, is copied without calling the
  embedder; every other document is embedded in batches. The new vectors of mirrored documents are
  written to the mirror beside the old model's, which stay until :func:`drop_old`. Before the swap,
  the vectors the mirror still lacks for documents the new collection holds (a run killed between
  a batch's Chroma write and its mirror write) are copied from the new collection.
- **Resumable.** The new collection is the record of what is done: a document there with the live
  text and metadata is done. A run after an interruption (kill -9, Ollama down) compares the two
  collections and embeds only what is missing or changed; nothing done is embedded again. The
  build under way is named in the pointer, so the next run continues it.
- **Writes meanwhile.** The store keeps serving and writing the live collection. Every write of this
  process is recorded through the store's write events; with a Chroma server, the other processes'
  writes are read from the change feed from the sequence the run started at. Before the swap they are
  replayed: the ids they touched are read from the live collection again and copied (or deleted).
  The last replay and the flip happen under the store's lock, so no write of this process falls
  between them; another process's write claimed before the swap's feed record is replayed after the
  flip. On the embedded store the data directory is locked to this process, so nothing else writes.
- **The swap** is one upsert of the pointer record; with a change feed it is also a ``swap`` record,
  on which every other process moves to the new collection (and model) on its next feed check.
  The specialists are registered for the new model in their own new collection first, and their
  pointer flips with the store's.
- **Roll-back and clean-up.** The old collection stays (``--keep``): :func:`rollback` makes the
  previous collection live again after bringing it up to date (the same resumable copy: only what
  changed since the swap is embedded, with the previous model). :func:`drop_old` deletes the
  collections beyond the ``keep`` newest previous ones, and the mirror's vectors of models no kept
  collection uses.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from chromadb.api import ClientAPI

from brain.config import Settings
from brain.features.mirror.guard import StoreIdentity, store_moved
from brain.model.errors import BrainError, ReindexError, ValidationError
from brain.providers.embeddings import Embedder
from brain.store import Store
from brain.store.chroma import ChromaAccess, GuardedCollection, open_cosine_collection
from brain.store.events import WriteEvent, WriteSubscriber
from brain.store.feed import PENDING_GRACE_SECONDS, ChangeFeed
from brain.store.live import (
    Build,
    PointerState,
    follow_live,
    initial_state,
    read_pointer,
    swapped,
    write_pointer,
)
from brain.store.scrub import reclaim_dropped
from brain.text.progress import ProgressOptions, duration_text, open_progress
from brain.wiring import get_embedder_named

log = logging.getLogger(__name__)

#: documents embedded and written per step: large enough that a Chroma write per step costs little
#: beside the embedding, small enough that an interruption loses little
BATCH = 256
#: the least time between a swap and dropping the collection it retired, on a Chroma server
DROP_GRACE_SECONDS = 30.0


@dataclass
class ReindexPlan:
    """What a re-index would do: ``documents`` in the live collection, of which ``done`` are in the
    target already (a resumed build), ``reused`` get the mirror's vector and ``to_embed`` the embedder."""

    collection: str
    live: str
    from_embedder: str
    to_embedder: str
    dimension: int
    documents: int
    done: int
    reused: int
    to_embed: int
    to_delete: int
    resumed: bool

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class ReindexReport:
    """What a re-index did."""

    collection: str
    previous: str
    embedder: str
    documents: int = 0
    embedded: int = 0
    reused: int = 0
    skipped: int = 0  # done before this run (a resumed build)
    deleted: int = 0
    replayed: int = 0  # ids written meanwhile and copied again before the swap
    mirror_vectors: int = 0
    specialists: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    specialists_seconds: float = 0.0
    #: what the operator must set now, when BRAIN_EMBEDDER names another model than the live one
    next_step: str | None = None

    @property
    def rate(self) -> float:
        """Documents per second of the run, the specialists' registration aside."""
        seconds = self.seconds - self.specialists_seconds
        return (self.embedded + self.reused + self.skipped) / seconds if seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "rate": round(self.rate, 1)}


@dataclass
class DropReport:
    dropped: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    mirror_vectors: int = 0
    #: bytes the embedded store's data directory shrank by (None on a Chroma server, or when it failed)
    reclaimed_bytes: int | None = None
    reclaim_error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


# ---- the pointer of a store -------------------------------------------------------------------------


def current_state(store: Store) -> PointerState:
    """The store's pointer, or the one it implies when it never had one."""
    state = read_pointer(store.client, store.settings.collection)
    if state is not None:
        return state
    return initial_state(store.settings.collection, store.collection_name, store.embedder.name, store.dimension)


def live_embedder_name(client: ClientAPI, logical: str) -> str | None:
    """The embedder the live collection of ``logical`` records (None: no such collection yet)."""
    from chromadb.errors import NotFoundError

    from brain.store.live import live_collection

    name = live_collection(client, logical)
    try:
        col = client.get_collection(name, embedding_function=None)
    except (NotFoundError, ValueError):  # no such collection (older chromadb raise ValueError): no store yet
        return None
    return (col.metadata or {}).get("embedder")


# ---- building ----------------------------------------------------------------------------------------


class _Recorder(WriteSubscriber):
    """The ids this process writes while a re-index runs."""

    def __init__(self) -> None:
        self.ids: dict[str, None] = {}
        self._lock = threading.Lock()

    def commit(self, event: WriteEvent) -> None:
        with self._lock:
            self.ids.update(dict.fromkeys(event.ids))

    def take(self) -> list[str]:
        with self._lock:
            ids, self.ids = list(self.ids), {}
        return ids


class _Copier:
    """Copies documents from the live collection into the target, embedding or reusing vectors."""

    def __init__(
        self,
        store: Store,
        target: ChromaAccess | None,
        embedder: Embedder,
        batch: int,
        report: ReindexReport,
        progress: Any,
        on_batch: Callable[[int], None] | None,
    ):
        self.store, self.target, self.embedder = store, target, embedder
        # the collection live when the run began (it stays this one after the swap: late writes come from it)
        self.source = store.chroma
        self.batch = batch
        self.report = report
        self.progress = progress
        self.on_batch = on_batch
        self.mirror = store.mirror
        self.mirrored = set(store.settings.mirrored_types)
        self.dimension = int(embedder.dimension)
        self.batches = 0
        # characters embedded and left, for the estimate after the first batch (long texts cost more)
        self.chars_left = 0
        self.first_started: float | None = None
        self.mirror_has_model = self.mirror is not None and embedder.name in self.mirror.models()

    @property
    def _target(self) -> ChromaAccess:
        if self.target is None:  # a plan's copier only compares
            raise RuntimeError("a re-index plan writes nothing")
        return self.target

    def diff(
        self, ids: Sequence[str]
    ) -> tuple[list[tuple[str, str, dict[str, object]]], list[tuple[str, str, dict[str, object]]], list[str]]:
        """For ``ids`` of the source: (documents to write, documents the target has as they are, ids
        the source no longer has)."""
        todo: list[tuple[str, str, dict[str, object]]] = []
        done: list[tuple[str, str, dict[str, object]]] = []
        gone: list[str] = []
        step = self.source.max_batch_size
        for s in range(0, len(ids), step):
            part = list(ids[s : s + step])
            have = {}
            if self.target is not None:
                for page in self.target.get_ids(part, ["documents", "metadatas"]):
                    have.update({i: (d, m) for i, d, m in zip(page["ids"], page["documents"], page["metadatas"])})
            present = set()
            for page in self.source.get_ids(part, ["documents", "metadatas"]):
                for i, d, m in zip(page["ids"], page["documents"], page["metadatas"]):
                    present.add(i)
                    (done if have.get(i) == (d, m) else todo).append((i, d or "", dict(m or {})))
            gone.extend(i for i in part if i not in present)
        return todo, done, gone

    def reusable(self, docs: Sequence[tuple[str, str, dict[str, object]]]) -> dict[str, np.ndarray]:
        """The mirror's vectors of the new model for ``docs`` embedded from the same text."""
        mirror = self.mirror
        if not self.mirror_has_model or mirror is None:
            return {}
        wanted = [i for i, _, m in docs if m.get("type") in self.mirrored]
        if not wanted:
            return {}
        texts = {i: t for i, t, _ in docs}
        return {
            i: v
            for i, (text, v) in mirror.vectors_of(wanted, self.embedder.name).items()
            if text == texts[i] and v.shape == (self.dimension,)
        }

    def write(self, docs: Sequence[tuple[str, str, dict[str, object]]]) -> None:
        """Embed (or reuse) and write ``docs`` into the target, one batch at a time. A batch is
        written (Chroma, then the mirror) in a second thread while the next one is embedded; batches
        are written in order, one at a time, so what the target holds is always whole batches."""
        self.chars_left += sum(len(t) for _, t, _ in docs)
        if self.first_started is None:
            self.first_started = time.monotonic()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="brain-reindex-writer") as writer:
            pending: Future[None] | None = None
            try:
                for s in range(0, len(docs), self.batch):
                    part = list(docs[s : s + self.batch])
                    reused = self.reusable(part)
                    fresh = [d for d in part if d[0] not in reused]
                    vectors = dict(reused)
                    if fresh:
                        started = time.monotonic()
                        embedded = self.embedder.embed_documents([t for _, t, _ in fresh])
                        self.report.embed_seconds += time.monotonic() - started
                        vectors.update(zip((i for i, _, _ in fresh), embedded))
                    if pending is not None:
                        pending.result()
                    pending = writer.submit(self._store, part, vectors, reused, len(fresh))
                if pending is not None:
                    pending.result()
            except BaseException:
                if pending is not None and not pending.done():
                    pending.exception()  # the batch in flight finishes before the error goes up
                raise

    def _store(
        self,
        part: list[tuple[str, str, dict[str, object]]],
        vectors: dict[str, np.ndarray],
        reused: dict[str, np.ndarray],
        fresh: int,
    ) -> None:
        self._target.upsert(
            [i for i, _, _ in part],
            [t for _, t, _ in part],
            [m for _, _, m in part],
            np.asarray([vectors[i] for i, _, _ in part], dtype=np.float32),
        )
        self.report.embedded += fresh
        self.report.reused += len(reused)
        self.to_mirror(part, vectors, reused)
        self.progress.update(len(part))
        self.batches += 1
        chars = sum(len(t) for _, t, _ in part)
        self.chars_left -= chars
        if self.batches == 1 and self.first_started is not None:
            self._estimate(len(part), chars, time.monotonic() - self.first_started)
        if self.on_batch is not None:
            self.on_batch(self.batches)

    def _estimate(self, documents: int, chars: int, seconds: float) -> None:
        """The time the rest takes at the first batch's measured pace, per character: the batches go from
        the shortest texts to the longest, so a count of documents would promise too little."""
        if seconds <= 0 or chars <= 0 or self.chars_left <= 0:
            return
        self.progress.note(
            f"reindex {self.embedder.name}: the first {documents} documents took {seconds:.1f} s "
            f"({documents / seconds:.1f} documents/s here); the {self.progress.total - self.progress.done} "
            f"left, longer texts among them, about {duration_text(self.chars_left * seconds / chars)}"
        )

    def to_mirror(
        self,
        docs: Sequence[tuple[str, str, dict[str, object]]],
        vectors: dict[str, np.ndarray],
        reused: dict[str, np.ndarray],
    ) -> None:
        """The new model's vectors of mirrored documents, beside the old model's."""
        if self.mirror is None:
            return
        items = [(i, vectors[i]) for i, _, m in docs if m.get("type") in self.mirrored and i not in reused]
        if items:
            self.report.mirror_vectors += self.mirror.upsert_embeddings(items, self.embedder.name, skip_unknown=True)

    def copy_ids(self, ids: Sequence[str]) -> int:
        """Bring ``ids`` in the target in line with the source; returns how many were written or deleted."""
        todo, _, gone = self.diff(ids)
        self.write(todo)
        if gone:
            self._target.delete(gone)
        return len(todo) + len(gone)


def _target_access(store: Store, name: str, embedder: Embedder) -> ChromaAccess:
    col = open_cosine_collection(
        store.client,
        name,
        embedder,
        schema_version=1,
        switch=f"the collection {name!r} is being built for another model; run "
        f"`brain reindex --embedder` with that model to finish it, or drop it",
        rename="use another BRAIN_COLLECTION",
    )
    where = store.settings.chroma_url or "the data directory"
    return ChromaAccess(store.client, GuardedCollection(col, where), where)


def _build_for(store: Store, state: PointerState, embedder: Embedder) -> Build | None:
    """The build under way for ``embedder`` (to resume), or None for a new one; raises when the live
    collection is built with ``embedder`` already."""
    build = state.building
    if build is not None and build.embedder == embedder.name:
        return build
    if embedder.name == store.embedder.name:
        raise ReindexError(
            f"the live collection {store.collection_name!r} is built with {embedder.name} already; "
            f"nothing to re-index (name another model with --embedder)"
        )
    return None


def _start(store: Store, embedder: Embedder) -> tuple[PointerState, Build, bool]:
    """The pointer with the build for ``embedder`` (a build under way for it is resumed)."""
    state = current_state(store)
    build = _build_for(store, state, embedder)
    if build is not None:
        return state, build, True
    unfinished = state.building
    if unfinished is not None and state.kept_named(unfinished.collection) is None:  # never a kept collection
        log.info(
            "dropping the unfinished build %s (%s) for %s", unfinished.collection, unfinished.embedder, embedder.name
        )
        _delete_collection(store, unfinished.collection)
    name = state.next_name(store.settings.collection)
    build = Build(name, embedder.name, int(embedder.dimension), started=time.time())
    return replace(state, building=build, generation=state.generation + 1), build, False


def plan(store: Store, embedder: Embedder) -> ReindexPlan:
    """What :func:`run` would do for ``embedder``, without writing anything (nor calling the embedder)."""
    state = current_state(store)
    build = _build_for(store, state, embedder)
    ids = store.chroma.ids()
    target = None
    if build is not None and build.collection in {c.name for c in store.client.list_collections()}:
        target = _target_access(store, build.collection, embedder)
    copier = _Copier(store, target, embedder, BATCH, ReindexReport("", "", ""), None, None)
    todo, done, _ = copier.diff(ids)
    extra = len(set(target.ids()) - set(ids)) if target is not None else 0
    reused = len(copier.reusable(todo))
    return ReindexPlan(
        collection=build.collection if build else state.next_name(store.settings.collection),
        live=store.collection_name,
        from_embedder=store.embedder.name,
        to_embedder=embedder.name,
        dimension=int(embedder.dimension),
        documents=len(ids),
        done=len(done),
        reused=reused,
        to_embed=len(todo) - reused,
        to_delete=extra,
        resumed=build is not None,
    )


def run(
    store: Store,
    embedder: Embedder,
    *,
    batch: int = BATCH,
    progress: bool | ProgressOptions = True,
    on_batch: Callable[[int], None] | None = None,
    swap: bool = True,
) -> ReindexReport:
    """Re-index ``store`` for ``embedder`` and make the new collection live (see the module docstring).

    ``on_batch(n)`` is called after the n-th batch is written (for tests and callers that report
    progress their own way). ``swap=False`` builds without swapping (a later run swaps). An
    embedder failure raises its :class:`~brain.model.errors.EmbedderError`; the live collection is
    untouched and the build resumes from where it stopped."""
    if batch < 1:
        raise ValidationError.of("batch", f"batch must be >= 1, not {batch}")
    started = time.monotonic()
    state, build, _ = _start(store, embedder)
    previous = store.collection_name
    feed_writer = store.feed_writer
    feed = feed_writer.feed if feed_writer is not None else None
    build = replace(build, start_sequence=feed.head() if feed is not None else None)
    state = write_pointer(store.client, store.settings.collection, replace(state, building=build))
    target = _target_access(store, build.collection, embedder)
    report = ReindexReport(build.collection, previous, embedder.name)
    served = StoreIdentity.of(store)
    recorder = _Recorder()
    store.subscribe(recorder)
    try:
        ids = store.chroma.ids()
        with open_progress(progress, total=len(ids), desc=f"reindex {embedder.name}", unit="doc") as bar:
            copier = _Copier(store, target, embedder, batch, report, bar, on_batch)
            todo, done, _ = copier.diff(ids)
            report.skipped = len(done)
            bar.update(len(done))
            # texts of like length in one batch pad less (what an embedder does within one call)
            copier.write(sorted(todo, key=lambda d: len(d[1])))
        # documents the listing missed (a concurrent delete shifts the pages) and ids no longer live
        live_ids, target_ids = set(store.chroma.ids()), set(target.ids())
        extra = sorted(target_ids - live_ids)
        if extra:
            target.delete(extra)
            report.deleted += len(extra)
        report.replayed += copier.copy_ids(sorted(live_ids - target_ids))
        seen = build.start_sequence or 0
        for _ in range(3):  # catch up with other processes' writes while they keep writing
            moved, seen = _replay(store, copier, recorder, feed, seen)
            report.replayed += moved
            if not moved:
                break
        report.mirror_vectors += _complete_mirror(copier, target)
        if not swap:
            report.documents = target.count()
            report.seconds = time.monotonic() - started
            return report
        registering = time.monotonic()
        report.specialists = _register_specialists(store, embedder, build.collection)
        report.specialists_seconds = time.monotonic() - registering
        swap_seq = feed_writer.claim("swap", [build.collection]) if feed_writer is not None else None
        with store.lock:  # no write of this process between the last replay and the flip
            moved, seen = _replay(store, copier, recorder, feed, seen, until=swap_seq)
            report.replayed += moved
            report.documents = target.count()
            report.seconds = time.monotonic() - started
            state = swapped(
                read_pointer(store.client, store.settings.collection) or state, build.collection, rate=report.rate
            )
            # the specialists first: killed between the two, the build is still pending and a rerun swaps
            _flip_specialists(store, build.collection)
            write_pointer(store.client, store.settings.collection, state)
            follow_live(store, embedder=embedder)
            if store.mirror is not None:  # the mirror follows the new collection, not a store created again
                store_moved(store.mirror, served, store)
        if feed is not None and swap_seq is not None:
            feed.settle(swap_seq, "done")
            # writes other processes claimed before the swap record went to the old collection
            report.replayed += _replay_old(copier, feed, seen, swap_seq)
    finally:
        store.events.unsubscribe(recorder)
    report.seconds = time.monotonic() - started
    log.info(
        "re-index: %s (%s) is live, %s kept; %d documents, %d embedded, %d vectors reused (%.1f s)",
        report.collection,
        report.embedder,
        report.previous,
        report.documents,
        report.embedded,
        report.reused,
        report.seconds,
    )
    return report


def _complete_mirror(copier: _Copier, target: ChromaAccess) -> int:
    """Copy from the target the new model's vectors the mirror lacks for documents the target holds with
    the mirror's text: a run killed after a batch reached Chroma and before its vectors reached the
    mirror left them out, and the resumed run finds that batch done. Returns how many were written."""
    mirror = copier.mirror
    if mirror is None:
        return 0
    missing = sorted(mirror.ids(foreign=False) - mirror.ids_with_vector(copier.embedder.name))
    if not missing:
        return 0
    texts = {d.id: d.text for d in mirror.get(missing, bad_vectors="skip")}
    written = 0
    for page in target.get_ids(missing, ["documents", "metadatas", "embeddings"]):
        items = [
            (i, e)
            for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"])
            if (m or {}).get("type") in copier.mirrored and texts.get(i) == d
        ]
        if items:
            written += mirror.upsert_embeddings(items, copier.embedder.name, skip_unknown=True)
    if written:
        log.info(
            "%d vectors of %s the mirror lacked copied from %s", written, copier.embedder.name, target.collection.name
        )
    return written


def _replay(
    store: Store, copier: _Copier, recorder: _Recorder, feed: ChangeFeed | None, seen: int, until: int | None = None
) -> tuple[int, int]:
    """Copy again what was written since ``seen`` (this process's writes, and the feed's records
    up to ``until``); returns (ids copied or deleted, the feed sequence read up to)."""
    ids = dict.fromkeys(recorder.take())
    if feed is not None:
        settled = True
        for record in feed.after(seen):
            if until is not None and record.seq >= until:
                break
            if record.op != "swap":
                ids.update(dict.fromkeys(record.ids))
            # a write still under way is read again next time: the position stays before it
            settled = settled and record.settled
            if settled:
                seen = record.seq
    return (copier.copy_ids(list(ids)) if ids else 0), seen


def _replay_old(copier: _Copier, feed: ChangeFeed, seen: int, until: int) -> int:
    """After the flip: the ids of records claimed before the swap (by processes that had not seen
    it) copied from the old collection, unless a later record touched them (written to the new one)."""
    deadline = time.monotonic() + PENDING_GRACE_SECONDS
    records = feed.after(seen)
    while any(not r.settled for r in records if r.seq < until) and time.monotonic() < deadline:
        time.sleep(0.2)  # a write claimed before the swap is still under way in another process
        records = feed.after(seen)
    before = {i for r in records if r.seq < until and r.op != "swap" for i in r.ids}
    after = {i for r in records if r.seq > until for i in r.ids}
    ids = sorted(before - after)
    return copier.copy_ids(ids) if ids else 0


# ---- the specialists -------------------------------------------------------------------------------


def _specialists_name(store: Store, collection: str) -> str:
    """The specialists' collection that goes with the store's collection ``collection``."""
    base = store.settings.specialists_collection
    suffix = collection[len(store.settings.collection) :]
    return base + suffix


def _register_specialists(store: Store, embedder: Embedder, collection: str) -> int:
    """Register the specialists for ``embedder`` in the collection that goes with ``collection``
    (before the swap: a failure leaves everything as it was). Returns how many texts were embedded;
    0 without a specialists file."""
    from brain.features.specialists import SpecialistRegistry

    settings = store.settings
    if not settings.specialists_path.exists():
        return 0
    view = _EmbedderView(store, embedder)
    # the collection that goes with ``collection`` itself: on a roll-back its name is the logical one, whose
    # pointer still names the live collection of the other model
    registry = SpecialistRegistry.from_settings(
        view,
        settings.model_copy(update={"specialists_collection": _specialists_name(store, collection)}),
        follow_pointer=False,
    )
    return registry.register().embedded


class _EmbedderView:
    """The store as the specialist registry sees it, with the new embedder."""

    def __init__(self, store: Store, embedder: Embedder):
        self._store, self.embedder = store, embedder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _flip_specialists(store: Store, collection: str) -> None:
    """Point the specialists' logical name at the collection that goes with ``collection``."""
    from brain.store.live import Generation, PointerState

    logical = store.settings.specialists_collection
    name = _specialists_name(store, collection)
    if name not in {c.name for c in store.client.list_collections()}:
        return
    state = read_pointer(store.client, logical) or PointerState(live=logical)
    kept = tuple(g for g in state.kept if g.collection != name) + (Generation(name, "", 0, time.time()),)
    write_pointer(
        store.client, logical, replace(state, live=name, kept=kept, previous=state.live, swapped_at=time.time())
    )


# ---- roll-back and clean-up ----------------------------------------------------------------------


def rollback(store: Store, *, progress: bool | ProgressOptions = True) -> ReindexReport:
    """Make the collection served before the last swap live again. What was written since the swap
    is copied into it first (embedded with its model), so no write is lost."""
    state = current_state(store)
    previous = state.kept_named(state.previous) if state.previous else None
    if previous is None:
        raise ReindexError(
            f"there is no previous collection to roll back to for {store.settings.collection!r} "
            f"(it was dropped, or the store was never re-indexed)"
        )
    embedder = get_embedder_named(store.settings, previous.embedder)
    build = Build(previous.collection, previous.embedder, previous.dimension, started=time.time())
    write_pointer(store.client, store.settings.collection, replace(state, building=build))
    return run(store, embedder, progress=progress)


def _delete_collection(store: Store, name: str) -> None:
    from chromadb.errors import NotFoundError

    try:
        store.client.delete_collection(name)
    except (NotFoundError, ValueError) as exc:  # gone already (older chromadb raise ValueError)
        log.info("collection %s: %s", name, exc)


def drop_grace_seconds(store: Store) -> float:
    """How long after a swap the collection it retired stays undroppable: on a Chroma server, other
    processes serve it until their next feed check; an embedded store is this one process."""
    if store.feed_writer is None:
        return 0.0
    return max(DROP_GRACE_SECONDS, 10 * store.settings.feed_interval_seconds)


def drop_old(store: Store, *, keep: int = 0, grace_seconds: float | None = None) -> DropReport:
    """Delete the collections older than the live one beyond the ``keep`` newest, and the mirror's
    vectors of models no kept collection uses.

    The collection the last swap retired is refused for ``grace_seconds`` after the swap (default
    :func:`drop_grace_seconds`): a process that has not followed the swap yet still reads it."""
    if keep < 0:
        raise ValidationError.of("keep", f"keep must be >= 0, not {keep}")
    state = current_state(store)
    older = [g for g in state.kept if g.collection != state.live]
    older.sort(key=lambda g: g.since)
    dropped = older[: max(len(older) - keep, 0)]
    grace = drop_grace_seconds(store) if grace_seconds is None else grace_seconds
    waited = time.time() - state.swapped_at
    if state.previous in {g.collection for g in dropped} and waited < grace:
        raise ReindexError(
            f"{state.previous!r} served {store.settings.collection!r} until {waited:.0f} s ago, and processes that "
            f"have not followed the swap to {state.live!r} yet still read it; run this again in "
            f"{grace - waited:.0f} s (nothing was deleted)"
        )
    for g in dropped:
        _delete_collection(store, g.collection)
        _delete_collection(store, _specialists_name(store, g.collection))
    names = {g.collection for g in dropped}
    kept = tuple(g for g in state.kept if g.collection not in names)
    previous = state.previous if state.previous not in names else None
    write_pointer(store.client, store.settings.collection, replace(state, kept=kept, previous=previous))
    report = DropReport(sorted(names), [g.collection for g in kept])
    if store.mirror is not None:
        report.mirror_vectors = store.mirror.drop_models({g.embedder for g in kept})
    if dropped and store.settings.chroma_url is None:
        # Chroma and SQLite keep a deleted collection's files and pages: without this the directory
        # stays as large as with the collection
        try:
            report.reclaimed_bytes = reclaim_dropped(store)
        except BrainError as exc:  # the collections are deleted all the same; the space waits for the next run
            report.reclaim_error = str(exc)
            log.warning("the dropped collections' space was not given back: %s", exc)
    return report


def embedder_step(configured: str, report: ReindexReport) -> str:
    """What to do once ``report``'s collection is live, for an operator whose BRAIN_EMBEDDER is ``configured``:
    every process that opens the store must name its model, which the store now records and checks."""
    live = report.embedder
    if configured == live:
        return f"BRAIN_EMBEDDER is {live} already: restart the services that serve this store to use it"
    return (
        f"set BRAIN_EMBEDDER={live} (in .env or the services' environment; it is {configured} here) and restart "
        f"the services: the store opens with no other model now"
    )


def open_live_store(settings: Settings) -> Store:
    """The store opened with the embedder its live collection records, whatever ``BRAIN_EMBEDDER``
    says (a re-index reads the live collection with its own model); the mirror and, with a Chroma
    server, the change feed attached as for serving (:func:`brain.app.core.open_store`)."""
    from brain.app.core import open_store
    from brain.store.chroma import open_client

    recorded = live_embedder_name(open_client(settings, create=False), settings.collection)
    if recorded is not None and recorded != settings.embedder:
        settings = settings.model_copy(update={"embedder": recorded})
    return open_store(settings, create=False)


#: the embedder ``provider/model`` names, with the other embedder settings (Ollama's host, the batch size)
embedder_named = get_embedder_named


__all__ = [
    "BATCH",
    "DropReport",
    "ReindexError",
    "ReindexPlan",
    "ReindexReport",
    "current_state",
    "drop_grace_seconds",
    "drop_old",
    "embedder_named",
    "embedder_step",
    "live_embedder_name",
    "open_live_store",
    "plan",
    "rollback",
    "run",
]
