"""Planning a run against the store: the ingested documents as stored, and per file what to write,
refresh and delete (an unchanged file is recognised by its hash, not parsed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brain.features.ingest.files import (
    KB_NAMES,
    SourceFile,
    binary_problem,
    decode_text,
    file_documents,
    file_hash,
    utf8_problem,
)
from brain.features.ingest.parsers import MAX_PROBLEMS_PER_FILE, PARSERS
from brain.features.ingest.report import IngestReport
from brain.rules.chunking import TokenChunker
from brain.text.bounded import TooLarge, read_bounded_bytes
from brain.text.markdown import slugify

if TYPE_CHECKING:
    from brain.store import Store


@dataclass
class FilePlan:
    kb_file: str
    kb_hash: str
    category: str  # "new", "changed" or "migrated"
    new: list[dict[str, Any]]  # documents (id, text, metadata) to write under new ids
    refresh: list[
        dict[str, Any]
    ]  # kept documents whose bookkeeping fields change (re-written with their stored vector)
    kept: int
    stale: list[str]  # ids to delete after the write


_BOOKKEEPING = ("kb_hash", "kb_docs", "kb_names")

#: a knowledge-base file larger than this is refused (reported as a bad file, nothing of it written):
#: a file's documents are embedded and written as one group whatever its size, so its cost grows with
#: its bytes. Set from bench/bench_ingest_cap.py: 1 MiB of prose is ~1,300 documents, about one
#: EMBED_GROUP, ingested in ~2.5 minutes within ~850 MiB on 2 busy cores; 4 MiB took 6.4 minutes, 1.06 GB
MAX_KB_FILE_BYTES = 1024 * 1024


def _too_large(source: SourceFile, cap: int) -> str:
    try:
        size = f"{source.path.stat().st_size:,} bytes"
    except OSError:
        size = f"larger than {cap:,} bytes"
    return (
        f"the file is {size}, over the cap of {cap:,} bytes for one knowledge-base file "
        f"(MAX_KB_FILE_BYTES; a file is embedded and written in one piece); split it into several "
        f"files, e.g. one per chapter. File not ingested; its documents in the store are unchanged"
    )


def _is_ingested(meta: Mapping[str, object] | None) -> bool:
    return (
        meta is not None
        and bool(meta)
        and meta.get("type") == "faq"
        and meta.get("source") == "kb"
        and isinstance(meta.get("kb_file"), str)
        and isinstance(meta.get("kb_hash"), str)
        and isinstance(meta.get("kb_text_hash"), str)
    )


def scan_ingested(store: Store) -> dict[str, dict[str, dict[str, Any]]]:
    """Every ingested document's metadata: ``{kb_file: {id: metadata}}`` (metadata only, paged)."""
    where = {"$and": [{"type": "faq"}, {"source": "kb"}]}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for page in store.chroma.pages(where, include=["metadatas"]):
        for doc_id, meta in zip(page["ids"], page["metadatas"] or []):
            if _is_ingested(meta):
                out.setdefault(meta["kb_file"], {})[doc_id] = meta
    return out


