"""Keeping the store and the mirror in step: catch-up, verification, restore.

- :func:`catch_up` (also :func:`sync_mirror`) makes the mirror match the store for the mirrored types:
  rows added or rewritten where text, metadata or the configured model's vector differ (vectors: by
  more than :data:`VECTOR_TOLERANCE`, Chroma's own rounding; the vectors Chroma holds are reused, so
  nothing is embedded), and our rows whose documents are gone deleted. Rows engram wrote itself
  (foreign, see :mod:`brain.features.mirror.mapping`) are left alone. It compares content, not counts: each
  document's hash (:mod:`brain.features.mirror.fingerprint`) against the one the mirror stored with the row,
  and only rows whose hash is missing or different are decoded and compared exactly, so a write
  Chroma took and the mirror missed (an update in place, a delete plus an add) is found at about
  the cost of reading the store. The repair is one mirror transaction (one per
  :data:`REPAIR_BATCH` rows when more differ, e.g. a new mirror). Running it twice changes nothing
  the second time. Every entry point that opens a brain for serving runs it
  (:func:`brain.app.startup.startup`, ``brain serve``). A store that looks lost, much smaller than the
  mirror, created again or half restored is refused before anything is written
  (:mod:`brain.features.mirror.guard`): it never deletes the mirror's rows unless told to (``force``).
- :func:`verify_mirror` reports every difference without writing.
- :func:`restore_from_mirror` writes the mirror's documents of every type back into a store (e.g. a
  fresh one after Chroma was lost) with their ids, texts and metadata (a turn keeps its
  conversation, role and ``turn_index``; a summary its ``summary_index`` and ``turn_range``),
  reusing the stored vectors of the store's embedder and embedding only the documents that have
  none. Foreign rows come back as memories
  (``include_foreign=False`` leaves them out). Into a store that already holds some of the ids, the
  store's own upsert rules apply (a memory written again merges with the existing one). A row whose
  stored vector is unreadable (NaN, a short BLOB) is embedded again from its text, the authority, and
  listed. The mirror carries a marker while a restore is under way, so that an interrupted one is
  completed by running it again and nothing syncs the mirror from the half-restored store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from brain.features.mirror.fingerprint import content_hash, without_use
from brain.features.mirror.guard import RESTORE_KEY, check_deletions, record_store, restore_finished, restore_started
from brain.features.mirror.store import EngramMirror, MirrorDocument
from brain.model.errors import EmbeddingModelMismatch, ValidationError
from brain.store.mirror_link import mirror_paused
from brain.store.reads import page_documents

if TYPE_CHECKING:
    from brain.model.results import Document

if TYPE_CHECKING:  # the store never imports the mirror: the mirror follows its write events
    from brain.store import Store

log = logging.getLogger(__name__)

PAGE = 1000
#: rows rewritten per mirror transaction by a catch-up: bounds the documents (and vectors) held in memory
REPAIR_BATCH = 10_000


@dataclass
class SyncReport:
    """What a catch-up did. ``rehashed``: rows found equal to their documents whose content hash was
    missing or stale (a file from before hashes were kept, a row engram touched), now recorded."""

    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    foreign: int = 0
    seconds: float = 0.0
    rehashed: int = 0

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.deleted

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "changed": self.changed}

    def __str__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        rehashed = f" ({self.rehashed} content hashes recorded)" if self.rehashed else ""
        return (
            f"mirror sync: {self.added} added, {self.updated} updated, {self.deleted} deleted, "
            f"{self.unchanged} unchanged{rehashed}; {self.foreign} rows written by engram left alone "
            f"({self.seconds:.1f} s)"
        )


@dataclass
class VerifyReport:
    checked: int = 0
    missing: list[str] = field(default_factory=list)  # in the store, not in the mirror
    extra: list[str] = field(default_factory=list)  # our rows in the mirror whose documents are gone
    text: list[str] = field(default_factory=list)  # texts differ
    metadata: list[str] = field(default_factory=list)  # metadata differ
    vectors: list[str] = field(default_factory=list)  # the model's vector differs or is absent
    foreign: list[str] = field(default_factory=list)  # rows engram wrote itself (not a difference)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.text or self.metadata or self.vectors)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


@dataclass
class RestoreReport:
    """``by_type``: documents restored per type (rows engram wrote itself count as memories)."""

    restored: int = 0
    reused_vectors: int = 0
    embedded: int = 0
    foreign: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    by_type: dict[str, int] = field(default_factory=dict)
    #: rows whose stored vector could not be read, with why: restored with their text embedded again
    bad_vectors: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


#: Chroma hands back a stored float32 vector a few units in the last place away from what it was given
#: (1.5e-8 on unit vectors), so "the same vector" means equal to within this, relative to its largest value.
VECTOR_TOLERANCE = 1e-6


def _same_vector(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape:
        return False
    scale = max(1.0, float(np.abs(a).max(initial=0.0)))
    return bool(np.abs(a - b).max(initial=0.0) <= VECTOR_TOLERANCE * scale)


def _check_models(store: Store, mirror: EngramMirror) -> None:
    if store.embedder.name != mirror.model:
        raise EmbeddingModelMismatch(
            f"the mirror {mirror.path} is opened for model {mirror.model} but the store embeds with "
            f"{store.embedder.name}; open the mirror with the store's embedder name"
        )


def _store_pages(store: Store, types: Sequence[str], page: int) -> Iterator[list[Document]]:
    """The store's documents of ``types`` with their vectors, a page at a time. One unfiltered pass:
    a ``where`` on the type would make Chroma filter the whole collection again for every page."""
    wanted = set(types)
    for got in store.chroma.pages(None, ["documents", "metadatas", "embeddings"], page_size=page):
        docs = [doc for doc in page_documents(got) if doc.metadata.get("type") in wanted]
        if docs:
            yield docs


def _compare(doc: Document, mirrored: MirrorDocument | None) -> str | None:
    """None when the mirror row equals the document, else the first kind of difference."""
    if mirrored is None:
        return "missing"
    if mirrored.foreign:
        return "metadata"
    if mirrored.text != doc.text:
        return "text"
    if without_use(mirrored.metadata) != without_use(doc.metadata):
        return "metadata"
    if not _same_vector(mirrored.embedding, doc.embedding):
        return "vectors"
    return None


def store_ids(store: Store, types: Sequence[str], page: int) -> set[str]:
    """The ids of the store's documents of ``types`` (metadata only: no texts, no vectors)."""
    wanted = set(types)
    return {
        i
        for got in store.chroma.pages(None, ["metadatas"], page_size=page)
        for i, m in zip(got["ids"], got["metadatas"])
        if (m or {}).get("type") in wanted
    }


