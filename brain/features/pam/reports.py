"""What an export or an import did, as returned to callers: ``to_dict()`` for JSON; the CLI words it
(:mod:`brain.shells.cli.reports`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class ExportReport:
    out_dir: Path
    memory_store: Path
    embeddings: Path | None  # None when exported without embeddings
    memories: int
    embeddings_written: int
    checksum: str
    owner_id: str
    not_exportable: int = 0  # memories left out: imported with access.exportable = false
    parts_skipped: int = 0  # Xaibo continuation chunks and vector-index rows left out (parts, not memories)
    conversations: int = 0  # conversation files written (0 with conversations=False)
    messages: int = 0  # turns written as messages, over all conversation files
    summaries: int = 0  # summaries written into the conversation files
    conversations_dir: Path | None = None  # None when exported without conversations
    #: files (relative to out_dir) that existed and were overwritten by this export
    replaced: list[str] = field(default_factory=list)
    #: files of the previous brain export in out_dir that this one no longer writes, deleted (they would
    #: not match: embeddings.json without embeddings, conversations no longer in the store)
    removed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        for key in ("out_dir", "memory_store", "embeddings", "conversations_dir"):
            data[key] = None if data[key] is None else str(data[key])
        return data


@dataclass
class ImportReport:
    memory_store: Path
    embeddings: Path | None  # the embeddings file read, None when there was none
    memories: int  # memories in the file
    new: int = 0
    updated: int = 0
    unchanged: int = 0  # already stored exactly so: not written again
    vectors_reused: int = 0  # taken from the embeddings file (same model and dimension)
    vectors_embedded: int = 0  # computed from content by the store's embedder
    vectors_normalised: int = 0  # reused vectors that were not unit length, stored normalised
    owner_id: str | None = None
    conversations: int = 0  # conversation files read
    turns: int = 0  # turns in them (messages imported as turns)
    summaries: int = 0  # brain summaries in them
    conversation_new: int = 0  # turns and summaries newly written
    conversation_updated: int = 0
    conversation_unchanged: int = 0
    messages_skipped: dict[str, int] = field(default_factory=dict)  # e.g. {"role system": 2, "no text": 1}
    not_imported: dict[str, int] = field(default_factory=dict)  # relations, index entries without a file
    #: documents (memories, turns, summaries) of entities forgotten here since, not imported (include_forgotten)
    forgotten: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def written(self) -> int:
        return self.new + self.updated + self.conversation_new + self.conversation_updated

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["memory_store"] = str(self.memory_store)
        data["embeddings"] = None if self.embeddings is None else str(self.embeddings)
        data["written"] = self.written
        return data
