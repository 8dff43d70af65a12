"""The CLI's text for what the library returns: each function renders one report (a dataclass of
data from the library) as the lines ``brain`` prints. ``--json`` prints the report's ``to_dict()``
instead. Nothing here is imported before a command runs (``brain --help`` stays light).

The mirror's sync report and the persona load still word themselves (``summary()``): servers log those
lines at start-up and ``brain init --json`` carries the sync's line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brain.model.errors import NotFound
from brain.text.wording import counted

if TYPE_CHECKING:
    from brain.ops.values import (
        BackfillReport,
        ConsolidationReport,
        Coverage,
        DropReport,
        ExportReport,
        ForgetReport,
        FormationReport,
        ImportReport,
        IngestReport,
        MigrationReport,
        RebuildReport,
        RecoveryReport,
        ReindexPlan,
        ReindexReport,
        RestoreReport,
        StartupReport,
        VerifyReport,
    )

#: ids listed in a line before "... (N more)"
_SHOWN = 10
#: document types whose noun is not their name
_NOUNS = {"faq": "FAQ entry", "persona": "persona section"}


def documents_in_words(counts: Mapping[str, int]) -> str:
    """Documents by type in words: ``2 memories, 1 summary`` (``no documents`` for none)."""
    return ", ".join(counted(n, _NOUNS.get(t, t)) for t, n in counts.items() if n) or "no documents"


def _ids_line(label: str, ids: Sequence[str]) -> str | None:
    if not ids:
        return None
    shown = ", ".join(ids[:_SHOWN]) + (f", ... ({len(ids) - _SHOWN} more)" if len(ids) > _SHOWN else "")
    return f"  {label} ({len(ids)}): {shown}"


def coverage_text(coverage: Coverage) -> str:
    # "of N memories" reads as a share for every N, so the noun stays plural
    return (
        f"{coverage.with_vectors} of {coverage.memories} memories ({coverage.ratio:.0%}) with {coverage.model} vectors"
    )


def ingest_text(report: IngestReport) -> str:
    verb = "would be " if report.dry_run else ""
    head = "Dry run, nothing written. " if report.dry_run else ""
    files = (
        f"{counted(report.files_read, 'file')} read, {report.files_new} new, {report.updated} changed, "
        f"{report.files_unchanged} unchanged"
    )
    if report.files_migrated:
        files += f", {report.files_migrated} {verb}migrated to stable names"
    if report.files_bad:
        files += f"; {counted(report.files_bad, 'bad file')}"
    docs = (
        f"{counted(report.added, 'document')} {verb}added "
        f"({report.embedded} {'to embed' if report.dry_run else 'embedded'}), {report.unchanged} unchanged, "
        f"{report.removed} {verb}removed"
    )
    if report.migrated:
        docs += f", {report.migrated} {verb}re-keyed (vectors reused)"
    lines = [f"{head}{files}. {docs}."]
    if report.skipped:
        lines.append(f"Skipped {counted(len(report.skipped), 'file')}:")
        lines += [f"  {s['path']}: {s['reason']}" for s in report.skipped[:10]]
        if len(report.skipped) > 10:
            lines.append(f"  ... and {len(report.skipped) - 10} more")
    if report.missing_files:
        action = (
            ("would be removed" if report.dry_run else "removed") if report.pruned else "kept; --prune removes them"
        )
        lines.append(
            f"{counted(len(report.missing_files), 'ingested file')} no longer present ({action}): "
            + ", ".join(report.missing_files[:10])
            + (" ..." if len(report.missing_files) > 10 else "")
        )
    for kind, items in (("warning", report.warnings), ("error", report.errors)):
        if items:
            lines.append(f"{counted(len(items), kind)}:")
            for item in items[:20]:
                where = item["path"] if item.get("line") is None else f"{item['path']}:{item['line']}"
                lines.append(f"  {where}: {item['message']}")
            if len(items) > 20:
                lines.append(f"  ... and {len(items) - 20} more")
    return "\n".join(lines)


def forget_text(report: ForgetReport) -> str:
    lines = [f"forgot entity {report.entity!r}: {documents_in_words(report.deleted)}"]
    if report.scrubbed.get("resumed"):
        lines.append("finished a forget of this entity that was interrupted")
    if report.mirror:
        lines.append("mirror: " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in report.mirror.items()))
    for name, n in (report.scrubbed.get("retained") or {}).items():
        lines.append(f"collection {name} (kept by a re-index): {counted(n, 'document')}")
    for name, n in (report.scrubbed.get("mirror_copies") or {}).items():
        lines.append(f"mirror copy {name}: {counted(n, 'row')}")
    if report.scrubbed.get("chroma") is None:
        lines.append("note: the Chroma server's own files are not scrubbed by brain (BRAIN_CHROMA_URL)")
    return "\n".join(lines)


def consolidation_text(report: ConsolidationReport) -> str:
    verb = "would merge" if report.dry_run else "merged"
    lines = [
        f"{counted(report.scanned, 'memory')} scanned (cosine > {report.threshold:g}): {verb} {report.removed} "
        f"into {len(report.merges)}"
    ]
    for m in report.merges:
        lines.append(f"  keep {m.kept_id} [{m.scope}] {m.kept_text!r}")
        for doc_id, text, sim in zip(m.merged_ids, m.merged_texts, m.similarities):
            lines.append(f"    <- {doc_id} ({sim:.3f}) {text!r}")
    for doc_id, why in report.skipped.items():
        lines.append(f"  skipped {doc_id}: {why}")
    return "\n".join(lines)


def formation_text(report: FormationReport) -> str:
    """What a run of formation batches did: the facts, the tokens and model time, then each batch."""
    if not report.batches:
        return "no formation batch to run (none pending or failed; --again re-runs the done ones)"
    lines = [
        f"{counted(len(report.batches), 'batch')}: {report.done} done, {report.failed} failed, "
        f"{report.waiting} waiting for the model; "
        f"{counted(report.added, 'memory')} added, {report.merged} merged, {report.updated} updated, "
        f"{report.contradicted} contradicted",
        f"model: {report.prompt_tokens} prompt tokens, {report.eval_tokens} generated, {report.seconds:.1f} s",
    ]
    for batch in report.batches:
        line = (
            f"  {batch.conversation_id} turns {batch.turn_range}: {batch.status}, "
            f"{counted(batch.facts, 'fact')}, {counted(batch.attempts, 'attempt')}"
            + (f", {batch.outcome}" if batch.outcome else "")
        )
        if batch.status != "done" and batch.error:
            line += f": {batch.error}"
        lines.append(line)
    return "\n".join(lines)


def _health_value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def formation_totals_line(totals: Mapping[str, Any]) -> str:
    """Formation batches by state, the facts they applied, and the model's tokens and time summed."""
    batches = ", ".join(f"{totals.get(state, 0)} {state}" for state in ("pending", "failed", "done"))
    line = (
        f"batches {batches}; {counted(totals.get('facts', 0), 'fact')}; {totals.get('prompt_tokens', 0)} prompt "
        f"and {totals.get('eval_tokens', 0)} generated tokens in {totals.get('seconds', 0.0):.1f} s"
    )
    return line + outcomes_text(totals.get("outcomes"), "; last attempts: ")


