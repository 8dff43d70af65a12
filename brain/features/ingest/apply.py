"""Applying the plans: embedding new texts in large groups across files (re-using stored vectors of
the same text), writing each group, then deleting stale documents; :func:`ingest_paths` runs it all."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from brain.features.ingest.files import collect_files, hash_text, legacy_name_under, name_under, older_names
from brain.features.ingest.plan import FilePlan, embed_groups, plan_file, scan_ingested, would_embed
from brain.features.ingest.report import IngestReport
from brain.rules.chunking import TokenChunker
from brain.text.progress import ProgressOptions, open_progress

if TYPE_CHECKING:
    from brain.store import Store


#: new texts embedded per call, across files; each group is then written in one call. (Writing in a
#: thread while the next group is embedded was measured: no gain, the 2 cores are busy embedding.)
EMBED_GROUP = 1024


def _vectors(
    store: Store, group: list[FilePlan], text_index: dict[str, str], report: IngestReport, progress: Any
) -> dict[str, object]:
    """``{kb_text_hash: vector}`` for every document the group writes: stored vectors of identical
    texts where there are any, the embedder for the rest (unique texts only, one embedder batch at a
    time so that ``progress`` moves with each)."""
    wanted: dict[str, str] = {}  # text hash -> text
    docs_per_text: dict[str, int] = {}
    for plan in group:
        for d in plan.new + plan.refresh:
            wanted.setdefault(d["kb_text_hash"], d["text"])
            docs_per_text[d["kb_text_hash"]] = docs_per_text.get(d["kb_text_hash"], 0) + 1
    sources: dict[str, str] = {}  # stored id -> text hash
    for plan in group:
        for d in plan.refresh:
            sources[d["id"]] = d["kb_text_hash"]
    covered = set(sources.values())
    for text_hash in wanted:
        if text_hash in text_index and text_hash not in covered:
            sources[text_index[text_hash]] = text_hash
            covered.add(text_hash)
    vectors: dict[str, object] = {}
    if sources:
        for doc in store.get(list(sources), include_embeddings=True):
            source_hash = sources.get(doc.id)
            if source_hash is not None and hash_text(doc.text) == source_hash and doc.embedding is not None:
                vectors[source_hash] = doc.embedding
    progress.update(sum(docs_per_text[h] for h in vectors))
    # shortest first: each batch pads to a length close to its longest text
    todo = sorted(((h, t) for h, t in wanted.items() if h not in vectors), key=lambda item: len(item[1]))
    size = max(1, int(store.embedder.batch_size))
    for start in range(0, len(todo), size):
        batch = todo[start : start + size]
        embedded = store.embedder.embed_documents([t for _, t in batch])
        report.embedded += len(batch)
        for (text_hash, _), vector in zip(batch, embedded):
            vectors[text_hash] = vector
        progress.update(sum(docs_per_text[h] for h, _ in batch))
    return vectors


def ingest_paths(
    store: Store,
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    prune: bool = False,
    dry_run: bool = False,
    progress: bool | ProgressOptions = False,
    chunker: TokenChunker | None = None,
) -> IngestReport:
    """Make the store's ingested documents match the files under ``paths`` (files or directories,
    recursively; hidden files and folders are ignored). See the module docstring for the rules and
    the report's counts. Interrupting it (Ctrl-C) is safe: the next run completes the work."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    chunker = chunker or TokenChunker.from_settings(store.settings)
    report = IngestReport(dry_run=dry_run)
    files, directories = collect_files(paths, report)
    stored = scan_ingested(store)
    text_index = {m["kb_text_hash"]: doc_id for docs in stored.values() for doc_id, m in docs.items()}
    older = older_names(files, stored, report)

    plans: list[FilePlan] = []
    taken: set[str] = set()  # older names whose documents a file of this run took over (or keeps, if bad)
    with open_progress(progress, total=len(files), desc="reading", unit="file") as bar:
        for source in files:
            groups = [(name, exact, stored[name]) for name, exact in older.get(source.kb_file, [])]
            errors = len(report.errors)
            plan, claimed = plan_file(source, stored.get(source.kb_file, {}), groups, chunker, report)
            taken.update(claimed)
            if len(report.errors) > errors:  # a bad file keeps everything it had, under any name
                taken.update(name for name, _ in older.get(source.kb_file, []))
            if plan is not None:
                plans.append(plan)
            bar.update(1)

    total = sum(len(p.new) + len(p.refresh) for p in plans)
    group_size = max(EMBED_GROUP, store.embedder.batch_size)
    with open_progress(
        progress, total=total, desc="planning" if dry_run else "embedding and writing", unit="doc"
    ) as bar:
        if dry_run:
            for group in embed_groups(plans, group_size):
                report.embedded += would_embed(group, text_index)
                for plan in group:
                    _count(report, plan, len(plan.stale))
                bar.update(sum(len(plan.new) + len(plan.refresh) for plan in group))
        else:
            for group in embed_groups(plans, group_size):
                try:
                    vectors = _vectors(store, group, text_index, report, bar)
                except Exception as exc:  # the embedder or the store failed: report every file of the batch
                    for plan in group:
                        report.add_error(plan.kb_file, None, f"embedding failed: {_describe(exc)}; file not updated")
                    continue
                _write_group(store, group, vectors, text_index, report)

    seen = {source.kb_file for source in files} | taken
    report.missing_files = sorted(
        name
        for name, docs in stored.items()
        if name not in seen
        and (
            any(name_under(name, d.name) for d in directories)
            or (
                not any("kb_names" in m for m in docs.values()) and any(legacy_name_under(name, d) for d in directories)
            )
        )
    )
    report.pruned = prune
    if prune and report.missing_files:
        gone = [doc_id for name in report.missing_files for doc_id in stored[name]]
        if dry_run:
            report.removed += len(gone)
        else:
            try:
                report.removed += store.delete(ids=gone)
            except Exception as exc:
                report.add_error(report.missing_files[0], None, f"pruning failed: {_describe(exc)}")
    return report