def catch_up(
    store: Store,
    mirror: EngramMirror,
    *,
    types: Sequence[str] | None = None,
    page: int = PAGE,
    force: bool = False,
) -> SyncReport:
    """Make the mirror match the store for ``types`` (default: the store's BRAIN_MIRROR_TYPES), repairing
    exactly the rows that differ; idempotent. See the module docstring.

    Before anything is written, a store that looks lost, much smaller than the mirror, created again or
    half restored raises :class:`~brain.model.errors.StoreLooksLost` rather than deleting the mirror's rows
    (:mod:`brain.features.mirror.guard`); ``force`` says the store is right all the same. The check uses the ids
    the pass has seen; only when more than :data:`REPAIR_BATCH` rows differ, so that some are written
    before the pass ends, does it read the store's ids first."""
    _check_models(store, mirror)
    types = store.settings.mirrored_types if types is None else types
    started = time.perf_counter()
    report = SyncReport()
    stored = mirror.content_hashes()

    def check(present: set[str]) -> None:  # before the first write (brain.features.mirror.guard)
        if stored:
            check_deletions(
                store,
                mirror,
                mirror_rows=len(stored),
                would_delete=len(stored.keys() - present),
                store_rows=len(present),
                force=force,
            )

    seen: set[str] = set()
    repair = _Repair(mirror)
    for docs in _store_pages(store, tuple(types), page):
        suspects: dict[str, tuple[Any, bytes]] = {}
        for doc in docs:
            seen.add(doc.id)
            digest = content_hash(doc.text, doc.metadata, doc.embedding)
            if stored.get(doc.id) == digest:
                report.unchanged += 1
            else:
                suspects[doc.id] = (doc, digest)
        if not suspects:
            continue
        # an unreadable stored vector differs from the store's: the row is rewritten with it
        mirrored = {d.id: d for d in mirror.get(list(suspects), bad_vectors="skip")}
        for doc_id, (doc, digest) in suspects.items():
            difference = _compare(doc, mirrored.get(doc_id))
            if difference is None:  # equal, but the hash was missing or stale
                report.unchanged += 1
                report.rehashed += 1
                repair.hashes.append((doc_id, digest))
            else:
                report.added += difference == "missing"
                report.updated += difference != "missing"
                repair.docs.append(doc)
        if repair.full and not repair.written:  # many rows differ: the ids of the whole store first
            check(store_ids(store, tuple(types), page))
        repair.flush_if_full()
    check(seen)
    repair.gone = sorted(set(stored) - seen)
    repair.flush()
    record_store(mirror, store)
    if force:
        mirror.set_meta(RESTORE_KEY, None)  # the store as it is was confirmed: no restore to finish
    report.deleted = repair.deleted
    report.foreign = len(mirror.ids(foreign=True))
    report.seconds = time.perf_counter() - started
    log.info("%s", report)
    return report


