"""Knowledge-base ingestion: a folder of files -> FAQ documents, kept exactly in step with the files.

``ingest_paths(store, ["config/kb"])`` reads Markdown (``.md``, ``.markdown``), FAQ tables
(``.jsonl``, ``.csv``) and plain text (``.txt``) and makes the store's ingested documents match them:
nothing duplicated, nothing stale, nothing re-embedded that did not change.

**What becomes a document.**

- Markdown: every section (a heading and the text up to the next heading) is one document with
  ``topic`` = the heading slugified (``## Web search`` -> ``web_search``); text before the first
  heading uses the file name. Inside a section, each ``Q:`` line starts a question block that runs
  to the next ``Q:`` or heading and becomes its own document (``Q:``/``A:`` may be bold); the
  section's text before its first ``Q:`` stays a section document. Headings and ``Q:`` inside
  fenced code blocks do not count. Optional front matter (``---`` lines at the top, ``key: value``)
  sets ``topic`` (for every document of the file), ``specialist`` (``_specialist_name``),
  ``version`` (``_version``); other keys are stored as metadata.
- ``.jsonl``: one object per line with ``question`` and ``answer`` (required), ``topic``,
  ``specialist``, ``version``; ``.csv``: a header row with the same columns (any case), comma
  separated. Text is ``Q: <question>\\nA: <answer>``. Other keys/columns are kept as metadata when
  Chroma can store them (string, number, boolean, or a non-empty list of one of those; not a
  reserved name); otherwise they are dropped and reported as a warning.
- ``.txt``: the whole file, topic from the file name.

Every document is then split by :class:`~brain.chunking.TokenChunker` so none exceeds the
embedder's input (``kb_part`` / ``kb_parts`` number the pieces of one section or entry).

**Names.** A file is named by the knowledge-base root it was found under and its path inside that
root: ``kb_file = "<root name>/<path inside the root>"``. The root is a directory given in ``paths``
(for a file given by name, its folder), with symbolic links resolved; its name is its path relative
to the project that holds it (the nearest directory above it with ``config/defaults.env``, see
:mod:`brain.config`), so ``config/kb/faq.md`` in a brain checkout, or, outside any project, the
directory's own name (``kb/faq.md``). Neither depends on the working directory or on how the folder
was reached (relative, absolute or symlinked path), and a project keeps its names when it is moved
or cloned elsewhere. Two different folders with the same name outside any project share names:
give them different names, or put them in a project.

**The mark.** Ingested documents are ``type="faq"``, ``source="kb"`` and carry ``kb_file``,
``kb_names`` (``KB_NAMES``: how ``kb_file`` was formed), ``kb_hash`` (the file's content hash, with
the parser and chunker settings), ``kb_docs`` (how many documents the file produced) and
``kb_text_hash``. Only documents with this mark are ever updated or deleted; memories, turns,
summaries, the persona and FAQ entries written by other means are never touched.

**Older names.** Documents without ``kb_names`` were named by an earlier version relative to the
working directory of that run (or absolute outside it). A run finds the files they belong to and
re-keys them under the file's current name, re-using their stored vectors (nothing is embedded
again): a relative old name belongs to a file whose path ends with it, an absolute one to the file it
resolves to. A relative old name that fits several files, or shares no text with the one file it
fits, is not claimed; it counts as a missing file (below). Copies left by runs from different
directories are removed this way too.

**Ids** are ``derived_id("kb", kb_file, n, digest)`` where ``digest`` hashes the document's text and
its content metadata (topic, specialist, heading, part, extra fields) and ``n`` counts earlier
documents of the same file with the same digest. The same files always give the same ids, so a
re-run converges. Position in the file is deliberately not part of the id: inserting a section
adds one document instead of renumbering (and rewriting) every later one.

**A run, per file.** An unchanged file (every stored document of it carries the current ``kb_hash``
and there are ``kb_docs`` of them) is not even parsed. A changed file is parsed and chunked; its new
documents are written first (vectors: re-used from any ingested document with the same text, else
embedded, in large batches across files), documents whose id is kept get their bookkeeping fields
refreshed (a metadata-only write, no embedding), then its stale documents are deleted. A run that
is interrupted anywhere leaves each file either as before, or with its new documents next to old
ones; the next run sees the mismatch and finishes the file. A file that cannot be read or parsed is
reported (file and line) and left exactly as it was in the store; the other files are ingested.

**Counts** in :class:`IngestReport` (identical with ``dry_run``, which writes and embeds nothing):
files are counted as ``files_new``, ``updated`` (changed), ``files_unchanged``, ``files_migrated``
(re-keyed from an older name) and ``files_bad`` (could not be read or parsed); documents as
``added``, ``unchanged``, ``removed`` and ``migrated``, and ``embedded`` texts (see the class).

**Prune.** Files are "gone" when they were ingested from inside a directory given in ``paths`` and
are no longer there (a file given by name is never pruned). They are listed in
``missing_files``; with ``prune=True`` their documents are deleted. An older relative name is inside
a given directory when it starts with the directory's path as seen from one of its parents (the run
that wrote it was started above the directory).

**Progress** (``progress=True``): a bar on a terminal, moved by every embedded batch, else a log line
now and then (:mod:`brain.progress`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from brain.chunking import TokenChunker
from brain.config import find_project_root
from brain.ids import derived_id
from brain.progress import ProgressOptions, open_progress
from brain.schemas import metadata_value_problem
from brain.text.markdown import markdown_sections, slugify

if TYPE_CHECKING:
    from brain.store import RagStore

#: bumped when parsing changes what documents a file gives: every file is then re-read once
PARSER_VERSION = "kb-parser/1"
#: how ``kb_file`` names are formed (root name / path inside the root); documents without it are older
KB_NAMES = 2
SUPPORTED = {".md": "markdown", ".markdown": "markdown", ".jsonl": "jsonl", ".csv": "csv", ".txt": "text"}
#: metadata keys an input may not set through extra fields / columns
RESERVED_FIELDS = frozenset({
    "id", "text", "embedding", "document", "type", "timestamp", "ts_epoch", "source", "scope",
    "question", "answer", "topic", "specialist", "specialist_name", "_specialist_name", "version", "_version",
})
#: new texts embedded per call, across files; each group is then written in one call. (Writing in a
#: thread while the next group is embedded was measured: no gain, the 2 cores are busy embedding.)
EMBED_GROUP = 1024
MAX_PROBLEMS_PER_FILE = 20

_QUESTION = re.compile(r"^\s*(?:\*\*|__)?Q(?:\*\*|__)?\s*:")
_ANSWER = re.compile(r"^\s*(?:\*\*|__)?A(?:\*\*|__)?\s*:")


# ---- the report ------------------------------------------------------------------------------------
@dataclass
class IngestReport:
    """What a run did (or, with ``dry_run``, would do: the same numbers, nothing written or embedded).

    Files:

    - ``files_read``: supported files read and parsed (or recognised as unchanged) without error.
    - ``files_new``: files that had no documents in the store, now ingested.
    - ``updated``: files (not documents) that had ingested documents which no longer matched the
      file (changed since the last run, or left half-done by an interrupted run) and were brought in
      step.
    - ``files_unchanged``: files whose documents were already in step (nothing written).
    - ``files_migrated``: unchanged files whose documents were stored under an older name (see the
      module docstring) and were re-keyed under the current one, with their stored vectors.
    - ``files_bad``: files (or given paths) that could not be found, read or parsed; ``errors`` says
      why. They are left exactly as they were in the store.

    Documents:

    - ``added``: documents written under an id that was not stored before.
    - ``unchanged``: documents whose id was already stored and is kept (when their file changed
      elsewhere, their ``kb_hash`` / ``kb_docs`` are refreshed with a metadata-only write).
    - ``removed``: ingested documents deleted: stale chunks of changed files, and with ``prune``
      every document of a file in ``missing_files``.
    - ``migrated``: documents of migrated files, re-keyed under the current name (not embedded).
    - ``embedded``: texts sent to the embedder, at most ``added``: a text identical to one already
      stored (a moved file, a duplicate entry) re-uses that vector.
    - ``skipped``: ``{"path", "reason"}`` of files that are not knowledge-base files (by extension).
    - ``errors``: ``{"path", "line", "message"}`` (``line`` None when not about one line) of paths
      that do not exist, files that cannot be read or parsed (left exactly as they were in the
      store, and never pruned) and failed writes (re-running completes them).
    - ``warnings``: ``{"path", "line", "message"}``: ingested with a loss, e.g. a column whose value
      Chroma cannot store, or a ``Q:`` without ``A:``. Reported when the file is parsed, i.e. not
      again on runs where the file is unchanged.
    - ``missing_files``: ingested files that were under a directory given in this run and are gone;
      ``pruned`` tells whether their documents were removed.
    """

    files_read: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}
    errors: list[dict] = field(default_factory=list)  # {"path", "line" (int | None), "message"}
    dry_run: bool = False
    embedded: int = 0
    warnings: list[dict] = field(default_factory=list)  # {"path", "line", "message"}: ingested, with a loss
    missing_files: list[str] = field(default_factory=list)  # ingested before, gone from the given folders
    pruned: bool = False  # whether missing files' documents were (or, dry run, would be) removed
    files_new: int = 0
    files_unchanged: int = 0
    files_migrated: int = 0
    files_bad: int = 0
    migrated: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing failed (skipped files and warnings do not count as failures)."""
        return not self.errors

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}

    def summary(self) -> str:
        def plural(n: int, word: str) -> str:
            return f"{n} {word}{'' if n == 1 else 's'}"

        verb = "would be " if self.dry_run else ""
        head = "Dry run, nothing written. " if self.dry_run else ""
        files = f"{plural(self.files_read, 'file')} read, {self.files_new} new, {self.updated} changed, " \
                f"{self.files_unchanged} unchanged"
        if self.files_migrated:
            files += f", {self.files_migrated} {verb}migrated to stable names"
        if self.files_bad:
            files += f"; {plural(self.files_bad, 'bad file')}"
        docs = (f"{plural(self.added, 'document')} {verb}added "
                f"({self.embedded} {'to embed' if self.dry_run else 'embedded'}), {self.unchanged} unchanged, "
                f"{self.removed} {verb}removed")
        if self.migrated:
            docs += f", {self.migrated} {verb}re-keyed (vectors reused)"
        lines = [f"{head}{files}. {docs}."]
        if self.skipped:
            lines.append(f"Skipped {plural(len(self.skipped), 'file')}:")
            lines += [f"  {s['path']}: {s['reason']}" for s in self.skipped[:10]]
            if len(self.skipped) > 10:
                lines.append(f"  ... and {len(self.skipped) - 10} more")
        if self.missing_files:
            action = ("would be removed" if self.dry_run else "removed") if self.pruned else "kept; --prune removes them"
            lines.append(f"{plural(len(self.missing_files), 'ingested file')} no longer present ({action}): "
                         + ", ".join(self.missing_files[:10]) + (" ..." if len(self.missing_files) > 10 else ""))
        for kind, items in (("warning", self.warnings), ("error", self.errors)):
            if items:
                lines.append(f"{plural(len(items), kind)}:")
                for item in items[:20]:
                    where = item["path"] if item.get("line") is None else f"{item['path']}:{item['line']}"
                    lines.append(f"  {where}: {item['message']}")
                if len(items) > 20:
                    lines.append(f"  ... and {len(items) - 20} more")
        return "\n".join(lines)

    def _error(self, path: str, line: int | None, message: str) -> None:
        self.errors.append({"path": path, "line": line, "message": message})


