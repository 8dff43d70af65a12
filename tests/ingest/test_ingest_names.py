"""Knowledge-base files are named by their root, not by the working directory; older names are re-keyed.

The same folder reached by a relative, an absolute or a symlinked path, or from another working
directory, is the same knowledge base: nothing is added or embedded again. Documents written by the
earlier naming (``kb_file`` relative to the working directory of that run, or absolute outside it)
are re-keyed under the current names with their stored vectors on the next run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brain.features import ingest as brain_ingest
from brain.features.ingest import KB_NAMES, ingest_paths, kb_name
from brain.features.ingest.files import decode_text, file_documents, file_hash
from brain.features.ingest.parsers import PARSERS
from brain.rules.chunking import TokenChunker
from brain.shells.cli.reports import ingest_text
from brain.text.markdown import slugify
from tests.ingest.test_ingest import expected_state, kb_docs, state, write_kb


def legacy_ingest(store, kb: Path, cwd: Path) -> int:
    """What the earlier version stored for ``kb`` when run from ``cwd``: the same documents, with
    ``kb_file`` relative to ``cwd`` (absolute outside it), ids derived from that name, no ``kb_names``."""
    chunker = TokenChunker.from_settings(store.settings)
    docs = []
    for folder, _dirs, names in os.walk(kb):
        for name in sorted(names):
            path = Path(folder) / name
            kind = brain_ingest.SUPPORTED.get(path.suffix.lower())
            if kind is None:
                continue
            relative = os.path.relpath(os.path.abspath(path), cwd)
            old_name = path.absolute().as_posix() if relative.startswith("..") else Path(relative).as_posix()
            raw = path.read_bytes()
            parsed = PARSERS[kind](decode_text(raw), slugify(path.stem))
            for doc in file_documents(old_name, file_hash(raw, chunker), parsed.drafts, chunker):
                del doc["kb_names"]
                docs.append(doc)
    vectors = store.embedder.embed_documents([d["text"] for d in docs])
    store.upsert_docs([{**d, "embedding": v} for d, v in zip(docs, vectors)])
    return len(docs)


def test_the_same_folder_by_any_path_and_from_any_directory_is_one_knowledge_base(embedded_store, embed_calls,
                                                                                   tmp_path, monkeypatch):
    kb = write_kb(tmp_path)
    (tmp_path / "link").symlink_to(kb)
    (tmp_path / "elsewhere").mkdir()
    first = ingest_paths(embedded_store, [kb])
    assert first.files_new == 4 and first.added > 0
    before = state(embedded_store)
    assert {kb_file for _, kb_file, _ in before} == {"kb/guide.md", "kb/faq.jsonl", "kb/more/table.csv",
                                                     "kb/notes.txt"}
    embed_calls.clear()
    for cwd, path in [(tmp_path, "kb"), (tmp_path, str(kb)), (tmp_path, "link"), (tmp_path, "link/"),
                      (kb, "."), (kb / "more", ".."), (tmp_path / "elsewhere", "../kb"),
                      (tmp_path / "elsewhere", str(tmp_path / "link")), (Path("/"), str(kb))]:
        monkeypatch.chdir(cwd)
        again = ingest_paths(embedded_store, [path], prune=True)
        assert (again.added, again.removed, again.embedded, again.files_unchanged) == (0, 0, 0, 4), (cwd, path)
        assert again.missing_files == []
        assert state(embedded_store) == before
    assert embed_calls == []
    assert kb_name(tmp_path / "link" / "guide.md") == "kb/guide.md"  # the folder's links are resolved


@pytest.mark.slow
@pytest.mark.parametrize("where", ["inside", "parent", "outside"])
def test_documents_named_by_the_working_directory_are_rekeyed_without_embedding(
        embedded_store, embed_calls, local_embedder, tmp_path, monkeypatch, where):
    kb = write_kb(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    cwd = {"inside": kb, "parent": tmp_path, "outside": tmp_path / "elsewhere"}[where]
    count = legacy_ingest(embedded_store, kb, cwd)
    old_names = {d.metadata["kb_file"] for d in kb_docs(embedded_store)}
    first_ingested = {d.text: d.metadata["timestamp"] for d in kb_docs(embedded_store)}
    assert old_names == {"inside": {"guide.md", "faq.jsonl", "more/table.csv", "notes.txt"},
                         "parent": {"kb/guide.md", "kb/faq.jsonl", "kb/more/table.csv", "kb/notes.txt"},
                         "outside": {f"{kb.as_posix()}/{n}" for n in ("guide.md", "faq.jsonl", "more/table.csv",
                                                                       "notes.txt")}}[where]
    embed_calls.clear()
    monkeypatch.chdir(tmp_path / "elsewhere" if where != "outside" else kb)  # yet another directory
    report = ingest_paths(embedded_store, [kb])
    assert report.ok and embed_calls == [] and report.embedded == 0
    assert (report.files_migrated, report.migrated, report.added, report.removed) == (4, count, 0, 0)
    assert "4 migrated to stable names" in ingest_text(report)
    assert set(state(embedded_store)) == expected_state(tmp_path, local_embedder, kb)  # as if ingested anew
    assert all(d.metadata["kb_names"] == KB_NAMES for d in kb_docs(embedded_store))
    assert {d.text: d.metadata["timestamp"] for d in kb_docs(embedded_store)} == first_ingested
    again = ingest_paths(embedded_store, [kb])
    assert (again.files_unchanged, again.migrated, again.added) == (4, 0, 0)


def test_copies_from_several_directories_collapse_into_one(embedded_store, embed_calls, local_embedder, tmp_path):
    kb = write_kb(tmp_path)
    per_copy = legacy_ingest(embedded_store, kb, kb)
    legacy_ingest(embedded_store, kb, tmp_path)
    assert embedded_store.count("faq") == 2 * per_copy  # what `cd kb && ingest .` after `ingest kb` left
    embed_calls.clear()
    report = ingest_paths(embedded_store, [kb])
    assert embed_calls == [] and report.added == 0 and report.removed == per_copy
    assert embedded_store.count("faq") == per_copy
    assert set(state(embedded_store)) == expected_state(tmp_path, local_embedder, kb)


def test_prune_removes_older_named_documents_of_files_that_are_gone(embedded_store, tmp_path, monkeypatch):
    kb = write_kb(tmp_path)
    legacy_ingest(embedded_store, kb, tmp_path.parent)  # names like <tmp dir name>/kb/notes.txt
    (kb / "notes.txt").unlink()
    kept = ingest_paths(embedded_store, [kb])
    gone = f"{tmp_path.name}/kb/notes.txt"
    assert kept.missing_files == [gone] and kb_docs(embedded_store, gone)
    assert "--prune removes them" in ingest_text(kept)
    pruned = ingest_paths(embedded_store, [kb], prune=True)
    assert pruned.missing_files == [gone] and pruned.removed == 1 and kb_docs(embedded_store, gone) == []
    assert {d.metadata["kb_file"] for d in kb_docs(embedded_store)} == {"kb/guide.md", "kb/faq.jsonl",
                                                                        "kb/more/table.csv"}


def test_an_older_name_that_shares_no_text_is_left_alone(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("A different knowledge base's notes.\n", encoding="utf-8")
    legacy_ingest(embedded_store, other, other)  # stored as "notes.txt": it fits kb/notes.txt by name only
    report = ingest_paths(embedded_store, [kb])
    assert report.files_new == 4 and report.files_migrated == 0
    assert [d.text for d in kb_docs(embedded_store, "notes.txt")] == ["A different knowledge base's notes."]
    assert any(w["path"] == "notes.txt" and "shares no text" in w["message"] for w in report.warnings)


def test_a_bad_file_keeps_its_older_named_documents(embedded_store, tmp_path):
    kb = write_kb(tmp_path)
    legacy_ingest(embedded_store, kb, kb)
    old = kb_docs(embedded_store, "faq.jsonl")
    (kb / "faq.jsonl").write_text("{broken\n", encoding="utf-8")
    report = ingest_paths(embedded_store, [kb], prune=True)
    assert report.files_bad == 1 and report.files_migrated == 3
    assert kb_docs(embedded_store, "faq.jsonl") == old and "faq.jsonl" not in report.missing_files