def outcomes_text(outcomes: Mapping[str, int] | None, lead: str) -> str:
    """``lead`` and the outcomes that happened (``2 accepted, 1 not_json``), or nothing when none did."""
    said = ", ".join(f"{n} {name}" for name, n in (outcomes or {}).items() if n)
    return f"{lead}{said}" if said else ""


def formation_health_line(part: Mapping[str, Any]) -> str:
    """Memory formation in health: on (its model, batches, tokens, last failure) or off and why."""
    if not part.get("enabled"):
        return f"off: {part.get('off_reason') or 'BRAIN_FORMATION is false'}"
    if part.get("error"):  # the store could not be read: no batches to count
        return f"on, {part.get('model')}: batches unknown ({part['error']})"
    line = f"on, {part.get('model')}: {formation_totals_line(part)}"
    line += outcomes_text(part.get("answers"), "; answers read by this process: ")
    if part.get("failed") and part.get("last_error"):
        line += f"; last failure: {part['last_error']}"
    return line


def index_line(index: Mapping[str, Any] | None) -> str:
    """The in-process indexes' parts in one line (``Store.stats()["index"]``)."""
    if not index:
        return "not built in this process (built on the first search)"
    return (
        f"{index['resident_mb']} of {index['budget_mb']} MB: global part {counted(index['global_rows'], 'row')}, "
        f"{counted(index['resident_entities'], 'entity')} resident "
        f"({counted(index['resident_entity_rows'], 'row')}); {counted(index['loads'], 'load')} "
        f"({index['reloads']} after an eviction), {counted(index['evictions'], 'eviction')}"
    )