# ---- parsed content ---------------------------------------------------------------------------------
@dataclass
class _Draft:
    """One document before chunking: its text and content metadata."""

    text: str
    meta: dict[str, Any]


@dataclass
class _Parsed:
    drafts: list[_Draft] = field(default_factory=list)
    errors: list[tuple[int | None, str]] = field(default_factory=list)
    warnings: list[tuple[int | None, str]] = field(default_factory=list)


@dataclass
class _SourceFile:
    path: Path  # the resolved root joined with the path inside it
    kb_file: str  # its name in the store
    kind: str


@dataclass
class _FilePlan:
    kb_file: str
    kb_hash: str
    category: str  # "new", "changed" or "migrated"
    new: list[dict]  # documents (id, text, metadata) to write under new ids
    refresh: list[dict]  # kept documents whose bookkeeping fields change (re-written with their stored vector)
    kept: int
    stale: list[str]  # ids to delete after the write


@dataclass
class _GivenDirectory:
    name: str  # its root name
    paths: tuple[str, ...]  # its absolute spellings: resolved, and as given


def _extra_problem(key: Any, value: Any) -> str | None:
    if not isinstance(key, str) or not key.strip():
        return "a field needs a non-empty name"
    if key in RESERVED_FIELDS or key.startswith("kb_"):
        return "this name is reserved"
    if key.startswith(("$", "#", "chroma:")):
        return "names cannot start with '$', '#' or 'chroma:'"
    return metadata_value_problem(value)