def _count(report: IngestReport, plan: FilePlan, removed: int) -> None:
    if plan.category == "migrated":  # the same documents under new ids: moved, not added and removed
        moved = len(plan.new) + len(plan.refresh)
        report.migrated += moved
        report.unchanged += plan.kept - len(plan.refresh)
        report.removed += max(0, removed - len(plan.new))  # copies under several names
        report.files_migrated += 1
        return
    report.added += len(plan.new)
    report.unchanged += plan.kept
    report.removed += removed
    if plan.category == "new":
        report.files_new += 1
    else:
        report.updated += 1


def _write_group(
    store: Store, group: list[FilePlan], vectors: Mapping[str, object], text_index: dict[str, str], report: IngestReport
) -> None:
    """Write the group's new and refreshed documents in one call (one Chroma transaction instead of one
    per file), then delete each file's stale documents: every file's new documents are stored before
    any of its old ones go. If the shared write fails, each file is written on its own so that one bad
    file (or a passing failure) does not hold back the others."""
    docs = [{**d, "embedding": vectors[d["kb_text_hash"]]} for plan in group for d in plan.new + plan.refresh]
    if len(group) > 1 and docs:
        try:
            store.upsert_docs(docs)
        except Exception:  # isolate the failure below, file by file
            pass
        else:
            for plan in group:
                _finish_file(store, plan, text_index, report)
            return
    for plan in group:
        _write_file(store, plan, vectors, text_index, report)


def _write_file(
    store: Store, plan: FilePlan, vectors: Mapping[str, object], text_index: dict[str, str], report: IngestReport
) -> None:
    """One file: its new and refreshed documents first, then its stale ones are deleted."""
    try:
        docs = [{**d, "embedding": vectors[d["kb_text_hash"]]} for d in plan.new + plan.refresh]
        if docs:
            store.upsert_docs(docs)
    except Exception as exc:  # the store refused or failed: this file stays as it was (or half-done)
        report.add_error(plan.kb_file, None, f"writing to the store failed: {_describe(exc)}; re-run to complete it")
        return
    _finish_file(store, plan, text_index, report)


def _finish_file(store: Store, plan: FilePlan, text_index: dict[str, str], report: IngestReport) -> None:
    """After a file's documents are written: delete its stale ones and count it."""
    for d in plan.new:
        text_index[d["kb_text_hash"]] = d["id"]
    try:
        removed = store.delete(ids=plan.stale) if plan.stale else 0
    except Exception as exc:
        report.add_error(
            plan.kb_file, None, f"removing its old documents failed: {_describe(exc)}; re-run to complete it"
        )
        return
    _count(report, plan, removed)


def _describe(exc: BaseException) -> str:
    from brain.model.errors import BrainError

    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, BrainError) else f"{type(exc).__name__}: {text}"