def plan_file(
    source: SourceFile,
    stored: dict[str, dict[str, object]],
    older: list[tuple[str, bool, dict[str, dict[str, object]]]],
    chunker: TokenChunker,
    report: IngestReport,
) -> tuple[FilePlan | None, list[str]]:
    """Read, compare, parse: the file's plan (None when there is nothing to write; counted here), and
    the older names whose documents the plan takes over. ``older``: (name, exact, documents) of the
    older names that fit the file; a guess (not exact) is taken over only if the texts agree."""
    cap = MAX_KB_FILE_BYTES  # read at call time, so a test can lower it
    try:
        raw = read_bounded_bytes(source.path, cap)
    except TooLarge:
        report.add_error(source.kb_file, None, _too_large(source, cap))
        report.files_bad += 1
        return None, []
    except OSError as exc:
        report.add_error(source.kb_file, None, f"cannot read the file: {exc.strerror or exc}")
        report.files_bad += 1
        return None, []
    kb_hash = file_hash(raw, chunker)
    if (
        not older
        and stored
        and all(
            m.get("kb_hash") == kb_hash and m.get("kb_docs") == len(stored) and m.get("kb_names") == KB_NAMES
            for m in stored.values()
        )
    ):
        report.files_read += 1
        report.files_unchanged += 1
        report.unchanged += len(stored)
        return None, []
    try:
        text = decode_text(raw)
    except UnicodeDecodeError as exc:
        report.add_error(source.kb_file, *utf8_problem(raw, exc))
        report.files_bad += 1
        return None, []
    binary = binary_problem(text)
    if binary is not None:
        report.add_error(source.kb_file, *binary)
        report.add_error(source.kb_file, None, "file not ingested; its documents in the store are unchanged")
        report.files_bad += 1
        return None, []
    if not text.strip():
        report.warnings.append({"path": source.kb_file, "line": None, "message": "the file is empty: no documents"})
    default_topic = slugify(source.path.stem)
    parsed = PARSERS[source.kind](text, default_topic)
    if parsed.errors:
        for line, message in parsed.errors[:MAX_PROBLEMS_PER_FILE]:
            report.add_error(source.kb_file, line, message)
        if len(parsed.errors) > MAX_PROBLEMS_PER_FILE:
            report.add_error(
                source.kb_file, None, f"... and {len(parsed.errors) - MAX_PROBLEMS_PER_FILE} more problems"
            )
        report.add_error(source.kb_file, None, "file not ingested; its documents in the store are unchanged")
        report.files_bad += 1
        return None, []
    report.warnings.extend(
        {"path": source.kb_file, "line": line, "message": message} for line, message in parsed.warnings
    )
    report.files_read += 1
    docs = file_documents(source.kb_file, kb_hash, parsed.drafts, chunker)
    texts = {d["kb_text_hash"] for d in docs}
    claimed = []
    for name, exact, group in older:
        if not exact and not any(m.get("kb_hash") == kb_hash or m.get("kb_text_hash") in texts for m in group.values()):
            report.warnings.append(
                {
                    "path": name,
                    "line": None,
                    "message": (
                        f"ingested under an older name that fits {source.kb_file} but shares no text with it; "
                        f"left as is (--prune on its folder removes it)"
                    ),
                }
            )
            continue
        claimed.append(name)
        stored = {**stored, **group}
        first_seen = {m.get("kb_text_hash"): m.get("timestamp") for m in group.values() if m.get("timestamp")}
        for d in docs:  # a re-keyed document keeps the time it was first ingested
            if d["kb_text_hash"] in first_seen and d["id"] not in stored:
                d.setdefault("timestamp", first_seen[d["kb_text_hash"]])
    ids = {d["id"] for d in docs}
    new = [d for d in docs if d["id"] not in stored]
    refresh = [d for d in docs if d["id"] in stored and any(stored[d["id"]].get(key) != d[key] for key in _BOOKKEEPING)]
    stale = [doc_id for doc_id in stored if doc_id not in ids]
    kept = len(docs) - len(new)
    if not (new or refresh or stale):
        report.files_unchanged += 1
        report.unchanged += kept
        return None, claimed
    for d in refresh:  # keep the time the document was first ingested
        d["timestamp"] = stored[d["id"]].get("timestamp")
    if not stored:
        category = "new"
    elif all(m.get("kb_hash") == kb_hash for m in stored.values()) and (
        claimed or any(m.get("kb_names") != KB_NAMES for m in stored.values())
    ):
        category = "migrated"
    else:
        category = "changed"
    return FilePlan(source.kb_file, kb_hash, category, new, refresh, kept, stale), claimed


def embed_groups(plans: list[FilePlan], size: int) -> Iterable[list[FilePlan]]:
    group: list[FilePlan] = []
    pending = 0
    for plan in plans:
        group.append(plan)
        pending += len(plan.new)
        if pending >= size:
            yield group
            group, pending = [], 0
    if group:
        yield group


def would_embed(group: list[FilePlan], text_index: dict[str, str]) -> int:
    """Dry run: how many texts the group would embed (and remember them as if written)."""
    todo = {d["kb_text_hash"]: d["id"] for plan in group for d in plan.new if d["kb_text_hash"] not in text_index}
    text_index.update(todo)
    return len(todo)