def _add_extras(meta: dict[str, Any], extras: Iterable[tuple[str, Any]], parsed: _Parsed, line: int | None) -> None:
    for key, value in extras:
        problem = _extra_problem(key, value)
        if problem:
            shown = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
            parsed.warnings.append((line, f"field {key!r} = {shown[:80]} not stored: {problem}"))
        else:
            meta[key] = list(value) if isinstance(value, tuple) else value


def _faq_draft(question: str, answer: str, topic: str, specialist: str | None, version: str | None) -> _Draft:
    meta: dict[str, Any] = {"topic": topic, "kb_kind": "row"}
    if specialist:
        meta["_specialist_name"] = specialist
    if version:
        meta["_version"] = version
    return _Draft(f"Q: {question.strip()}\nA: {answer.strip()}", meta)


# ---- parsers -----------------------------------------------------------------------------------------
def _front_matter(lines: list[str], parsed: _Parsed) -> tuple[dict[str, Any], str | None, int]:
    """``(file metadata, topic or None, index of the first body line)``; no front matter -> ({}, None, 0)."""
    if not lines or lines[0].strip() != "---":
        return {}, None, 0
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, None, 0  # a lone '---' is a thematic break, not front matter
    meta: dict[str, Any] = {}
    topic = None
    for i in range(1, end):
        raw = lines[i].strip()
        if not raw or raw.startswith("#"):
            continue
        key, sep, value = raw.partition(":")
        key, value = key.strip(), value.strip().strip("'\"")
        if not sep or not key:
            parsed.errors.append((i + 1, f"front matter line must be 'key: value', got {raw!r}"))
        elif key == "topic":
            topic = slugify(value) if value else None
        elif key == "specialist":
            if value:
                meta["_specialist_name"] = value
        elif key == "version":
            if value:
                meta["_version"] = value
        else:
            _add_extras(meta, [(key, value)], parsed, i + 1)
    return meta, topic, end + 1