def health_text(report: Mapping[str, Any]) -> str:
    """``Brain.health`` for people: the status and its notes (information, not faults), then one line per
    part with its scalar fields."""
    lines = [f"{'status':<11} {report['status']}"]
    lines += [f"{'note':<11} {note}" for note in report.get("notes") or ()]
    for name, part in report.items():
        if not isinstance(part, Mapping):
            continue
        if name == "formation":
            lines.append(f"{name:<11} {formation_health_line(part)}")
            continue
        fields = ", ".join(
            f"{key.replace('_', ' ')} {_health_value(value)}"
            for key, value in part.items()
            if not isinstance(value, Mapping)
        )
        lines.append(f"{name:<11} {fields}")
        lines += [
            f"{'':<11}   {key.replace('_', ' ')}: "
            + ", ".join(f"{k.replace('_', ' ')} {_health_value(v)}" for k, v in value.items())
            for key, value in part.items()
            if isinstance(value, Mapping)
        ]
    return "\n".join(lines)


@dataclass
class MemoryRemoval:
    """What ``brain memory rm`` did: the ids removed, and those that named no memory (left alone)."""

    removed: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.not_found

    def to_dict(self) -> dict[str, object]:
        return {"removed": list(self.removed), "not_found": list(self.not_found)}

    def error(self) -> NotFound:
        """The failure the command ends with when not every id was a memory."""
        return NotFound(f"no memory with id {', '.join(repr(i) for i in self.not_found)}")


def removal_text(report: MemoryRemoval) -> str:
    return "\n".join(f"removed {doc_id}" for doc_id in report.removed)


def export_text(report: ExportReport) -> str:
    head = f"exported {counted(report.memories, 'memory')} to {report.memory_store}"
    if report.embeddings:
        head += f", {counted(report.embeddings_written, 'vector')} to {report.embeddings}"
    if report.conversations_dir:
        head += (
            f", {counted(report.conversations, 'conversation')} ({counted(report.messages, 'message')}, "
            f"{counted(report.summaries, 'summary')}) to {report.conversations_dir}"
        )
    if report.parts_skipped:
        head += f"; {counted(report.parts_skipped, 'Xaibo chunk and vector row')} left out (parts, not memories)"
    lines = [f"{head} ({report.seconds:.1f} s)"]
    if report.replaced:
        lines.append(f"replaced: {', '.join(report.replaced)}")
    if report.removed:
        lines.append(f"removed (of the previous export, no longer written): {', '.join(report.removed)}")
    return "\n".join(lines + [f"warning: {w}" for w in report.warnings])


def import_text(report: ImportReport) -> str:
    vectors = f"{counted(report.vectors_reused, 'vector')} reused"
    if report.vectors_normalised:
        vectors += f" ({report.vectors_normalised} normalised to unit length)"
    head = (
        f"imported {counted(report.memories, 'memory')}: {report.new} new, {report.updated} updated, "
        f"{report.unchanged} unchanged; {vectors}, {report.vectors_embedded} embedded; "
        f"{counted(report.conversations, 'conversation')}: {counted(report.turns, 'turn')}, "
        f"{counted(report.summaries, 'summary')} ({report.conversation_new} new, "
        f"{report.conversation_unchanged} unchanged) ({report.seconds:.1f} s)"
    )
    return "\n".join([head] + [f"warning: {w}" for w in report.warnings])


def verify_text(report: VerifyReport) -> str:
    head = (
        f"mirror verify: {report.checked} documents checked, "
        + (
            "no differences"
            if report.ok
            else f"{len(report.missing)} missing, {len(report.extra)} extra, {len(report.text)} with another text, "
            f"{len(report.metadata)} with other metadata, {len(report.vectors)} with another or no vector"
        )
        + (f"; {len(report.foreign)} rows written by engram" if report.foreign else "")
    )
    lines = [head] + [
        line
        for line in (
            _ids_line("missing in the mirror", report.missing),
            _ids_line("extra in the mirror", report.extra),
            _ids_line("text differs", report.text),
            _ids_line("metadata differs", report.metadata),
            _ids_line("vector differs", report.vectors),
        )
        if line
    ]
    return "\n".join(lines)


def backfill_text(report: BackfillReport) -> str:
    return f"embedded {counted(report.embedded, 'document')}; {coverage_text(report.coverage)}"


def plan_text(report: ReindexPlan) -> str:
    resumed = f", resuming {report.collection} ({report.done} done)" if report.resumed else ""
    return (
        f"re-index {report.live} ({report.from_embedder}) -> {report.collection} ({report.to_embedder}, "
        f"{report.dimension}-d){resumed}: {report.documents} documents, {report.to_embed} to embed, "
        f"{report.reused} vectors reused from the mirror"
    )