@dataclass
class _Repair:
    """A catch-up's pending mirror writes, written in one transaction per :data:`REPAIR_BATCH` rows."""

    mirror: EngramMirror
    docs: list[object] = field(default_factory=list)
    hashes: list[tuple[str, bytes]] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    deleted: int = 0
    written: bool = False  # a transaction was committed

    @property
    def full(self) -> bool:
        return len(self.docs) + len(self.hashes) >= REPAIR_BATCH

    def flush_if_full(self) -> None:
        if self.full:
            self.flush()

    def flush(self) -> None:
        if not (self.docs or self.hashes or self.gone):
            return
        self.written = True
        with self.mirror.transaction():
            if self.gone:
                self.deleted += self.mirror.delete(self.gone)
            if self.docs:
                self.mirror.upsert(self.docs)
            if self.hashes:
                self.mirror.set_content_hashes(self.hashes)
        self.docs, self.hashes, self.gone = [], [], []


#: the catch-up under its command's name (``brain mirror sync``)
sync_mirror = catch_up


def verify_mirror(
    store: Store, mirror: EngramMirror, *, types: Sequence[str] | None = None, page: int = PAGE
) -> VerifyReport:
    """Every difference between the store's documents of ``types`` (default: the store's
    BRAIN_MIRROR_TYPES) and the mirror, without writing."""
    _check_models(store, mirror)
    types = store.settings.mirrored_types if types is None else types
    report = VerifyReport()
    seen: set[str] = set()
    for docs in _store_pages(store, tuple(types), page):
        mirrored = {d.id: d for d in mirror.get([d.id for d in docs], bad_vectors="skip")}
        for doc in docs:
            seen.add(doc.id)
            report.checked += 1
            row = mirrored.get(doc.id)
            if row is None:
                report.missing.append(doc.id)
                continue
            if row.foreign:
                report.metadata.append(doc.id)
                continue
            if row.text != doc.text:
                report.text.append(doc.id)
            if without_use(row.metadata) != without_use(doc.metadata):
                report.metadata.append(doc.id)
            if not _same_vector(row.embedding, doc.embedding):
                report.vectors.append(doc.id)
    report.extra = sorted(mirror.ids(foreign=False) - seen)
    report.foreign = sorted(mirror.ids(foreign=True) - seen)
    return report