def parse_markdown(text: str, default_topic: str) -> _Parsed:
    """Sections and Q:/A: blocks of a Markdown file (see the module docstring)."""
    parsed = _Parsed()
    lines = text.split("\n")
    file_meta, fm_topic, first = _front_matter(lines, parsed)

    for section in markdown_sections(lines[first:], first_line=first + 1):
        title = (section.title or "section") if section.level else ""
        base = {**file_meta, "topic": fm_topic or (slugify(title) if title else default_topic)}
        if title:
            base["kb_heading"] = title
        head = [(section.lines[0].number, section.lines[0].text)] if section.level else []
        blocks: list[list[tuple[int, str]]] = [[]]  # blocks[0]: the section's text before its first Q:
        answered: list[bool] = [True]
        for line in section.body:
            if not line.code and _QUESTION.match(line.text):
                blocks.append([])
                answered.append(False)
            elif not line.code and _ANSWER.match(line.text):
                answered[-1] = True
            blocks[-1].append((line.number, line.text))
        if "\n".join(line for _, line in blocks[0]).strip():
            parsed.drafts.append(_Draft("\n".join(line for _, line in head + blocks[0]).strip(),
                                        {**base, "kb_kind": "section"}))
        for block, has_answer in zip(blocks[1:], answered[1:]):
            qa = "\n".join(line for _, line in block).strip()
            if not has_answer:
                parsed.warnings.append((block[0][0], f"a question without an 'A:' line (kept as written): "
                                                     f"{qa.splitlines()[0][:80]!r}"))
            parsed.drafts.append(_Draft(qa, {**base, "kb_kind": "qa"}))
    return parsed


def _row_fields(row: dict[str, Any], line: int, parsed: _Parsed, default_topic: str, known: dict[str, str]) -> None:
    """One FAQ row (keys already mapped to question/answer/topic/specialist/version where known)."""
    values = {name: row.get(col) for name, col in known.items()}
    problems = []
    for name in ("question", "answer"):
        value = values[name]
        if not isinstance(value, str) or not value.strip():
            problems.append(f"'{name}' must be a non-empty string, got {value!r}")
    for name in ("topic", "specialist", "version"):
        value = values.get(name)
        if value is not None and not isinstance(value, str):
            problems.append(f"'{name}' must be a string, got {value!r}")
    if problems:
        parsed.errors.append((line, "; ".join(problems)))
        return
    topic = slugify(values["topic"]) if values.get("topic") and values["topic"].strip() else default_topic
    draft = _faq_draft(values["question"], values["answer"], topic,
                       (values.get("specialist") or "").strip() or None, (values.get("version") or "").strip() or None)
    known_cols = set(known.values())
    _add_extras(draft.meta, ((k, v) for k, v in row.items() if k not in known_cols), parsed, line)
    parsed.drafts.append(draft)


_ROW_FIELDS = ("question", "answer", "topic", "specialist", "version")