def reindex_text(report: ReindexReport) -> str:
    return (
        f"{report.collection} ({report.embedder}) is live, {report.previous} kept for `brain reindex --rollback`: "
        f"{report.documents} documents, {report.embedded} embedded, {report.reused} vectors reused from the mirror, "
        f"{report.skipped} done before, {report.replayed} written meanwhile and copied again "
        f"({report.seconds:.1f} s, {report.rate:.1f} documents/s)"
    ) + (f"\nnext: {report.next_step}" if report.next_step else "")


def drop_text(report: DropReport) -> str:
    text = (
        f"dropped {len(report.dropped)} collections ({', '.join(report.dropped) or 'none'}); kept "
        f"{', '.join(report.kept)}; {report.mirror_vectors} mirror vectors of dropped models deleted"
    )
    if report.reclaimed_bytes is not None:
        text += f"; {_megabytes(report.reclaimed_bytes)} of the data directory given back"
    if report.reclaim_error is not None:
        text += f"\nthe space was not given back ({report.reclaim_error}); run `brain reindex --drop-old` again"
    return text


def _megabytes(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def restore_text(report: RestoreReport) -> str:
    kinds = ", ".join(f"{n} {t}" for t, n in report.by_type.items())
    lines = [
        f"restore from mirror: {report.restored} documents{f' ({kinds})' if kinds else ''}, "
        f"{report.foreign} of them written by engram; "
        f"{report.reused_vectors} stored vectors reused, {report.embedded} embedded, "
        f"{len(report.skipped)} skipped ({report.seconds:.1f} s)"
    ]
    lines += [f"  skipped {doc_id!r}: {reason}" for doc_id, reason in report.skipped[:_SHOWN]]
    if report.bad_vectors:
        lines.append(
            f"{len(report.bad_vectors)} stored vectors could not be read; those documents were "
            f"embedded again from their text:"
        )
        lines += [f"  {doc_id!r}: {reason}" for doc_id, reason in report.bad_vectors[:_SHOWN]]
    return "\n".join(lines)


def recovery_text(report: RecoveryReport) -> str:
    lines = [restore_text(report.mirror)]
    if report.persona is not None:
        lines.append(f"persona: reloaded from {report.persona['path']} ({report.persona['sections']} sections)")
    if report.knowledge_base is not None:
        kb = report.knowledge_base
        lines.append(
            f"faq: {kb['added']} documents ingested again from the knowledge base "
            f"({kb['files_read']} files, {len(kb['errors'])} errors)"
        )
    lines += [f"not restored: {note}" for note in report.not_restored]
    return "\n".join(lines)


def rebuild_text(report: RebuildReport) -> str:
    old = (
        f"the old file is kept as {report.moved_aside[0]}"
        if report.moved_aside
        else "the old file, sound and all of it in the new one, was deleted"
        if report.old_deleted
        else "there was no old file"
    )
    lines = [
        f"mirror rebuilt at {report.path} from the store: {report.sync.added} documents with their stored vectors "
        f"(nothing embedded); {old}",
    ]
    if report.foreign_copied:
        lines.append(f"{report.foreign_copied} rows engram wrote itself copied from the old file")
    if report.foreign_error:
        lines.append(
            f"rows engram wrote itself, if it held any, could not be read from the old file "
            f"({report.foreign_error}); they stay in {report.moved_aside[0]}"
        )
    return "\n".join(lines)


def migration_text(report: MigrationReport) -> str:
    head = (
        f"embedding protocol v{report.from_version or 1} -> v{report.to_version}: {report.migrated} embedding rows "
        f"migrated, {len(report.skipped)} skipped"
    )
    lines = [head] + [f"  skipped {s.memory_id!r}: {s.reason}" for s in report.skipped[:20]]
    if len(report.skipped) > 20:
        lines.append(f"  ... and {len(report.skipped) - 20} more")
    return "\n".join(lines)


def startup_text(report: StartupReport) -> str:
    stats = report.store.stats()
    lines = [
        f"store: {stats['backend']} ({stats['embedder']}, {stats['dimension']}-d), "
        f"{counted(stats['documents'], 'document')}",
        report.persona.summary() if report.persona else "persona: none loaded",
        "in-process indexes: " + ", ".join(f"{t} {n}" for t, n in report.indexed.items()),
        f"ready in {report.seconds:.2f} s",
    ] + ([report.mirror_sync.summary()] if report.mirror_sync is not None else [])
    return "\n".join(lines + [f"warning: {w}" for w in report.warnings])
