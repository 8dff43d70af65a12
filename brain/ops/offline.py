"""The jobs that need the store itself, each run in a process of its own with the store (or its mirror) opened
for it: creating the store, loading the knowledge base, rebuilding the mirror, restoring the
store from it, re-indexing and saving the index snapshot.

While ``brain serve`` holds the data directory these are :class:`~brain.model.errors.StoreLocked`, with the
reason: :data:`NEEDS_THE_STORE` names, for each, why it cannot go through the server. Everything else goes
through :mod:`brain.ops` whoever holds the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from brain.app.core import Brain
from brain.app.core import open as open_brain
from brain.config import Settings
from brain.model.errors import StoreLocked, StoreNotFound
from brain.ops.local import LocalOperations
from brain.store.indexes import index_sizes
from brain.store.indexes import save_index_snapshot as save_store_snapshot

if TYPE_CHECKING:
    from brain.app.reindex import DropReport, ReindexPlan, ReindexReport
    from brain.app.restore import RebuildReport, RecoveryReport
    from brain.app.startup import StartupReport
    from brain.features.ingest import IngestReport
    from brain.features.mirror import KeywordHit
    from brain.model.results import Hit

T = TypeVar("T")

#: why each job cannot be sent to a running server
NEEDS_THE_STORE: dict[str, str] = {
    "init": "the server created the store and loaded the persona when it started",
    "ingest": "ingesting reads and keys files by their path in this project; stop the server, or send the "
    "documents to its POST /v1/docs",
    "mirror rebuild": "it replaces the mirror file the server writes to",
    "restore": "it rebuilds the Chroma store the server has open",
    "reindex": "re-embedding every document switches the collection the embedded store serves; with "
    "BRAIN_CHROMA_URL it runs beside the workers",
    "index snapshot": "the server saves its index snapshot itself when it stops",
}


@contextmanager
def _refused_beside_a_server(job: str) -> Iterator[None]:
    """Beside a running server, the store's lock error says why ``job`` cannot go through that server."""
    try:
        yield
    except StoreLocked as locked:
        if locked.server_url is None:
            raise
        raise StoreLocked(
            f"`brain {job}` needs the store itself ({NEEDS_THE_STORE[job]}), and `brain serve` (process "
            f"{locked.holder}) holds it, serving {locked.server_url}: stop the server first",
            holder=locked.holder,
            server_url=locked.server_url,
        ) from None


@contextmanager
def _own_brain(settings: Settings, job: str, *, create: bool = True) -> Iterator[Brain]:
    """A Brain of this process for ``job``."""
    with _refused_beside_a_server(job):
        brain = open_brain(settings, create=create, start_worker=False)
    with brain:
        yield brain


def _with_brain(
    settings: Settings, job: str, work: Callable[[Brain], T], *, create: bool = True, on: LocalOperations | None = None
) -> T:
    """``work`` on the Brain of ``on`` (operations this process opened already), else on one opened for it."""
    if on is not None:
        return work(on.brain)
    with _own_brain(settings, job, create=create) as brain:
        return work(brain)


def initialise(
    settings: Settings, *, persona_path: Path | None = None, on: LocalOperations | None = None
) -> StartupReport:
    """Create the store (or open it) and load the persona (:func:`brain.app.startup.startup`); ``on``: on the store
    those operations opened."""
    from brain.app.startup import startup

    if on is not None:
        return startup(brain=on.brain, persona_path=persona_path)
    with _refused_beside_a_server("init"):
        return startup(settings, persona_path=persona_path)


def ingest(
    settings: Settings,
    paths: Sequence[Path],
    *,
    prune: bool = False,
    dry_run: bool = False,
    progress: bool = False,
    on: LocalOperations | None = None,
) -> IngestReport:
    """Add or update knowledge-base files (:func:`brain.features.ingest.ingest_paths`)."""
    from brain.features.ingest import ingest_paths

    return _with_brain(
        settings,
        "ingest",
        lambda b: ingest_paths(b.store, list(paths), prune=prune, dry_run=dry_run, progress=progress),
        on=on,
    )


def rebuild_mirror(settings: Settings, *, force: bool = False) -> RebuildReport:
    """Move the mirror file aside and rebuild it from the store (:func:`brain.app.restore.rebuild_mirror`)."""
    from brain.app.restore import rebuild_mirror as rebuild

    return _with_brain(settings, "mirror rebuild", lambda b: rebuild(b.store, force=force))


def restore(settings: Settings, *, persona_path: Path | None = None, kb_paths: Sequence[Path] = ()) -> RecoveryReport:
    """Rebuild the store from the mirror and the files (:func:`brain.app.restore.recover_store`)."""
    from brain.app.restore import recover_store

    return _with_brain(
        settings, "restore", lambda b: recover_store(b.store, persona_path=persona_path, kb_paths=list(kb_paths))
    )


def save_index_snapshot(settings: Settings) -> tuple[Path | None, dict[str, int]]:
    """Save the in-process indexes to their snapshot: (where, None when snapshots are off; documents per index)."""
    return _with_brain(
        settings, "index snapshot", lambda b: (save_store_snapshot(b.store), index_sizes(b.store)), create=False
    )


def recall_mirror(settings: Settings, query: str, k: int, *, keyword: bool = False) -> list[Hit | KeywordHit]:
    """Search the mirror file alone (read beside any process that writes it; Chroma is not opened): by the stored
    vectors, or with ``keyword`` by full text."""
    from brain.features.mirror import EngramMirror
    from brain.wiring import get_embedder

    if not settings.mirror_file.is_file():
        raise StoreNotFound(
            f"there is no mirror at {settings.mirror_file}; `brain init` creates the store and its "
            f"mirror, `brain mirror sync` fills it from an existing store"
        )
    embedder = get_embedder(settings)
    with EngramMirror(settings.mirror_file, embedder.name, batch_size=settings.mirror_batch_size) as mirror:
        found = mirror.keyword_recall(query, k) if keyword else mirror.recall(embedder.embed_query(query), k)
    return list(found)


def reindex(
    settings: Settings,
    *,
    embedder_name: str | None = None,
    dry_run: bool = False,
    rollback: bool = False,
    drop_old: bool = False,
    keep: int | None = None,
    batch: int = 256,
    progress: bool = True,
) -> ReindexPlan | ReindexReport | DropReport:
    """Switch the store to another embedding model (blue/green), roll back, or drop old collections
    (:mod:`brain.app.reindex`); one of them per call."""
    from brain.app import reindex as library

    with _refused_beside_a_server("reindex"):
        store = library.open_live_store(settings)
    try:
        if drop_old or keep is not None:
            return library.drop_old(store, keep=keep or 0)
        if rollback:
            report = library.rollback(store)
        else:
            embedder = library.embedder_named(settings, embedder_name or settings.embedder)
            if dry_run:
                return library.plan(store, embedder)
            report = library.run(store, embedder, batch=batch, progress=progress)
        report.next_step = library.embedder_step(settings.embedder, report)
        return report
    finally:
        store.close()


__all__ = [
    "NEEDS_THE_STORE",
    "ingest",
    "initialise",
    "rebuild_mirror",
    "recall_mirror",
    "reindex",
    "restore",
    "save_index_snapshot",
]