def parse_jsonl(text: str, default_topic: str) -> _Parsed:
    parsed = _Parsed()
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            parsed.errors.append((line_no, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(row, dict):
            parsed.errors.append((line_no, f"each line must be a JSON object, got {type(row).__name__}"))
            continue
        _row_fields(row, line_no, parsed, default_topic, {name: name for name in _ROW_FIELDS})
    return parsed


def parse_csv(text: str, default_topic: str) -> _Parsed:
    parsed = _Parsed()
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    known: dict[str, str] = {}
    header_line = 1
    previous_end = 0
    try:
        for row in reader:
            line_no, previous_end = previous_end + 1, reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header, header_line = [cell.strip() for cell in row], line_no
                lowered = [h.casefold() for h in header]
                duplicates = sorted({h for h in header if lowered.count(h.casefold()) > 1 and h})
                if duplicates:
                    parsed.errors.append((line_no, f"duplicate columns: {', '.join(duplicates)}"))
                    return parsed
                known = {name: header[lowered.index(name)] for name in _ROW_FIELDS if name in lowered}
                missing = [name for name in ("question", "answer") if name not in known]
                if missing:
                    parsed.errors.append((line_no, f"no {' or '.join(repr(m) for m in missing)} column in the header "
                                                   f"(columns: {', '.join(header) or 'none'})"))
                    return parsed
                continue
            if len(row) != len(header):
                parsed.errors.append((line_no, f"row has {len(row)} fields but the header (line {header_line}) has "
                                               f"{len(header)}; quote values that contain commas"))
                continue
            cells = {}
            for key, value in zip(header, row):
                if key in known.values():
                    cells[key] = value if value.strip() else None
                elif value.strip():
                    cells[key] = value
            _row_fields(cells, line_no, parsed, default_topic, known)
    except csv.Error as exc:
        parsed.errors.append((previous_end + 1, f"not valid CSV: {exc}"))
    if header is None:
        return parsed  # an empty file: no documents
    return parsed


def parse_text(text: str, default_topic: str) -> _Parsed:
    parsed = _Parsed()
    if text.strip():
        parsed.drafts.append(_Draft(text.strip(), {"topic": default_topic, "kb_kind": "text"}))
    return parsed


_PARSERS = {"markdown": parse_markdown, "jsonl": parse_jsonl, "csv": parse_csv, "text": parse_text}


# ---- files ---------------------------------------------------------------------------------------------
def kb_root_name(directory: str | os.PathLike) -> str:
    """The stable name of a knowledge-base root: its path relative to the project holding it
    (``.`` for the project itself), else the directory's own name (see the module docstring)."""
    resolved = Path(directory).resolve()
    project = find_project_root(resolved)
    if project is not None:
        return resolved.relative_to(project).as_posix()
    return resolved.name or resolved.as_posix()


def _joined(root_name: str, inside: str) -> str:
    return inside if root_name == "." else f"{root_name}/{inside}"


def kb_name(path: str | os.PathLike) -> str:
    """How ``path`` is named in ``kb_file``: a directory by its root name, a file given by name by
    its folder's root name and its own name. The same from any working directory."""
    path = Path(path)
    if path.is_dir():
        return kb_root_name(path)
    return _joined(kb_root_name(path.parent), path.name)


def _under(kb_file: str, directory: str) -> bool:
    if directory == ".":
        return not os.path.isabs(kb_file)
    return kb_file.startswith(directory.rstrip("/") + "/")


def _legacy_under(old_name: str, directory: _GivenDirectory) -> bool:
    """Whether an older name (relative to the working directory of its run, or absolute) lies inside
    ``directory``, assuming that run was started at or above the directory."""
    if os.path.isabs(old_name):
        return any(old_name.startswith(path.rstrip("/") + "/") for path in directory.paths)
    for path in directory.paths:
        parts = path.strip("/").split("/")
        if any(old_name.startswith("/".join(parts[i:]) + "/") for i in range(len(parts))):
            return True
    return False


def _collect(paths: Sequence[str | os.PathLike], report: IngestReport) -> tuple[list[_SourceFile], list[_GivenDirectory]]:
    files: dict[str, _SourceFile] = {}
    directories: list[_GivenDirectory] = []

    def add(path: Path, root: Path, root_name: str) -> None:
        kind = SUPPORTED.get(path.suffix.lower())
        name = _joined(root_name, path.relative_to(root).as_posix())
        if kind is None:
            report.skipped.append({"path": name, "reason": f"unsupported file type {path.suffix or '(none)'!r}; "
                                                           f"expected {', '.join(SUPPORTED)}"})
        elif name not in files:
            files[name] = _SourceFile(path, name, kind)

    for given in paths:
        path = Path(given)
        if path.is_dir():
            root = path.resolve()
            name = kb_root_name(root)
            directories.append(_GivenDirectory(name, tuple(dict.fromkeys([root.as_posix(),
                                                                           Path(os.path.abspath(path)).as_posix()]))))
            for folder, dirs, names in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for file_name in sorted(names):
                    if not file_name.startswith("."):
                        add(Path(folder) / file_name, root, name)
        elif path.is_file():
            root = path.parent.resolve()  # the folder's links resolved, the file's own name kept
            add(root / path.name, root, kb_root_name(root))
        elif path.exists():
            report.skipped.append({"path": kb_name(path), "reason": "not a regular file or directory"})
        else:
            report._error(str(given), None, "no such file or directory")
            report.files_bad += 1
    return list(files.values()), directories


def _older_names(files: list[_SourceFile], stored: dict[str, dict[str, dict[str, Any]]],
                 report: IngestReport) -> dict[str, list[tuple[str, bool]]]:
    """``{kb_file: [(older name, exact), ...]}``: stored names written by an earlier version (no
    ``kb_names``) that belong to a file of this run. ``exact``: an absolute name resolving to the
    file; otherwise a relative name the file's path ends with (claimed only if the texts agree)."""
    current = {f.kb_file for f in files}
    older = [name for name, docs in stored.items()
             if name not in current and not any("kb_names" in m for m in docs.values())]
    if not older:
        return {}
    exact: dict[str, str] = {}
    by_suffix: dict[str, set[str]] = {}
    for f in files:
        for spelling in {f.path.as_posix(), Path(os.path.realpath(f.path)).as_posix()}:
            exact.setdefault(spelling, f.kb_file)
            parts = spelling.split("/")
            for i in range(1, len(parts)):
                by_suffix.setdefault("/".join(parts[i:]), set()).add(f.kb_file)
    found: dict[str, list[tuple[str, bool]]] = {}
    for name in older:
        if os.path.isabs(name):
            owner = exact.get(name) or exact.get(Path(os.path.realpath(name)).as_posix())
            if owner is not None:
                found.setdefault(owner, []).append((name, True))
            continue
        owners = by_suffix.get(os.path.normpath(name).replace(os.sep, "/"), set())
        if len(owners) == 1:
            found.setdefault(next(iter(owners)), []).append((name, False))
        elif owners:
            report.warnings.append({"path": name, "line": None, "message": (
                f"ingested under an older name that fits {len(owners)} files ({', '.join(sorted(owners)[:3])}); "
                f"left as is (--prune on its folder removes it)")})
    return found


def _decode(raw: bytes) -> str:
    """UTF-8 (a leading BOM is dropped) with universal newlines; raises UnicodeDecodeError."""
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _utf8_problem(raw: bytes, exc: UnicodeDecodeError) -> tuple[int, str]:
    line = raw.count(b"\n", 0, exc.start) + 1
    column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
    return line, (f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {column}); "
                  f"save the file as UTF-8")


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _file_hash(raw: bytes, chunker: TokenChunker) -> str:
    h = hashlib.sha256(f"{PARSER_VERSION}\x1f{chunker.signature}\x1f".encode())
    h.update(raw)
    return h.hexdigest()[:32]


def _documents(kb_file: str, kb_hash: str, drafts: list[_Draft], chunker: TokenChunker) -> list[dict]:
    """The file's documents with ids and full metadata (see the module docstring)."""
    pieces: list[tuple[str, dict[str, Any]]] = []
    for draft in drafts:
        parts = chunker.chunk(draft.text)
        for i, part in enumerate(parts):
            pieces.append((part, {**draft.meta, "kb_part": i + 1, "kb_parts": len(parts)}))
    seen: dict[str, int] = {}
    docs = []
    for text, meta in pieces:
        digest = _digest(text, meta)
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        docs.append({
            "id": derived_id("kb", kb_file, str(n), digest), "text": text, "type": "faq", "source": "kb", **meta,
            "kb_file": kb_file, "kb_names": KB_NAMES, "kb_hash": kb_hash, "kb_docs": len(pieces),
            "kb_text_hash": _text_hash(text),
        })
    return docs


# ---- the store side ----------------------------------------------------------------------------------------
_BOOKKEEPING = ("kb_hash", "kb_docs", "kb_names")


def _is_ingested(meta: dict[str, Any] | None) -> bool:
    return bool(meta) and meta.get("type") == "faq" and meta.get("source") == "kb" and isinstance(
        meta.get("kb_file"), str) and isinstance(meta.get("kb_hash"), str) and isinstance(meta.get("kb_text_hash"), str)


def scan_ingested(store: RagStore) -> dict[str, dict[str, dict[str, Any]]]:
    """Every ingested document's metadata: ``{kb_file: {id: metadata}}`` (metadata only, paged)."""
    where = {"$and": [{"type": "faq"}, {"source": "kb"}]}
    page_size = max(1, min(int(store.max_batch_size), 2000))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    offset = 0
    while True:
        page = store.col.get(where=where, include=["metadatas"], limit=page_size, offset=offset)
        ids, metas = page["ids"], page["metadatas"] or []
        for doc_id, meta in zip(ids, metas):
            if _is_ingested(meta):
                out.setdefault(meta["kb_file"], {})[doc_id] = meta
        if len(ids) < page_size:
            return out
        offset += len(ids)


def _plan_file(source: _SourceFile, stored: dict[str, dict[str, Any]],
               older: list[tuple[str, bool, dict[str, dict[str, Any]]]], chunker: TokenChunker,
               report: IngestReport) -> tuple[_FilePlan | None, list[str]]:
    """Read, compare, parse: the file's plan (None when there is nothing to write; counted here), and
    the older names whose documents the plan takes over. ``older``: (name, exact, documents) of the
    older names that fit the file; a guess (not exact) is taken over only if the texts agree."""
    try:
        raw = source.path.read_bytes()
    except OSError as exc:
        report._error(source.kb_file, None, f"cannot read the file: {exc.strerror or exc}")
        report.files_bad += 1
        return None, []
    kb_hash = _file_hash(raw, chunker)
    if not older and stored and all(m.get("kb_hash") == kb_hash and m.get("kb_docs") == len(stored)
                                    and m.get("kb_names") == KB_NAMES for m in stored.values()):
        report.files_read += 1
        report.files_unchanged += 1
        report.unchanged += len(stored)
        return None, []
    try:
        text = _decode(raw)
    except UnicodeDecodeError as exc:
        report._error(source.kb_file, *_utf8_problem(raw, exc))
        report.files_bad += 1
        return None, []
    default_topic = slugify(source.path.stem)
    parsed = _PARSERS[source.kind](text, default_topic)
    if parsed.errors:
        for line, message in parsed.errors[:MAX_PROBLEMS_PER_FILE]:
            report._error(source.kb_file, line, message)
        if len(parsed.errors) > MAX_PROBLEMS_PER_FILE:
            report._error(source.kb_file, None, f"... and {len(parsed.errors) - MAX_PROBLEMS_PER_FILE} more problems")
        report._error(source.kb_file, None, "file not ingested; its documents in the store are unchanged")
        report.files_bad += 1
        return None, []
    report.warnings.extend({"path": source.kb_file, "line": line, "message": message} for line, message in parsed.warnings)
    report.files_read += 1
    docs = _documents(source.kb_file, kb_hash, parsed.drafts, chunker)
    texts = {d["kb_text_hash"] for d in docs}
    claimed = []
    for name, exact, group in older:
        if not exact and not any(m.get("kb_hash") == kb_hash or m.get("kb_text_hash") in texts for m in group.values()):
            report.warnings.append({"path": name, "line": None, "message": (
                f"ingested under an older name that fits {source.kb_file} but shares no text with it; "
                f"left as is (--prune on its folder removes it)")})
            continue
        claimed.append(name)
        stored = {**stored, **group}
        first_seen = {m.get("kb_text_hash"): m.get("timestamp") for m in group.values() if m.get("timestamp")}
        for d in docs:  # a re-keyed document keeps the time it was first ingested
            if d["kb_text_hash"] in first_seen and d["id"] not in stored:
                d.setdefault("timestamp", first_seen[d["kb_text_hash"]])
    ids = {d["id"] for d in docs}
    new = [d for d in docs if d["id"] not in stored]
    refresh = [d for d in docs if d["id"] in stored
               and any(stored[d["id"]].get(key) != d[key] for key in _BOOKKEEPING)]
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
            claimed or any(m.get("kb_names") != KB_NAMES for m in stored.values())):
        category = "migrated"
    else:
        category = "changed"
    return _FilePlan(source.kb_file, kb_hash, category, new, refresh, kept, stale), claimed


