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

Every document is then split by :class:`~brain.rules.chunking.TokenChunker` so none exceeds the
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
reported (file and line) and left exactly as it was in the store; the other files are ingested. So
is a file larger than ``MAX_KB_FILE_BYTES`` (1 MiB; a file's documents are embedded and written as
one group, so its size bounds the run's memory): the report names its size and the cap, and says to
split it.

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
now and then (:mod:`brain.text.progress`).

Modules: :mod:`~brain.features.ingest.parsers` (file -> drafts), :mod:`~brain.features.ingest.files` (names, collecting,
hashing, drafts -> documents), :mod:`~brain.features.ingest.plan` (what the store holds, what to change),
:mod:`~brain.features.ingest.apply` (embedding and writing; :func:`ingest_paths`), :mod:`~brain.features.ingest.report`.
"""

from __future__ import annotations

from brain.features.ingest.apply import ingest_paths
from brain.features.ingest.files import KB_NAMES, PARSER_VERSION, SUPPORTED, kb_name, kb_root_name
from brain.features.ingest.parsers import parse_csv, parse_jsonl, parse_markdown, parse_text
from brain.features.ingest.plan import MAX_KB_FILE_BYTES, scan_ingested
from brain.features.ingest.report import IngestReport

__all__ = [
    "KB_NAMES",
    "MAX_KB_FILE_BYTES",
    "PARSER_VERSION",
    "SUPPORTED",
    "IngestReport",
    "ingest_paths",
    "kb_name",
    "kb_root_name",
    "parse_csv",
    "parse_jsonl",
    "parse_markdown",
    "parse_text",
    "scan_ingested",
]
