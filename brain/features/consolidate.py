"""Memory consolidation: near-duplicate memories of one scope merged into one.

Two memories are near-duplicates when the cosine similarity of their stored vectors is above the
threshold (``BRAIN_CONSOLIDATE_THRESHOLD``, 0.92). Scopes never mix: an entity's memory is never
merged into a global one or another entity's.

Clustering is greedy and anchored, so every merged memory is itself close to the one it is merged
into (no chains A~B~C where A and C differ): memories are visited best first — highest importance,
then earliest creation, then id — and each one not yet merged keeps its text and id and absorbs every
later memory above the threshold. Memories of a supersession history stay as they are: a superseded one is
left out, and one that superseded another may absorb duplicates but is never absorbed. The kept memory and
those it absorbs merge by the memory rule (:func:`brain.rules.memories.merge_near_duplicates`): the kept text
and vector, every tag (its own first), the highest importance, the earliest creation, the latest timestamp and
use; ``merged_from`` lists the ids it absorbed (and those they had absorbed).

The whole set of new metadata is validated before anything is written; then the kept memories are
written in one batch and only after that the merged ones deleted, so an interruption can leave a
duplicate behind but never loses one. Cost: a blocked similarity matrix per scope, O(n²·d).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from brain.model.errors import Problem, ValidationError, joined
from brain.model.schemas import PART_OF_KEY, DocType, MemoryMetadata, format_timestamp, read_stored
from brain.model.vectors import unit_rows
from brain.rules.memories import created, is_part, merge_near_duplicates, merged_fields

if TYPE_CHECKING:
    from brain.model.results import Document
    from brain.store import Store

log = logging.getLogger(__name__)

BLOCK_ROWS = 1024


@dataclass
class Merge:
    """One kept memory and the memories merged into it (``similarities[i]`` is ``merged_ids[i]``'s
    cosine similarity to the kept one)."""

    scope: str
    kept_id: str
    kept_text: str
    merged_ids: list[str]
    merged_texts: list[str]
    similarities: list[float]
    tags: list[str]
    importance: int
    created_at: str
    timestamp: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class ConsolidationReport:
    threshold: float
    dry_run: bool
    scanned: int
    merges: list[Merge] = field(default_factory=list)
    #: memories left alone because their stored metadata breaks the schema: ``{id: why}``
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def removed(self) -> int:
        return sum(len(m.merged_ids) for m in self.merges)

    def to_dict(self) -> dict[str, object]:
        return {
            "threshold": self.threshold,
            "dry_run": self.dry_run,
            "scanned": self.scanned,
            "skipped": self.skipped,
            "removed": self.removed,
            "merges": [m.to_dict() for m in self.merges],
        }


def consolidate_memories(store: Store, *, threshold: float | None = None, dry_run: bool = False) -> ConsolidationReport:
    """Find (and unless ``dry_run``, apply) the merges described in the module docstring; ``threshold``
    defaults to ``BRAIN_CONSOLIDATE_THRESHOLD``."""
    threshold = store.settings.consolidate_threshold if threshold is None else threshold
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise ValidationError.of("threshold", f"threshold must be a number in (0, 1], got {threshold!r}")
    # parts (chunks of a long memory, rows of a vector index) are not memories, and a memory that has
    # parts is described by them too: merging either would orphan or misdescribe the parts
    stored = store.get(type=DocType.MEMORY, include_embeddings=True)
    whole = {d.metadata[PART_OF_KEY] for d in stored if is_part(d.metadata)}
    # a superseded memory is history, not a duplicate of what replaced it (see _plan_scope for the rest)
    docs = [
        d for d in stored if not is_part(d.metadata) and d.id not in whole and d.metadata.get("status") != "superseded"
    ]
    skipped: dict[str, str] = {}
    metas = {doc.id: meta for doc in docs if (meta := _readable(doc, skipped)) is not None}
    docs = [d for d in docs if d.id in metas]
    report = ConsolidationReport(threshold=float(threshold), dry_run=dry_run, scanned=len(docs), skipped=skipped)
    by_scope: dict[str, list[Document]] = {}
    for doc in docs:
        by_scope.setdefault(metas[doc.id].scope, []).append(doc)
    plans: list[tuple[Merge, Document, list[Document]]] = []
    for scope in sorted(by_scope):
        group = sorted(by_scope[scope], key=lambda d: (-metas[d.id].importance, created(metas[d.id]), d.id))
        plans.extend(_plan_scope(scope, group, metas, float(threshold)))
    report.merges = [merge for merge, _, _ in plans]
    if dry_run or not plans:
        return report
    writes: list[dict[str, object]] = []
    problems: list[Problem] = []
    for n, (_, keeper, members) in enumerate(plans):
        try:
            merged = merge_near_duplicates(metas[keeper.id], {d.id: metas[d.id] for d in members})
        except ValidationError as exc:
            problems.extend(Problem(p.field, f"{keeper.id}: {p.message}", n) for p in exc.problems)
            continue
        fields = {k: v for k, v in merged.to_chroma().items() if k not in ("ts_epoch", "type")}
        writes.append(
            {
                "id": keeper.id,
                "text": keeper.text,
                "type": DocType.MEMORY.value,
                "embedding": keeper.embedding,
                **fields,
            }
        )
    if problems:
        raise ValidationError(
            "consolidation would write invalid metadata; nothing was changed: " + joined(problems), problems
        )
    store.upsert_docs(writes)
    store.delete([doc_id for merge in report.merges for doc_id in merge.merged_ids])
    return report


def _readable(doc: Document, skipped: dict[str, str]) -> MemoryMetadata | None:
    """``doc``'s metadata as the schema reads it, or None (noted in ``skipped``) when its stored
    metadata breaks the schema (written by an older version or directly through Chroma): merging it
    would carry or silently repair values nobody checked, so it is left alone."""
    meta, problems = read_stored(DocType.MEMORY, doc.metadata)
    problems.pop("entity", None)  # a global memory of older versions naming an entity: read as global
    if meta is None or problems:
        skipped[doc.id] = "; ".join(problems.values())
        log.warning("memory %s is left out of consolidation: %s", doc.id, skipped[doc.id])
        return None
    assert isinstance(meta, MemoryMetadata)  # read with the memory schema
    return meta


def _plan_scope(
    scope: str, group: list[Document], metas: dict[str, MemoryMetadata], threshold: float
) -> list[tuple[Merge, Document, list[Document]]]:
    n = len(group)
    if n < 2:
        return []
    x = unit_rows(np.stack([np.asarray(d.embedding, dtype=np.float32) for d in group]))
    neighbours: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for start in range(0, n, BLOCK_ROWS):
        sims = x[start : start + BLOCK_ROWS] @ x.T
        rows, cols = np.nonzero(sims > threshold)
        for r, c in zip(rows.tolist(), cols.tolist()):
            i = start + r
            if c > i:  # each pair once, from the better-ranked memory
                neighbours[i].append((c, float(sims[r, c])))
    merged = np.zeros(n, dtype=bool)
    plans = []
    for i in range(n):
        if merged[i]:
            continue
        # a memory that superseded another is a link of that history: it may absorb, never be absorbed
        members = [(j, sim) for j, sim in neighbours[i] if not merged[j] and not metas[group[j].id].supersedes]
        if not members:
            continue
        for j, _ in members:
            merged[j] = True
        keeper = group[i]
        others = [group[j] for j, _ in members]
        fields = merged_fields([metas[d.id] for d in (keeper, *others)])
        merge = Merge(
            scope=scope,
            kept_id=keeper.id,
            kept_text=keeper.text,
            merged_ids=[d.id for d in others],
            merged_texts=[d.text for d in others],
            similarities=[round(sim, 6) for _, sim in members],
            tags=fields["tags"],
            importance=fields["importance"],
            created_at=format_timestamp(fields["created_at"]),
            timestamp=format_timestamp(fields["timestamp"]),
        )
        plans.append((merge, keeper, others))
    return plans


__all__ = ["ConsolidationReport", "Merge", "consolidate_memories"]
