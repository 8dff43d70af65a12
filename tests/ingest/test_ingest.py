"""Knowledge-base ingestion: the store reflects exactly the files, nothing duplicated, stale or re-embedded."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from brain.features.ingest import ingest_paths, kb_name, scan_ingested
from brain.model.errors import StoreUnavailable
from brain.rules.chunking import TokenChunker
from brain.shells.cli.reports import ingest_text

_WORDS = (
    "scanner settings window overlap embedder chunk section receipt folder answer question model vector store "
    "server update prune report batch token limit heading topic file line error retry index memory"
).split()
_rng = random.Random(7)
LONG_BODY = " ".join(
    f"{_rng.choice(_WORDS).capitalize()} " + " ".join(_rng.choice(_WORDS) for _ in range(11)) + "." for _ in range(40)
)  # about 500 tokens, no sentence repeated


GUIDE_MD = f"""---
specialist: ocr
owner: kb-team
---
Reading text in pictures.

## Getting a good scan
Lay the page flat, in even light.

```bash
# not a heading
Q: not a question either
```

## Questions
Q: Which languages can ocr read?
A: More than 30.

**Q:** Does it keep tables?
**A:** Simple ones.

## Long how-to
{LONG_BODY}
"""

FAQ_JSONL = (
    "\n".join(
        json.dumps(row)
        for row in [
            {
                "question": "How do I search the web?",
                "answer": "Ask in plain words.",
                "topic": "web_search",
                "specialist": "web_search",
            },
            {
                "question": "Can vision recognise faces?",
                "answer": "No, by design.",
                "topic": "vision",
                "specialist": "vision",
                "priority": 2,
                "audience": ["adults", "kids"],
                "reviewed": True,
                "note": None,
                "extra": {"nested": 1},
            },
        ]
    )
    + "\n"
)

FAQ_CSV = (
    "Question,Answer,Topic,Specialist,owner,source\n"
    '"Which files can docs read?","PDF, DOCX and text.",docs,docs,alice,chat\n'
)

NOTES_TXT = "The household wifi password is on the fridge.\n"


def write_kb(root: Path) -> Path:
    kb = root / "kb"
    kb.mkdir(exist_ok=True)
    (kb / "guide.md").write_text(GUIDE_MD, encoding="utf-8")
    (kb / "faq.jsonl").write_text(FAQ_JSONL, encoding="utf-8")
    (kb / "more").mkdir(exist_ok=True)
    (kb / "more" / "table.csv").write_text(FAQ_CSV, encoding="utf-8")
    (kb / "notes.txt").write_text(NOTES_TXT, encoding="utf-8")
    return kb


def kb_docs(store, kb_file: str | None = None):
    where = {"source": "kb", "type": "faq"} if kb_file is None else {"kb_file": kb_file}
    return sorted(store.get(where=where), key=lambda d: d.id)


def snapshot(store):
    """id -> (text, metadata) of every document in the collection."""
    return {d.id: (d.text, d.metadata) for d in store.get()}


def test_first_run_ingests_every_format_and_a_second_run_writes_nothing(store, tmp_path, monkeypatch):
    kb = write_kb(tmp_path)
    calls: list[int] = []
    real_embed = store.embedder.embed_documents
    monkeypatch.setattr(store.embedder, "embed_documents", lambda texts: calls.append(len(texts)) or real_embed(texts))

    first = ingest_paths(store, [kb])
    assert first.ok and first.files_read == 4 and first.updated == 0 and first.removed == 0
    docs = kb_docs(store)
    assert first.added == len(docs) == store.count("faq") and first.unchanged == 0
    assert first.embedded == sum(calls) == len({d.text for d in docs})
    assert Counter(d.metadata["kb_file"] for d in docs) == {
        "kb/guide.md": len(kb_docs(store, "kb/guide.md")),
        "kb/faq.jsonl": 2,
        "kb/more/table.csv": 1,
        "kb/notes.txt": 1,
    }
    assert all(d.metadata["kb_docs"] == len(kb_docs(store, d.metadata["kb_file"])) for d in docs)

    writes = []
    # unchanged files are recognised by their hash: not even parsed
    monkeypatch.setattr("brain.features.ingest.plan.PARSERS", {})
    monkeypatch.setattr(store, "upsert_docs", lambda docs: writes.append(docs))
    monkeypatch.setattr(store, "delete", lambda *a, **k: writes.append((a, k)))
    before = snapshot(store)
    calls.clear()
    again = ingest_paths(store, [kb])
    assert again.ok and (again.added, again.updated, again.removed, again.embedded) == (0, 0, 0, 0)
    assert again.unchanged == len(docs) and again.files_read == 4
    assert calls == [] and writes == []
    assert snapshot(store) == before
    # the same files named another way are the same documents
    again = ingest_paths(store, [str(kb.resolve()) + "/", "kb/guide.md"])
    assert again.ok and again.added == 0 and again.unchanged == len(docs) and writes == []


def test_markdown_sections_and_questions_become_documents_with_topics(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    report = ingest_paths(embedded_store, [kb / "guide.md"])
    assert report.ok and report.files_read == 1
    docs = kb_docs(embedded_store, "kb/guide.md")
    by_kind = Counter((d.metadata["kb_kind"], d.metadata["topic"]) for d in docs)
    parts = {d.metadata["kb_parts"] for d in docs if d.metadata["topic"] == "long_how_to"}
    assert by_kind == {
        ("section", "guide"): 1,
        ("section", "getting_a_good_scan"): 1,
        ("qa", "questions"): 2,
        ("section", "long_how_to"): parts.pop(),
    }
    texts = {d.text for d in docs}
    assert "Reading text in pictures." in texts
    assert "Q: Which languages can ocr read?\nA: More than 30." in texts
    assert "**Q:** Does it keep tables?\n**A:** Simple ones." in texts
    scan = next(d for d in docs if d.metadata["topic"] == "getting_a_good_scan")
    assert (
        scan.text.startswith("## Getting a good scan\n") and "# not a heading" in scan.text
    )  # code stays in its section
    assert all(d.metadata["_specialist_name"] == "ocr" and d.metadata["owner"] == "kb-team" for d in docs)
    assert all(d.metadata["source"] == "kb" and d.metadata["type"] == "faq" for d in docs)
    hit = embedded_store.retrieve_faq("what languages does the text reader support?", k=1)[0]
    assert hit.text.startswith("Q: Which languages")


def test_a_long_section_is_chunked_within_the_window_with_overlap(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    chunker = TokenChunker(64, 16)
    report = ingest_paths(embedded_store, [kb / "guide.md"], chunker=chunker)
    assert report.ok
    long = sorted(
        (d for d in kb_docs(embedded_store, "kb/guide.md") if d.metadata["topic"] == "long_how_to"),
        key=lambda d: d.metadata["kb_part"],
    )
    assert len(long) >= 5 and [d.metadata["kb_part"] for d in long] == list(range(1, len(long) + 1))
    assert all(d.metadata["kb_parts"] == len(long) for d in long)
    assert all(chunker.count_tokens(d.text) <= 64 for d in long)
    section = "## Long how-to\n" + LONG_BODY
    assert section.startswith(long[0].text) and section.endswith(long[-1].text)
    position = 0  # where the previous chunk starts in the section
    for previous, doc in zip(long, long[1:]):
        start = section.index(doc.text, position + 1)
        assert start < position + len(previous.text)  # starts inside the previous chunk: they overlap
        position = start
    assert position + len(long[-1].text) == len(section)


def test_a_changed_file_replaces_exactly_its_own_chunks(embedded_store, embed_calls, tmp_path):
    kb = write_kb(tmp_path)
    ingest_paths(embedded_store, [kb])
    before = snapshot(embedded_store)
    guide_before = {d.id: d for d in kb_docs(embedded_store, "kb/guide.md")}
    embed_calls.clear()

    (kb / "guide.md").write_text(
        GUIDE_MD.replace("Lay the page flat, in even light.", "Use a scanner at 300 dpi."), encoding="utf-8"
    )
    report = ingest_paths(embedded_store, [kb])
    assert report.ok and (report.updated, report.added, report.removed, report.embedded) == (1, 1, 1, 1)
    assert report.unchanged == len(before) - 1
    assert embed_calls == [
        ["## Getting a good scan\nUse a scanner at 300 dpi.\n\n```bash\n# not a heading\nQ: not a question either\n```"]
    ]
    after = snapshot(embedded_store)
    guide_after = {d.id: d for d in kb_docs(embedded_store, "kb/guide.md")}
    assert len(set(guide_before) - set(guide_after)) == 1 and len(set(guide_after) - set(guide_before)) == 1
    for doc_id, (text, meta) in before.items():  # the other files' documents are untouched, metadata included
        if meta["kb_file"] != "kb/guide.md":
            assert after[doc_id] == (text, meta)
    kept = set(guide_before) & set(guide_after)
    assert all(guide_after[i].text == guide_before[i].text for i in kept)
    assert all(guide_after[i].metadata["timestamp"] == guide_before[i].metadata["timestamp"] for i in kept)
    assert len({d.metadata["kb_hash"] for d in guide_after.values()}) == 1

    # a section inserted at the top: one new document, nothing renumbered or re-embedded
    embed_calls.clear()
    (kb / "guide.md").write_text(
        GUIDE_MD.replace("## Getting", "## First\nA new first section.\n\n## Getting").replace(
            "Lay the page flat, in even light.", "Use a scanner at 300 dpi."
        ),
        encoding="utf-8",
    )
    report = ingest_paths(embedded_store, [kb])
    assert (report.updated, report.added, report.removed, report.embedded) == (1, 1, 0, 1)
    assert embed_calls == [["## First\nA new first section."]]
    assert set(guide_after) < {d.id for d in kb_docs(embedded_store, "kb/guide.md")}
    # and the third run is a no-op again (bookkeeping was refreshed on the kept documents)
    embed_calls.clear()
    report = ingest_paths(embedded_store, [kb])
    assert (report.updated, report.added, report.removed, report.embedded) == (0, 0, 0, 0) and embed_calls == []


def test_a_removed_file_stays_without_prune_and_goes_with_it(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    ingest_paths(embedded_store, [kb])
    notes = kb_docs(embedded_store, "kb/notes.txt")
    jsonl = kb_docs(embedded_store, "kb/faq.jsonl")
    total = embedded_store.count("faq")
    (kb / "notes.txt").unlink()
    (kb / "faq.jsonl").unlink()

    kept = ingest_paths(embedded_store, [kb])
    assert kept.ok and kept.removed == 0 and kept.missing_files == ["kb/faq.jsonl", "kb/notes.txt"]
    assert "--prune" in ingest_text(kept) and embedded_store.count("faq") == total

    dry = ingest_paths(embedded_store, [kb], prune=True, dry_run=True)
    assert dry.removed == len(notes) + len(jsonl) and embedded_store.count("faq") == total

    # a file given by name never prunes its siblings
    single = ingest_paths(embedded_store, [kb / "guide.md"], prune=True)
    assert single.removed == 0 and single.missing_files == [] and embedded_store.count("faq") == total

    pruned = ingest_paths(embedded_store, [kb], prune=True)
    assert pruned.ok and pruned.removed == len(notes) + len(jsonl) and pruned.pruned
    assert embedded_store.count("faq") == total - len(notes) - len(jsonl)
    assert kb_docs(embedded_store, "kb/notes.txt") == [] and embedded_store.get([d.id for d in jsonl]) == []
    assert ingest_paths(embedded_store, [kb], prune=True).removed == 0


def test_documents_not_created_by_ingestion_are_never_touched(embedded_store, tmp_path):
    store = embedded_store
    store.upsert_memory("Alice is vegetarian", scope="entity:alice", importance=5, tags=["food"])
    store.upsert_doc("You are Brain.", "persona", version="v1", topic="core")
    store.upsert_doc("Manual: OCR reads text.", "faq", topic="ocr", source="kb", _specialist_name="ocr")
    # like the demo's own loader: a kb-sourced FAQ entry with a file name but not the ingestion mark
    store.upsert_doc(
        "Q: How do I look something up?\nA: Ask.",
        "faq",
        topic="web_search",
        source="kb",
        source_file="specialists.jsonl",
        kb_file="kb/guide.md",
    )
    store.upsert_turn("conv-1", "hi", "hello")
    store.upsert_summary("conv-1", "They said hello.")
    others = snapshot(store)

    kb = write_kb(tmp_path)
    ingest_paths(store, [kb])
    (kb / "guide.md").write_text("# Replaced\nAll new.\n", encoding="utf-8")
    ingest_paths(store, [kb], prune=True)
    for path in [kb / "guide.md", kb / "faq.jsonl", kb / "notes.txt", kb / "more" / "table.csv"]:
        path.unlink()
    report = ingest_paths(store, [kb], prune=True)
    assert report.ok and report.removed > 0
    assert scan_ingested(store) == {}
    assert snapshot(store) == others


def test_malformed_files_are_reported_with_file_and_line_and_the_rest_is_ingested(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    ingest_paths(embedded_store, [kb])
    old_jsonl = kb_docs(embedded_store, "kb/faq.jsonl")
    (kb / "bad.md").write_bytes(b"# Title\nfine line\nbroken \xff\xfe byte\n")
    (kb / "broken.csv").write_text("Frage,Antwort\nWas?,Das.\n", encoding="utf-8")
    (kb / "faq.jsonl").write_text(FAQ_JSONL.splitlines()[0] + '\n{"question": "x", "answer": \n', encoding="utf-8")
    (kb / "rows.csv").write_text("question,answer\nok?,yes\n,missing question\n", encoding="utf-8")
    (kb / "new.md").write_text("# New\nA new good file.\n", encoding="utf-8")

    report = ingest_paths(embedded_store, [kb], prune=True)
    assert not report.ok
    lines = {(e["path"], e["line"]) for e in report.errors if e["line"] is not None}
    assert lines == {("kb/bad.md", 3), ("kb/broken.csv", 1), ("kb/faq.jsonl", 2), ("kb/rows.csv", 3)}
    messages = {e["path"]: e["message"] for e in report.errors if e["line"] is not None}
    assert "UTF-8" in messages["kb/bad.md"] and "column 8" in messages["kb/bad.md"]
    assert "'question'" in messages["kb/broken.csv"] and "Frage" in messages["kb/broken.csv"]
    assert "not valid JSON" in messages["kb/faq.jsonl"]
    assert "question" in messages["kb/rows.csv"]
    # the good files are ingested; the broken ones keep what they had (and are not pruned)
    assert [d.text for d in kb_docs(embedded_store, "kb/new.md")] == ["# New\nA new good file."]
    assert kb_docs(embedded_store, "kb/faq.jsonl") == old_jsonl
    assert all(kb_docs(embedded_store, f"kb/{name}") == [] for name in ("bad.md", "broken.csv", "rows.csv"))
    assert report.files_read == 4 and report.added == 1  # guide, table, notes, new
    text = ingest_text(report)
    assert "kb/faq.jsonl:2: not valid JSON" in text and "kb/bad.md:3" in text
    json.dumps(report.to_dict())


def test_dry_run_reports_the_same_counts_and_writes_nothing(embedded_store, embed_calls, tmp_path):
    kb = write_kb(tmp_path)
    dry = ingest_paths(embedded_store, [kb], dry_run=True)
    assert dry.dry_run and embedded_store.count() == 0 and embed_calls == []
    real = ingest_paths(embedded_store, [kb])
    fields = ("files_read", "added", "updated", "unchanged", "removed", "embedded", "errors", "warnings")
    assert dry.added > 0 and all(getattr(dry, f) == getattr(real, f) for f in fields)

    (kb / "guide.md").write_text(GUIDE_MD.replace("More than 30.", "Over 40."), encoding="utf-8")
    (kb / "notes.txt").unlink()
    before = snapshot(embedded_store)
    embed_calls.clear()
    dry = ingest_paths(embedded_store, [kb], prune=True, dry_run=True)
    assert snapshot(embedded_store) == before and embed_calls == []
    real = ingest_paths(embedded_store, [kb], prune=True)
    assert (dry.added, dry.removed, dry.updated) == (1, 2, 1)
    assert all(getattr(dry, f) == getattr(real, f) for f in fields)
    assert "Dry run" in ingest_text(dry) and "would be removed" in ingest_text(dry)


def expected_state(tmp_path, local_embedder, kb) -> set[tuple[str, str, str]]:
    """(id, kb_file, text) of a clean ingest of ``kb`` into a fresh store."""
    from brain.app.core import open_store
    from brain.config import Settings

    fresh = open_store(Settings(data_dir=tmp_path / "fresh"), embedder=local_embedder)
    ingest_paths(fresh, [kb])
    return {(d.id, d.metadata["kb_file"], d.text) for d in kb_docs(fresh)}


def state(store) -> list[tuple[str, str, str]]:
    return sorted((d.id, d.metadata["kb_file"], d.text) for d in kb_docs(store))


def test_a_failed_write_leaves_other_files_ingested_and_a_rerun_completes_it(
    embedded_store, embed_calls, tmp_path, monkeypatch
):
    kb = write_kb(tmp_path)
    real_upsert = embedded_store.upsert_docs
    failed = "kb/notes.txt"
    calls = []

    def failing(docs):  # the store fails whenever this file's documents are in the write
        calls.append(sorted({d["kb_file"] for d in docs}))
        if any(d["kb_file"] == failed for d in docs):
            raise StoreUnavailable("the Chroma server went away")
        return real_upsert(docs)

    monkeypatch.setattr(embedded_store, "upsert_docs", failing)
    report = ingest_paths(embedded_store, [kb])
    assert len(calls[0]) == 4  # one shared write for the batch of files, then file by file
    assert [e["path"] for e in report.errors] == [failed] and "went away" in report.errors[0]["message"]
    assert not report.ok and report.files_read == 4
    assert kb_docs(embedded_store, failed) == [] and len(kb_docs(embedded_store)) == report.added > 0
    monkeypatch.setattr(embedded_store, "upsert_docs", real_upsert)
    embed_calls.clear()

    again = ingest_paths(embedded_store, [kb])
    assert again.ok and again.added == len(kb_docs(embedded_store, failed)) > 0
    assert again.unchanged == report.added and again.removed == 0
    # the failed file's vectors were computed in the first run but never stored: embedded again, nothing else
    assert embed_calls == [[d.text for d in kb_docs(embedded_store, failed)]]
    assert set(state(embedded_store)) == expected_state(tmp_path, embedded_store.embedder, kb)
    assert len(state(embedded_store)) == len(set(state(embedded_store)))


@pytest.mark.parametrize("where", ["between write and delete", "half of a file written"])
def test_an_interrupted_run_converges_without_duplicates(embedded_store, tmp_path, monkeypatch, where):
    kb = write_kb(tmp_path)
    ingest_paths(embedded_store, [kb], chunker=TokenChunker(64, 16))
    # a new chunk window re-chunks every file: every file has new documents to write and stale ones to delete
    real_upsert, real_delete = embedded_store.upsert_docs, embedded_store.delete
    deletes = []

    def upsert(docs):
        if where == "half of a file written" and any(d["kb_file"] == "kb/guide.md" for d in docs):
            real_upsert(docs[: len(docs) // 2])  # killed in the middle of a write
            raise KeyboardInterrupt
        return real_upsert(docs)

    def delete(ids=None, **kwargs):
        deletes.append(ids)
        if where == "between write and delete":
            raise KeyboardInterrupt  # the new documents are written, the old ones not yet deleted
        return real_delete(ids, **kwargs)

    monkeypatch.setattr(embedded_store, "upsert_docs", upsert)
    monkeypatch.setattr(embedded_store, "delete", delete)
    with pytest.raises(KeyboardInterrupt):
        ingest_paths(embedded_store, [kb])
    monkeypatch.setattr(embedded_store, "upsert_docs", real_upsert)
    monkeypatch.setattr(embedded_store, "delete", real_delete)
    expected = expected_state(tmp_path, embedded_store.embedder, kb)
    assert set(state(embedded_store)) != expected  # really half-done

    report = ingest_paths(embedded_store, [kb])
    assert report.ok and report.updated >= 1
    assert set(state(embedded_store)) == expected and len(state(embedded_store)) == len(expected)
    assert ingest_paths(embedded_store, [kb]).added == 0


def test_extra_columns_are_kept_when_chroma_can_store_them_and_reported_otherwise(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    report = ingest_paths(embedded_store, [kb / "faq.jsonl", kb / "more" / "table.csv"])
    assert report.ok
    vision = next(d for d in kb_docs(embedded_store, "kb/faq.jsonl") if d.metadata["topic"] == "vision")
    assert vision.metadata["priority"] == 2 and vision.metadata["audience"] == ["adults", "kids"]
    assert vision.metadata["reviewed"] is True and vision.metadata["_specialist_name"] == "vision"
    assert "note" not in vision.metadata and "extra" not in vision.metadata
    row = kb_docs(embedded_store, "more/table.csv")[0]  # a file given by name is named after its folder
    assert row.text == "Q: Which files can docs read?\nA: PDF, DOCX and text."
    assert (
        row.metadata["owner"] == "alice" and row.metadata["source"] == "kb"
    )  # a 'source' column cannot override the mark
    assert row.metadata["topic"] == "docs" and row.metadata["_specialist_name"] == "docs"
    warnings = {(w["path"], w["line"], w["message"].split(" = ")[0]) for w in report.warnings}
    assert warnings == {
        ("kb/faq.jsonl", 2, "field 'note'"),
        ("kb/faq.jsonl", 2, "field 'extra'"),
        ("more/table.csv", 2, "field 'source'"),
    }
    assert any("nested objects" in w["message"] for w in report.warnings)
    assert any("null" in w["message"] for w in report.warnings)


def test_renamed_file_reuses_stored_vectors(embedded_store, embed_calls, tmp_path):
    kb = write_kb(tmp_path)
    ingest_paths(embedded_store, [kb])
    texts = sorted(d.text for d in kb_docs(embedded_store, "kb/guide.md"))
    vectors = {
        d.text: d.embedding
        for d in embedded_store.get([d.id for d in kb_docs(embedded_store, "kb/guide.md")], include_embeddings=True)
    }
    (kb / "guide.md").rename(kb / "ocr-guide.md")
    embed_calls.clear()
    report = ingest_paths(embedded_store, [kb], prune=True)
    assert report.ok and report.added == report.removed == len(texts) and report.embedded == 0 and embed_calls == []
    moved = embedded_store.get([d.id for d in kb_docs(embedded_store, "kb/ocr-guide.md")], include_embeddings=True)
    assert sorted(d.text for d in moved) == texts
    assert max(float(abs(d.embedding - vectors[d.text]).max()) for d in moved) < 1e-6  # Chroma re-normalises


def test_paths_unsupported_files_and_settings_changes(embedded_store, embed_calls, tmp_path):
    kb = write_kb(tmp_path)
    (kb / "scan.pdf").write_bytes(b"%PDF-1.4")
    (kb / ".hidden.md").write_text("# Secret\nnot ingested\n", encoding="utf-8")
    (kb / ".git").mkdir()
    (kb / ".git" / "x.md").write_text("# Git\nnot ingested\n", encoding="utf-8")
    report = ingest_paths(embedded_store, [kb, tmp_path / "nope"])
    assert report.skipped == [{"path": "kb/scan.pdf", "reason": report.skipped[0]["reason"]}]
    assert ".pdf" in report.skipped[0]["reason"]
    assert report.errors == [{"path": str(tmp_path / "nope"), "line": None, "message": "no such file or directory"}]
    assert report.files_read == 4 and not any("Secret" in d.text or "Git" in d.text for d in kb_docs(embedded_store))
    assert (
        kb_name(kb / "guide.md") == "kb/guide.md"
        and kb_name(tmp_path.parent / "x.md") == f"{tmp_path.parent.name}/x.md"
    )

    # a different chunk window re-chunks every file (the old chunks are replaced)
    embed_calls.clear()
    rechunked = ingest_paths(embedded_store, [kb], chunker=TokenChunker(32, 8))
    assert rechunked.updated == 4 and rechunked.removed > 0 and rechunked.added > rechunked.removed
    assert all(TokenChunker(32, 8).count_tokens(d.text) <= 32 for d in kb_docs(embedded_store))


def test_identical_entries_in_one_file_are_kept_apart_and_stable(embedded_store, tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    row = json.dumps({"question": "Same?", "answer": "Yes."})
    (kb / "dupes.jsonl").write_text(f"{row}\n{row}\n", encoding="utf-8")
    first = ingest_paths(embedded_store, [kb])
    assert first.added == 2 and first.embedded == 1 and len(kb_docs(embedded_store)) == 2
    assert ingest_paths(embedded_store, [kb]).added == 0
    (kb / "dupes.jsonl").write_text(f"{row}\n", encoding="utf-8")
    report = ingest_paths(embedded_store, [kb])
    assert (report.added, report.removed, report.unchanged) == (0, 1, 1)


def _markdown_of(n_bytes: int, title: str) -> str:
    """Exactly ``n_bytes`` of Markdown (ASCII): a heading and words, padded with newlines."""
    words = " ".join(_rng.choice(_WORDS) for _ in range(n_bytes // 4))
    return (f"# {title}\n" + words)[: n_bytes - 1].rstrip().ljust(n_bytes, "\n")


def test_a_file_over_the_cap_is_refused_and_one_at_the_cap_is_ingested(embedded_store, tmp_path, monkeypatch):
    import brain.features.ingest.plan as plan

    monkeypatch.setattr(plan, "MAX_KB_FILE_BYTES", 4096)
    kb = tmp_path / "kb"
    kb.mkdir()
    at_cap = _markdown_of(4096, "At the cap")
    (kb / "at_cap.md").write_text(at_cap, encoding="utf-8")
    assert (kb / "at_cap.md").stat().st_size == 4096
    (kb / "grows.md").write_text("# Grows\nSmall for now.\n", encoding="utf-8")
    assert ingest_paths(embedded_store, [kb]).ok
    before = kb_docs(embedded_store, "kb/grows.md")
    assert [d.text for d in before] == ["# Grows\nSmall for now."]

    (kb / "big.md").write_text(at_cap + "x", encoding="utf-8")
    (kb / "grows.md").write_text(_markdown_of(9000, "Grows"), encoding="utf-8")
    (kb / "new.md").write_text("# New\nA new good file.\n", encoding="utf-8")
    report = ingest_paths(embedded_store, [kb], prune=True)

    assert report.files_bad == 2 and report.files_new == 1 and report.files_unchanged == 1
    errors = {e["path"]: e["message"] for e in report.errors}
    assert set(errors) == {"kb/big.md", "kb/grows.md"}
    assert "4,097 bytes, over the cap of 4,096 bytes" in errors["kb/big.md"] and "split it" in errors["kb/big.md"]
    assert "9,000 bytes" in errors["kb/grows.md"] and "MAX_KB_FILE_BYTES" in errors["kb/grows.md"]
    # nothing of an over-cap file is written, a file ingested before keeps its documents, the rest proceeds
    assert kb_docs(embedded_store, "kb/big.md") == []
    assert kb_docs(embedded_store, "kb/grows.md") == before
    assert kb_docs(embedded_store, "kb/at_cap.md") and kb_docs(embedded_store, "kb/new.md")
    assert "kb/big.md: the file is 4,097 bytes" in ingest_text(report)


def test_a_binary_or_control_character_file_is_refused_and_named(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    (kb / "was_text.md").write_text("# Parking\nThe car park opens at seven.\n", encoding="utf-8")
    assert ingest_paths(embedded_store, [kb]).ok
    kept = kb_docs(embedded_store, "kb/was_text.md")
    (kb / "zeros.md").write_bytes(b"\x00" * 3000)
    (kb / "utf16.txt").write_bytes("The wifi password is on the fridge.\n".encode("utf-16-le"))
    (kb / "controls.md").write_bytes(b"\x01\x02\x03 \x1b\x7f\n" * 50)
    (kb / "was_text.md").write_bytes(b"\x00\x01binary now")
    (kb / "stray.md").write_text("# Bell\nA stray \x07 bell in real text is kept.\n", encoding="utf-8")
    (kb / "empty.md").write_text("\n  \n", encoding="utf-8")

    report = ingest_paths(embedded_store, [kb])
    errors = {(e["path"], e["line"]): e["message"] for e in report.errors}
    assert "3,000 NUL characters" in errors[("kb/zeros.md", 1)] and "UTF-16" in errors[("kb/zeros.md", 1)]
    assert "NUL characters" in errors[("kb/utf16.txt", 1)]
    assert "control characters, and nothing but them" in errors[("kb/controls.md", 1)]
    assert ("kb/was_text.md", 1) in errors
    assert report.files_bad == 4 and not report.ok
    for name in ("zeros.md", "utf16.txt", "controls.md"):
        assert kb_docs(embedded_store, f"kb/{name}") == []
    assert kb_docs(embedded_store, "kb/was_text.md") == kept  # refused: what it had stays
    assert [d.text for d in kb_docs(embedded_store, "kb/stray.md")] == [
        "# Bell\nA stray \x07 bell in real text is kept."
    ]
    assert {"path": "kb/empty.md", "line": None, "message": "the file is empty: no documents"} in report.warnings
    assert "kb/zeros.md:1: holds 3,000 NUL characters" in ingest_text(report)
    # the noise does not outrank the passage that answers
    assert embedded_store.search("wifi password", k=1)[0].metadata["kb_file"] == "kb/notes.txt"
