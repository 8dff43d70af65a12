"""The report of an ingest run: what it did (or, dry, would do), file by file and document by document."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


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
    - ``files_bad``: files (or given paths) that could not be found, read or parsed, or are larger
      than ``MAX_KB_FILE_BYTES``; ``errors`` says why. They are left exactly as they were in the store.

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
    skipped: list[dict[str, object]] = field(default_factory=list)  # {"path", "reason"}
    errors: list[dict[str, object]] = field(default_factory=list)  # {"path", "line" (int | None), "message"}
    dry_run: bool = False
    embedded: int = 0
    warnings: list[dict[str, object]] = field(
        default_factory=list
    )  # {"path", "line", "message"}: ingested, with a loss
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

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}

    def add_error(self, path: str, line: int | None, message: str) -> None:
        self.errors.append({"path": path, "line": line, "message": message})