def _groups(plans: list[_FilePlan], size: int) -> Iterable[list[_FilePlan]]:
    group: list[_FilePlan] = []
    pending = 0
    for plan in plans:
        group.append(plan)
        pending += len(plan.new)
        if pending >= size:
            yield group
            group, pending = [], 0
    if group:
        yield group


def _vectors(store: RagStore, group: list[_FilePlan], text_index: dict[str, str], report: IngestReport,
             progress: Any) -> dict[str, Any]:
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
    vectors: dict[str, Any] = {}
    if sources:
        for doc in store.get(list(sources), include_embeddings=True):
            text_hash = sources.get(doc.id)
            if text_hash is not None and _text_hash(doc.text) == text_hash and doc.embedding is not None:
                vectors[text_hash] = doc.embedding
    progress.update(sum(docs_per_text[h] for h in vectors))
    # shortest first: each batch pads to a length close to its longest text
    todo = sorted(((h, t) for h, t in wanted.items() if h not in vectors), key=lambda item: len(item[1]))
    size = max(1, int(store.embedder.batch_size))
    for start in range(0, len(todo), size):
        batch = todo[start:start + size]
        embedded = store.embedder.embed_documents([t for _, t in batch])
        report.embedded += len(batch)
        for (text_hash, _), vector in zip(batch, embedded):
            vectors[text_hash] = vector
        progress.update(sum(docs_per_text[h] for h, _ in batch))
    return vectors


