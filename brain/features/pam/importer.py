"""Import: bring a PAM export (brain's or another producer's) into the store, all or nothing.

The files are read and validated whole (read.py), mapped to brain documents (the *_mapping modules),
checked against what the store already holds, and written in one ``upsert_docs`` batch, so a problem
anywhere leaves the store untouched. Re-importing is idempotent by id. See docs/pam.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.features.pam.conversation_mapping import ConversationItems, pam_to_conversation
from brain.features.pam.embedding_mapping import usable_vector, vector_problems
from brain.features.pam.forgotten import Forgotten
from brain.features.pam.memory_mapping import pam_to_memory
from brain.features.pam.problems import problem_at, reject
from brain.features.pam.read import read_pam
from brain.features.pam.reports import ImportReport
from brain.model.errors import Problem
from brain.model.schemas import entity_of, from_chroma, validate_metadata

if TYPE_CHECKING:
    from brain.model.results import Document
    from brain.store import Store


def import_pam(store: Store, path: str | Path, *, include_forgotten: bool = False) -> ImportReport:
    """Import a PAM export (directory, or its memory-store file) into ``store``: its memories and the
    conversations its ``conversations_index`` names; see docs/pam.md. The documents of an entity forgotten
    in this data directory (:mod:`brain.features.pam.forgotten`) are skipped and counted, unless
    ``include_forgotten``: then they are written, and the entity is no longer recorded as forgotten."""
    started = time.perf_counter()
    files = read_pam(path)
    sfile = files.memory_store_path.name
    problems: list[Problem] = []
    mapped: list[ConversationItems] = []
    for cfile in files.conversations:
        conv, found = pam_to_conversation(cfile.document, cfile.name)
        problems.extend(found)
        if conv is not None:
            mapped.append(conv)
    reject(problems)
    by_brain_id: dict[str, str] = {}
    for conv, cfile in zip(mapped, files.conversations):
        if conv.conversation_id in by_brain_id:
            problems.append(
                problem_at(
                    cfile.name,
                    "raw_metadata.brain.conversation_id",
                    f"{conv.conversation_id!r} is also the conversation of {by_brain_id[conv.conversation_id]}",
                )
            )
        by_brain_id[conv.conversation_id] = cfile.name
    conversations = {c.pam_id: c.conversation_id for c in mapped} if files.conversations_indexed else None
    items = []
    for i, mem in enumerate(files.memories):
        item, found = pam_to_memory(mem, i, sfile, conversations)
        problems.extend(found)
        items.append(item)
    reject(problems)
    # every document of the import, with where it came from (for problems)
    located: list[tuple[dict[str, Any], str, str]] = [
        (item, sfile, f"memories[{i}].id") for i, item in enumerate(items)
    ]
    for conv, cfile in zip(mapped, files.conversations):
        located += [(t, cfile.name, f"messages (turn {t['id']})") for t in conv.turns]
        located += [(s, cfile.name, f"raw_metadata.brain.summaries (summary {s['id']})") for s in conv.summaries]
    first_seen: dict[str, str] = {}
    for item, file, where in located:
        if item["id"] in first_seen:
            problems.append(problem_at(file, where, f"id {item['id']!r} is also used in {first_seen[item['id']]}"))
        else:
            first_seen[item["id"]] = f"{file}: {where}"
    reject(problems)
    ids = [item["id"] for item, _, _ in located]
    existing = {doc.id: doc for doc in store.get(ids)} if ids else {}
    for item, file, where in located:
        doc = existing.get(item["id"])
        if doc is not None and doc.type != item["type"]:
            problems.append(
                problem_at(
                    file,
                    where,
                    f"{item['id']!r} is the id of a {doc.type} document in the store; "
                    f"a {item['type']} cannot replace it",
                )
            )
    reject(problems)
    model, dimension = store.embedder.name, store.dimension
    reject(vector_problems(files, model, dimension))
    report = ImportReport(
        memory_store=files.memory_store_path,
        embeddings=files.embeddings_path,
        memories=len(items),
        owner_id=files.document["owner"]["id"],
        warnings=list(files.warnings),
        conversations=len(mapped),
        turns=sum(len(c.turns) for c in mapped),
        summaries=sum(len(c.summaries) for c in mapped),
    )
    for conv in mapped:
        for reason, n in conv.skipped.items():
            report.messages_skipped[reason] = report.messages_skipped.get(reason, 0) + n
    if report.messages_skipped:
        report.warnings.append(
            "messages not imported (brain keeps user and assistant text): "
            + ", ".join(f"{n} {reason}" for reason, n in sorted(report.messages_skipped.items()))
        )
    if files.document.get("relations"):
        report.not_imported["relations"] = len(files.document["relations"])
    if files.unfiled_conversations:
        report.not_imported["conversations_index"] = files.unfiled_conversations
    if files.document.get("relations"):
        report.warnings.append(f"not imported (brain has no relations): {report.not_imported['relations']} relations")
    record = Forgotten(store.settings.data_dir)
    forgotten = record.contains(e for item, _, _ in located if (e := _entity(item)) is not None)
    skipped = {item["id"] for item, _, _ in located if _entity(item) in forgotten} if not include_forgotten else set()
    report.forgotten = len(skipped)
    if skipped:
        report.warnings.append(
            f"not imported: {len(skipped)} documents of forgotten entities ({len(forgotten)} entities forgotten in "
            "this data directory); --include-forgotten (include_forgotten) imports them"
        )
    batch = []
    for item, mem in zip(items, files.memories):
        if item["id"] in skipped:
            continue
        change = _change(existing.get(item["id"]), item)
        setattr(report, change, getattr(report, change) + 1)
        if change == "unchanged":
            continue
        # only the embedding a memory names: a null embedding_ref means "no vector" (e.g. content edited)
        ref = mem.get("embedding_ref")
        vector, normalised = usable_vector(files.embeddings.get(ref) if ref else None, model)
        if vector is not None:
            item["embedding"] = vector
            report.vectors_reused += 1
            report.vectors_normalised += normalised
        else:
            report.vectors_embedded += 1
        batch.append(item)
    if report.vectors_normalised:
        report.warnings.append(
            f"{report.vectors_normalised} vectors of {model} were not unit length; stored normalised "
            "(the store compares directions by cosine)"
        )
    for item, _, _ in located[len(items) :]:
        if item["id"] in skipped:
            continue
        change = _change(existing.get(item["id"]), item)
        setattr(report, f"conversation_{change}", getattr(report, f"conversation_{change}") + 1)
        if change == "unchanged":
            continue
        batch.append(item)  # turns and summaries are embedded from their text (PAM carries no vectors for them)
    if batch:
        store.upsert_docs(batch)
    if include_forgotten and forgotten:
        record.release(forgotten)  # the operator brought them back
    report.seconds = time.perf_counter() - started
    return report


def _entity(item: Mapping[str, object]) -> str | None:
    """The entity whose scope a document of the import is in, None for a global one."""
    scope = item.get("scope")
    return entity_of(scope) if isinstance(scope, str) else None


def _change(doc: Document | None, item: Mapping[str, object]) -> str:
    """What importing ``item`` does to the stored ``doc``: "new", "updated" or "unchanged"."""
    if doc is None:
        return "new"
    return "unchanged" if _same(doc, item) else "updated"


def _same(doc: Document, item: Mapping[str, object]) -> bool:
    """Whether the stored document already is exactly what the import would write."""
    if doc.text != item["text"] or doc.type != item["type"]:
        return False
    meta = {k: v for k, v in item.items() if k not in ("id", "text")}
    wanted = from_chroma(validate_metadata(item["type"], meta).to_chroma())
    return wanted == doc.metadata