def _restorable(doc: MirrorDocument, reuse: bool, dimension: int) -> tuple[dict[str, object], bool]:
    meta = dict(doc.metadata)
    meta.pop("ts_epoch", None)  # derived from timestamp by the store
    item: dict[str, object] = {**meta, "id": doc.id, "text": doc.text}
    vector = doc.embedding
    if reuse and vector is not None and vector.shape == (dimension,) and np.any(vector):
        item["embedding"] = vector
        return item, True
    return item, False


def restore_from_mirror(
    store: Store, mirror: EngramMirror, *, include_foreign: bool = True, batch: int = 500
) -> RestoreReport:
    """Write the mirror's documents into ``store``; see the module docstring. Returns what happened."""
    started = time.perf_counter()
    report = RestoreReport()
    reuse = store.embedder.name == mirror.model
    if not reuse:
        log.warning(
            "the mirror holds %s vectors but the store embeds with %s: every document will be embedded again",
            mirror.model,
            store.embedder.name,
        )
    pending: list[dict[str, Any]] = []
    pending_stats = [0, 0, 0]  # reused, embedded, foreign
    pending_kinds: list[tuple[bool, bool]] = []  # (vector reused, foreign) per pending item
    by_type: dict[str, int] = {}

    def flush() -> None:
        if not pending:
            return
        try:
            store.upsert_docs(pending)
        except ValidationError as exc:  # keep the valid documents, report the others
            bad = {p.item for p in exc.problems if isinstance(p.item, int)}
            if not bad and len(pending) == 1:
                bad = {0}
            if not bad:
                raise
            for i in sorted(bad, reverse=True):
                reason = "; ".join(p.message for p in exc.problems if p.item == i) or str(exc)
                report.skipped.append((pending[i]["id"], reason))
                log.warning("restore from mirror: skipped %r: %s", pending[i]["id"], reason)
                kind = pending_kinds.pop(i)
                pending.pop(i)
                pending_stats[0 if kind[0] else 1] -= 1
                pending_stats[2] -= int(kind[1])
            if pending:
                store.upsert_docs(pending)
        report.restored += len(pending)
        for item in pending:
            by_type[item["type"]] = by_type.get(item["type"], 0) + 1
        report.reused_vectors += pending_stats[0]
        report.embedded += pending_stats[1]
        report.foreign += pending_stats[2]
        pending.clear()
        pending_kinds.clear()
        pending_stats[:] = [0, 0, 0]

    # until the last row is written, nothing may sync the mirror from the half-restored store
    restore_started(mirror, store)
    # the documents come from the mirror: writing them back into it would turn rows engram wrote
    # itself into brain rows, so the store's write-through is paused while restoring
    with mirror_paused(store):
        for doc in mirror.iter_documents(batch=batch, bad_vectors="skip"):
            if doc.foreign and not include_foreign:
                continue
            if not doc.text.strip():
                report.skipped.append((doc.id, "empty text"))
                log.warning("restore from mirror: skipped %r (empty text)", doc.id)
                continue
            if doc.vector_problem is not None:
                report.bad_vectors.append((doc.id, doc.vector_problem))
                log.warning(
                    "restore from mirror: the stored vector of %r is unreadable (%s); embedding its text",
                    doc.id,
                    doc.vector_problem,
                )
            item, reused = _restorable(doc, reuse, store.dimension)
            pending.append(item)
            pending_kinds.append((reused, doc.foreign))
            pending_stats[0 if reused else 1] += 1
            pending_stats[2] += int(doc.foreign)
            if len(pending) >= batch:
                flush()
        flush()
    restore_finished(mirror, store)
    report.by_type = {t: by_type[t] for t in sorted(by_type)}
    report.seconds = time.perf_counter() - started
    log.info(
        "restore from mirror: %d documents, %d stored vectors reused, %d embedded, %d skipped (%.1f s)",
        report.restored,
        report.reused_vectors,
        report.embedded,
        len(report.skipped),
        report.seconds,
    )
    return report