def _would_embed(group: list[_FilePlan], text_index: dict[str, str]) -> int:
    """Dry run: how many texts the group would embed (and remember them as if written)."""
    todo = {d["kb_text_hash"]: d["id"] for plan in group for d in plan.new if d["kb_text_hash"] not in text_index}
    text_index.update(todo)
    return len(todo)


def ingest_paths(
    store: RagStore,
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
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
    files, directories = _collect(paths, report)
    stored = scan_ingested(store)
    text_index = {m["kb_text_hash"]: doc_id for docs in stored.values() for doc_id, m in docs.items()}
    older = _older_names(files, stored, report)

    plans: list[_FilePlan] = []
    taken: set[str] = set()  # older names whose documents a file of this run took over (or keeps, if bad)
    with open_progress(progress, total=len(files), desc="reading", unit="file") as bar:
        for source in files:
            groups = [(name, exact, stored[name]) for name, exact in older.get(source.kb_file, [])]
            errors = len(report.errors)
            plan, claimed = _plan_file(source, stored.get(source.kb_file, {}), groups, chunker, report)
            taken.update(claimed)
            if len(report.errors) > errors:  # a bad file keeps everything it had, under any name
                taken.update(name for name, _ in older.get(source.kb_file, []))
            if plan is not None:
                plans.append(plan)
            bar.update(1)

    total = sum(len(p.new) + len(p.refresh) for p in plans)
    group_size = max(EMBED_GROUP, store.embedder.batch_size)
    with open_progress(progress, total=total, desc="planning" if dry_run else "embedding and writing",
                       unit="doc") as bar:
        if dry_run:
            for group in _groups(plans, group_size):
                report.embedded += _would_embed(group, text_index)
                for plan in group:
                    _count(report, plan, len(plan.stale))
                bar.update(sum(len(plan.new) + len(plan.refresh) for plan in group))
        else:
            for group in _groups(plans, group_size):
                try:
                    vectors = _vectors(store, group, text_index, report, bar)
                except Exception as exc:  # the embedder or the store failed: report every file of the batch
                    for plan in group:
                        report._error(plan.kb_file, None, f"embedding failed: {_describe(exc)}; file not updated")
                    continue
                _write_group(store, group, vectors, text_index, report)

    seen = {source.kb_file for source in files} | taken
    report.missing_files = sorted(name for name, docs in stored.items() if name not in seen and (
        any(_under(name, d.name) for d in directories)
        or (not any("kb_names" in m for m in docs.values()) and any(_legacy_under(name, d) for d in directories))))
    report.pruned = prune
    if prune and report.missing_files:
        gone = [doc_id for name in report.missing_files for doc_id in stored[name]]
        if dry_run:
            report.removed += len(gone)
        else:
            try:
                report.removed += store.delete(ids=gone)
            except Exception as exc:
                report._error(report.missing_files[0], None, f"pruning failed: {_describe(exc)}")
    return report


def _count(report: IngestReport, plan: _FilePlan, removed: int) -> None:
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


def _write_group(store: RagStore, group: list[_FilePlan], vectors: dict[str, Any], text_index: dict[str, str],
                 report: IngestReport) -> None:
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


def _write_file(store: RagStore, plan: _FilePlan, vectors: dict[str, Any], text_index: dict[str, str],
                report: IngestReport) -> None:
    """One file: its new and refreshed documents first, then its stale ones are deleted."""
    try:
        docs = [{**d, "embedding": vectors[d["kb_text_hash"]]} for d in plan.new + plan.refresh]
        if docs:
            store.upsert_docs(docs)
    except Exception as exc:  # the store refused or failed: this file stays as it was (or half-done)
        report._error(plan.kb_file, None, f"writing to the store failed: {_describe(exc)}; re-run to complete it")
        return
    _finish_file(store, plan, text_index, report)


def _finish_file(store: RagStore, plan: _FilePlan, text_index: dict[str, str], report: IngestReport) -> None:
    """After a file's documents are written: delete its stale ones and count it."""
    for d in plan.new:
        text_index[d["kb_text_hash"]] = d["id"]
    try:
        removed = store.delete(ids=plan.stale) if plan.stale else 0
    except Exception as exc:
        report._error(plan.kb_file, None, f"removing its old documents failed: {_describe(exc)}; re-run to complete it")
        return
    _count(report, plan, removed)


def _describe(exc: BaseException) -> str:
    from brain.errors import BrainError

    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, BrainError) else f"{type(exc).__name__}: {text}"


__all__ = ["IngestReport", "ingest_paths", "kb_name", "kb_root_name", "scan_ingested", "KB_NAMES", "parse_markdown", "parse_jsonl",
           "parse_csv", "parse_text", "PARSER_VERSION", "SUPPORTED"]
