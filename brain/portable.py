"""Portable AI Memory (PAM) 1.0: export the store (memories and conversations), import it back or from another system.

``export_pam(store, out_dir)`` writes ``memory-store.json`` (schema ``portable-ai-memory``), unless
``embeddings=False`` ``embeddings.json`` (``portable-ai-memory-embeddings``): one embedding per memory,
the vector Chroma holds for it, under the store's embedder name (e.g. ``local/minilm-l6-v2``), and unless
``conversations=False`` one ``conversations/<file>.json`` (``portable-ai-memory-conversation``) per
conversation, listed in the memory store's ``conversations_index``.
``import_pam(store, path)`` reads such an export (``embeddings.json`` and conversations are optional) from
any PAM producer.

What goes out: every ``type=memory`` document, and every conversation: the turns and summaries sharing a
``conversation_id`` (a conversation whose turns are gone but whose summaries remain is exported with no
messages). Persona and FAQ documents are not part of PAM. An import brings memories and conversations;
``relations``, and ``conversations_index`` entries without a file (no ``storage``, or storage other than
``file``), are counted in the report and not kept.

Mapping (brain memory -> PAM memory object)

==========================  ===================================================================
brain                       PAM
==========================  ===================================================================
id (``doc-<uuid>``)         ``id``, unchanged. An imported memory keeps its PAM ``id`` as its
                            brain id, so a re-import (or an incremental export) merges by id.
                            (brain's own dedup by scope and text applies to ids it derives; an
                            imported memory with another id is a memory of its own.)
text                        ``content``; ``content_hash`` = ``sha256:`` + SHA-256 of the content
                            trimmed, lowercased, NFC-normalised, whitespace runs collapsed
metadata ``pam_type``       ``type``; absent -> ``fact``. A standard PAM type name selects that
                            type; ``custom:<name>`` (or any other string) -> ``type=custom``,
                            ``custom_type=<name>``. Set it when writing:
                            ``store.upsert_memory(text, pam_type="preference")``.
metadata ``pam_status``     ``status``; absent -> ``active``
tags                        ``tags``, normalised to ``^[a-z0-9][a-z0-9_-]*$`` (accents dropped,
                            lowercased, other characters -> ``-``, duplicates and tags left empty
                            dropped); the original tags go to ``metadata.brain.tags``
importance 1..5             ``metadata.brain.importance``. Not ``confidence``: PAM defines that as
                            system-computed certainty, not priority. Foreign memories import at 3.
timestamp                   ``temporal.created_at`` (UTC, ``...Z``). Import: ``updated_at`` when
                            present, else ``created_at``.
scope, source, entity,      ``metadata.brain.scope`` / ``.source`` / ``.entity`` /
conversation_id             ``.conversation_id``; also ``provenance.conversation_ref`` (the PAM id of the
                            conversation) when that conversation is exported, and then the memory is
                            in its ``derived_memories`` (the spec's MUST: both are derived from the
                            same value, so they agree). With conversations exported, a memory whose
                            conversation has no turns or summaries gets no ``conversation_ref`` (it
                            would dangle; the package validator rejects that). With
                            ``conversations=False`` there is no index and ``conversation_ref`` is
                            brain's conversation id as such. Import: a foreign memory whose
                            ``conversation_ref`` names an imported conversation gets that
                            conversation's brain id as its ``conversation_id``.
                            Foreign memories import as ``scope=global``, ``source=import``.
other metadata keys         ``metadata.brain.extra``
metadata ``pam_extra``      PAM fields brain has no place for (``summary``, ``confidence``, ``access``,
                            ``provenance``, a full ``temporal``, ``metadata`` beside ``brain``), kept
                            as JSON on import and written back unchanged on export
(always)                    ``provenance.platform = "brain"`` unless the memory came with its own
==========================  ===================================================================

A memory imported with ``access.exportable = false`` is kept but left out of exports (counted in
``ExportReport.not_exportable``). The rows of Xaibo modules that are parts rather than memories
(continuation chunks of a long memory, whose head carries the whole text, and raw vector-index rows)
are left out too (``ExportReport.parts_skipped``); the Engram mirror keeps them for restores.

Mapping (brain conversation -> PAM conversation file ``conversations/<file>.json``)

==========================  ===================================================================
brain                       PAM
==========================  ===================================================================
conversation_id             ``id``, unchanged (``conv-...``: the spec says SHOULD be a UUID v4, not
                            MUST, and its own example uses ``conv-001``; keeping it makes
                            ``conversation_ref`` readable and the round trip exact); also
                            ``provider = {"name": "brain", "conversation_id": ...}`` and
                            ``raw_metadata.brain.conversation_id``. The file is ``<id>.json`` when
                            the id is a plain file name, else ``conv-<sha256 of it, 32 hex>.json``.
turns (in ``turn_index``    ``messages``, in that order: ``id`` = the turn's document id, ``role``,
order, then time)           ``content = {"type": "text", "text": ...}``, ``created_at`` = timestamp
                            (UTC, ``...Z``), ``parent_id`` / ``children_ids`` linking them as a
                            linear DAG; ``raw_metadata.brain`` = ``{turn_index, source, scope,
                            extra}`` (``extra``: every other metadata key).
summaries                   ``raw_metadata.brain.summaries``: ``[{id, text, summary_index,
                            turn_range, created_at, source, scope, extra}]`` in ``summary_index``
                            order (PAM has no place for summaries; ``raw_metadata`` is its
                            provider-specific, verbatim-preserved block).
first and last time         ``temporal.created_at`` / ``updated_at`` (over turns and summaries)
roles present               ``participants`` (``[{"role": "user"}, {"role": "assistant"}]``)
(index entry)               ``{id, platform = provider.name, title?, message_count, temporal, tags?,
                            derived_memories, storage = {"type": "file", "ref":
                            "conversations/<file>.json", "format": "json"}}``
turn metadata ``pam_extra`` message fields brain has no place for (``provider_message_id``, ``model``,
                            ``token_count``, ``attachments``, ``citations``, ``tool_calls``, other
                            ``raw_metadata``), kept as JSON on import, written back on export
first turn's metadata       conversation fields brain has no place for (a foreign ``id``, ``title``,
``pam_conversation``        ``provider``, ``temporal``, ``participants``, ``model``,
                            ``system_instruction``, ``is_archived``, ``tags``, ``import_metadata``,
                            other ``raw_metadata``), kept as JSON on import, written back on export
==========================  ===================================================================

Conversations of another producer (no ``raw_metadata.brain``): the brain id is
``conv-<uuid5 of the PAM id>`` (:func:`foreign_conversation_id`) and the PAM id is kept in
``pam_conversation``, so a re-import lands on the same conversation and a re-export writes the same id;
turn ids are ``doc-<uuid5>`` of (PAM conversation id, message id); ``turn_index`` counts the kept
messages from 1; ``source=import``, ``scope=global``. Only ``user`` and ``assistant`` messages with text
become turns (multipart: the text and code parts joined by blank lines); ``system`` and ``tool``
messages, thinking steps (``is_thought``) and messages without text are skipped and counted in
``ImportReport.messages_skipped``. Message ids and DAG links of a foreign file are not kept (brain's
turns are linear; an export links them in turn order).

PAM embeddings are for memories only: imported turns and summaries are embedded from their text.

Import rules
- Everything is validated before anything is written: the official JSON Schemas (the ``portable-ai-memory``
  package's copies, checked with ``jsonschema-rs``, date-time formats included), unique memory ids,
  ``content_hash``, the ``integrity`` block, and the embeddings file (unique ``memory_id``, vector length =
  ``dimensions``, every ``memory_id`` a memory of the store, every ``embedding_ref`` naming an embedding of
  that very memory), then brain's own metadata rules. A problem raises :class:`~brain.errors.ValidationError`
  naming the file and the JSON path (``memory-store.json: memories[3].tags[0]: ...``); nothing is written.
- ``integrity.checksum``: a mismatch is an error (the file changed after export; drop the ``integrity``
  block to import it anyway). Accepted are both the RFC 8785 hash of the memories as written in the file
  and the hash of the ``portable-ai-memory`` package's model dump of them (the package hashes the latter,
  the spec's own example the former).
- Idempotent by id: a memory whose text and metadata equal the stored ones is not written again; a
  changed one is upserted and merged by the store's rule for the same memory (the higher importance,
  every tag, the later time). An id held by a non-memory document is an error.
- Vectors: the embedding a memory's ``embedding_ref`` names is reused when its ``model`` equals the
  store's embedder name; otherwise (another model, no embeddings file, a null ``embedding_ref``, a
  vector stored elsewhere) the memory is embedded from ``content``, which is authoritative. A null
  ``embedding_ref`` means "no vector", even when the embeddings file holds one for that memory (its
  content may have been edited since). Imported vectors are not trusted: a value that is not a finite
  number (``NaN``, ``Infinity``, ``1e999``) refuses the file whatever the model; a vector labelled with
  the store's model but of another dimension, or all zeros, refuses it too (it cannot be that model's
  vector); one that is not unit length is normalised before it is stored (the store compares by
  cosine) and counted in ``ImportReport.vectors_normalised``.
- Files nested deeper than :data:`MAX_NESTING` levels are refused (PAM needs fewer than 10).
- Conversation files: every file the index names with ``storage.type = "file"`` must exist (its path
  relative to the memory store's directory, inside it) and validate against the conversation schema,
  carry the index entry's ``id`` and the memory store's ``schema_version``; brain's blocks in
  ``raw_metadata`` are checked like the memory's (field names, extra values, turn/summary metadata rules).
  Problems name the file and the JSON path (``conversations/conv-a.json: messages[1].role: ...``).
  Ids must be unique over memories, turns and summaries, and none may be held in the store by a
  document of another type.
- Turns and summaries keep their explicit ``turn_index`` / ``summary_index`` (the store assigns
  positions only to documents without one), so a later exchange goes after the imported turns.
- Idempotent by id for turns and summaries too: one stored exactly so is not written again.
- Memories, turns and summaries go to the store in one ``upsert_docs`` batch: all or nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import time
import unicodedata
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import cache, lru_cache
from itertools import islice, pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import rfc8785

from brain.errors import BrainError, ValidationError
from brain.ids import derived_id
from brain.memory_index import is_part
from brain.ranking import to_unit_length
from brain.schemas import (
    GLOBAL_SCOPE,
    DocType,
    Source,
    check_conversation_id,
    from_chroma,
    metadata_value_problem,
    parse_timestamp,
    validate_metadata,
)

if TYPE_CHECKING:
    from brain.rag_store import RagStore

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1.0"
MEMORY_STORE_FILE = "memory-store.json"
EMBEDDINGS_FILE = "embeddings.json"
CONVERSATIONS_DIR = "conversations"
SPEC_URI = "https://portable-ai-memory.org/spec/v1.0"
PLATFORM = "brain"
PAM_TYPES = (
    "fact", "preference", "skill", "context", "relationship", "goal",
    "instruction", "identity", "environment", "project",
)  # plus "custom", which needs a custom_type
PAM_STATUSES = ("active", "superseded", "deprecated", "retracted", "archived")
DEFAULT_TYPE = "fact"

#: brain metadata keys that carry PAM-only information
TYPE_KEY, STATUS_KEY, EXTRA_KEY = "pam_type", "pam_status", "pam_extra"
#: the key of brain's block inside a PAM memory's ``metadata``
BRAIN_KEY = "brain"

# memory metadata fields with a place of their own in the mapping (everything else is "extra")
_CORE_KEYS = frozenset(
    {"type", "timestamp", "ts_epoch", "source", "scope", "importance", "tags", "entity", "conversation_id"}
)
_PAM_KEYS = frozenset({TYPE_KEY, STATUS_KEY, EXTRA_KEY})
# keys an extra metadata field may not have: they mean something else in an upsert_docs item
_NOT_EXTRA = _CORE_KEYS | _PAM_KEYS | {"text", "id", "embedding"}
_BRAIN_FIELDS = ("scope", "source", "importance", "tags", "entity", "conversation_id", "extra")
# PAM memory fields kept verbatim in pam_extra when they differ from what an export would write
_PRESERVED = ("summary", "confidence", "access", "temporal", "provenance", "metadata")
_OWNER_NAMESPACE = uuid.UUID("3b8f6d1c-2f4e-4c51-9d0a-7e5b2a9c4f10")
# uuid5 namespace of the conv-<uuid> ids given to conversations of other PAM producers
_CONVERSATION_NAMESPACE = uuid.UUID("9c2e4b7a-61d3-4f0e-8a5b-3d7f1e6c2a94")

#: turn metadata key holding, on a conversation's first turn, the PAM conversation fields brain has
#: no place for (its PAM ``id`` when that is not the brain id, ``title``, ``provider``, ...), as JSON
CONVERSATION_KEY = "pam_conversation"
_TURN_CORE = frozenset({"type", "timestamp", "ts_epoch", "source", "scope", "conversation_id", "role", "turn_index"})
_SUMMARY_CORE = frozenset(
    {"type", "timestamp", "ts_epoch", "source", "scope", "conversation_id", "turn_range", "summary_index"}
)
_TURN_PAM_KEYS = frozenset({EXTRA_KEY, CONVERSATION_KEY})
_MESSAGE_BRAIN_FIELDS = ("turn_index", "source", "scope", "extra")
_SUMMARY_BRAIN_FIELDS = ("id", "text", "summary_index", "turn_range", "created_at", "source", "scope", "extra")
# PAM message / conversation fields kept (in pam_extra / pam_conversation) when they differ from an export's
_MESSAGE_PRESERVED = (
    "provider_message_id", "model", "token_count", "attachments", "citations", "tool_calls", "raw_metadata",
)
_CONVERSATION_PRESERVED = (
    "id", "provider", "title", "temporal", "participants", "model", "system_instruction", "is_archived", "tags",
    "import_metadata", "raw_metadata",
)
_ROLES = ("user", "assistant")
_MAX_REPORTED = 20  # problems spelled out in an error message (all of them are in .problems)
#: how deeply a PAM file may nest objects and lists; the spec's documents need fewer than 10 levels, and
#: the validators and serialisers downstream give up (with their own errors) at a few hundred
MAX_NESTING = 64
#: below this norm a vector has no direction (the embedders refuse such output too)
_MIN_NORM = 1e-12


# ---- reports -------------------------------------------------------------------------------------
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

    def to_dict(self) -> dict[str, Any]:
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
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def written(self) -> int:
        return self.new + self.updated + self.conversation_new + self.conversation_updated

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["memory_store"] = str(self.memory_store)
        data["embeddings"] = None if self.embeddings is None else str(self.embeddings)
        data["written"] = self.written
        return data


# ---- the spec's deterministic operations ---------------------------------------------------------
def normalize_content(text: str) -> str:
    """PAM's content normalisation: trim, lowercase, Unicode NFC, runs of whitespace -> one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text.strip().lower()))


def content_hash(text: str) -> str:
    """``sha256:<hex>`` of the normalised content (PAM ``content_hash``)."""
    return "sha256:" + hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def integrity_checksum(memories: list[Mapping[str, Any]]) -> str:
    """``sha256:<hex>`` of the RFC 8785 canonical JSON of the memories sorted by id."""
    ordered = sorted(memories, key=lambda m: m.get("id", ""))
    try:
        canonical = rfc8785.dumps(ordered)
    except rfc8785.CanonicalizationError as exc:  # e.g. an integer beyond I-JSON's 2**53
        culprit = next((m.get("id") for m in ordered if not _canonicalizable(m)), None)
        raise ValidationError(
            f"memory {culprit!r} cannot be written as RFC 8785 canonical JSON ({exc}); integers must lie "
            f"within +-(2**53-1): store larger numbers as strings",
            [{"item": None, "field": "id", "message": str(exc)}],
        ) from None
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def _canonicalizable(value: Any) -> bool:
    try:
        rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        return False
    return True


def pam_tag(tag: str) -> str | None:
    """A tag in PAM's pattern ``^[a-z0-9][a-z0-9_-]*$``, or None when nothing of it is left."""
    ascii_text = unicodedata.normalize("NFKD", tag).encode("ascii", "ignore").decode("ascii").lower()
    text = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9_-]+", "-", ascii_text))
    text = text.lstrip("-_").rstrip("-")
    return text or None


def pam_tags(tags: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(t for t in map(pam_tag, tags) if t))


def pam_time(value: datetime | str | float) -> str:
    """A time as the PAM package writes it: UTC, ``Z``, microseconds only when there are any."""
    return parse_timestamp(value).isoformat().replace("+00:00", "Z")


def embedding_id(memory_id: str) -> str:
    return f"emb-{memory_id}"


def default_owner_id(store: RagStore) -> str:
    """``BRAIN_OWNER_ID``, else a stable UUID derived from where the collection lives."""
    if store.settings.owner_id:
        return store.settings.owner_id
    where = store.settings.chroma_url or str(Path(store.settings.data_dir).resolve())
    return str(uuid.uuid5(_OWNER_NAMESPACE, f"{where}\x1f{store.settings.collection}"))


# ---- brain memory -> PAM memory object -----------------------------------------------------------
def _split_type(value: Any) -> tuple[str, str | None]:
    if value is None or value == "":
        return DEFAULT_TYPE, None
    text = str(value)
    if text in PAM_TYPES:
        return text, None
    custom = text.removeprefix("custom:") or text
    return "custom", custom


def _join_type(pam_type: str, custom_type: str | None) -> str | None:
    """The pam_type metadata value for a PAM type (None for the default)."""
    if pam_type == "custom":
        # a bare name reads back as custom unless it could mean something else
        plain = custom_type not in PAM_TYPES and custom_type != "custom" and not custom_type.startswith("custom:")
        return custom_type if plain else f"custom:{custom_type}"
    return None if pam_type == DEFAULT_TYPE else pam_type


def _load_extra(value: Any, doc_id: str, warnings: list[str], kind: str = "memory", key: str = EXTRA_KEY
                ) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        extra = orjson.loads(value) if isinstance(value, str) else None
    except orjson.JSONDecodeError:
        extra = None
    if not isinstance(extra, dict):
        warnings.append(f"{kind} {doc_id}: metadata {key} is not a JSON object; exported without it")
        return {}
    return extra


def _conversation_ref(meta: Mapping[str, Any], refs: Mapping[str, str] | None) -> str | None:
    """The PAM conversation a memory refers to: its conversation_id as such when no conversations are
    exported (``refs`` None), else the PAM id of its conversation when that one is exported."""
    conversation = meta.get("conversation_id")
    if not conversation:
        return None
    return conversation if refs is None else refs.get(conversation)


def _provenance(meta: Mapping[str, Any], kept: Any, refs: Mapping[str, str] | None) -> dict[str, Any]:
    if not isinstance(kept, dict) or not kept:
        out = {"platform": PLATFORM}
        ref = _conversation_ref(meta, refs)
        if ref:
            out["conversation_ref"] = ref
        return out
    if refs is None:
        return kept
    # with conversations exported, conversation_ref names one of them or nothing (the spec's consistency rule)
    out = {k: v for k, v in kept.items() if k != "conversation_ref"}
    ref = _conversation_ref(meta, refs)
    if ref:
        out["conversation_ref"] = ref
    return out


def _temporal(ts: datetime, kept: Any) -> dict[str, Any]:
    """``temporal`` for a memory last written at ``ts``: the imported block while the memory is as imported."""
    if isinstance(kept, dict) and kept.get("created_at"):
        try:
            kept_created = parse_timestamp(kept["created_at"])
            kept_latest = parse_timestamp(kept.get("updated_at") or kept["created_at"])
        except ValueError:
            kept = None
        else:
            if kept_latest == ts:
                return dict(kept)
            out = {k: v for k, v in kept.items() if k in ("valid_from", "valid_until", "superseded_by")}
            if kept_created <= ts:
                out["created_at"] = kept["created_at"]
                out["updated_at"] = pam_time(ts)
            else:
                out["created_at"] = pam_time(ts)
            return out
    return {"created_at": pam_time(ts)}


def memory_to_pam(
    doc_id: str, text: str, meta: Mapping[str, Any], embedding_ref: str | None = None,
    warnings: list[str] | None = None, conversation_refs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One stored memory (its metadata as ``store.get`` returns it) as a PAM memory object, in the form
    the ``portable-ai-memory`` package dumps it (no nulls, defaults filled), so checksums agree.
    ``conversation_refs`` (brain conversation id -> PAM conversation id) are the exported conversations;
    None when conversations are not exported."""
    warnings = warnings if warnings is not None else []
    extra = _load_extra(meta.get(EXTRA_KEY), doc_id, warnings)
    ts = parse_timestamp(meta["timestamp"])
    pam_type, custom_type = _split_type(meta.get(TYPE_KEY))
    status = meta.get(STATUS_KEY) or "active"
    if status not in PAM_STATUSES:
        warnings.append(f"memory {doc_id}: {STATUS_KEY}={status!r} is not a PAM status; exported as 'active'")
        status = "active"
    tags = list(meta.get("tags") or [])
    brain: dict[str, Any] = {
        "scope": meta.get("scope", GLOBAL_SCOPE),
        "source": meta.get("source", Source.SYSTEM.value),
        "importance": meta.get("importance", 3),
    }
    if tags:
        brain["tags"] = tags
    for key in ("entity", "conversation_id"):
        if meta.get(key) is not None:
            brain[key] = meta[key]
    others = {k: v for k, v in meta.items() if k not in _CORE_KEYS and k not in _PAM_KEYS}
    if others:
        brain["extra"] = others
    memory: dict[str, Any] = {"id": doc_id, "type": pam_type}
    if custom_type is not None:
        memory["custom_type"] = custom_type
    memory.update(status=status, content=text, content_hash=content_hash(text), tags=pam_tags(tags))
    for key in ("summary", "confidence"):
        if key in extra:
            memory[key] = extra[key]
    memory["temporal"] = _temporal(ts, extra.get("temporal"))
    memory["provenance"] = _provenance(meta, extra.get("provenance"), conversation_refs)
    if "access" in extra:
        memory["access"] = extra["access"]
    if embedding_ref is not None:
        memory["embedding_ref"] = embedding_ref
    kept_metadata = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    memory["metadata"] = {**kept_metadata, BRAIN_KEY: brain}
    return memory


# ---- brain conversation -> PAM conversation ------------------------------------------------------
def _ordered_turns(turns: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[tuple[str, str, Mapping[str, Any]]]:
    return sorted(turns, key=lambda t: (int(t[2].get("turn_index") or 0), parse_timestamp(t[2]["timestamp"]), t[0]))


def _ordered_summaries(summaries: Iterable[tuple[str, str, Mapping[str, Any]]]
                       ) -> list[tuple[str, str, Mapping[str, Any]]]:
    return sorted(summaries, key=lambda s: (int(s[2].get("summary_index") or 0), parse_timestamp(s[2]["timestamp"]), s[0]))


def _message(doc_id: str, text: str, meta: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    """One turn as a PAM message (without its parent/children links)."""
    kept = _load_extra(meta.get(EXTRA_KEY), doc_id, warnings, "turn")
    brain: dict[str, Any] = {
        "turn_index": meta.get("turn_index"),
        "source": meta.get("source", Source.SYSTEM.value),
        "scope": meta.get("scope", GLOBAL_SCOPE),
    }
    others = {k: v for k, v in meta.items() if k not in _TURN_CORE and k not in _TURN_PAM_KEYS}
    if others:
        brain["extra"] = others
    message: dict[str, Any] = {
        "id": doc_id, "role": meta["role"], "content": {"type": "text", "text": text},
        "created_at": pam_time(meta["timestamp"]),
    }
    for key in _MESSAGE_PRESERVED:
        if key in kept and key != "raw_metadata":
            message[key] = kept[key]
    raw = kept.get("raw_metadata") if isinstance(kept.get("raw_metadata"), dict) else {}
    message["raw_metadata"] = {**raw, BRAIN_KEY: brain}
    return message


def _summary_entry(doc_id: str, text: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": doc_id, "text": text, "summary_index": meta.get("summary_index")}
    if meta.get("turn_range") is not None:
        entry["turn_range"] = meta["turn_range"]
    entry.update(created_at=pam_time(meta["timestamp"]), source=meta.get("source", Source.SYSTEM.value),
                 scope=meta.get("scope", GLOBAL_SCOPE))
    others = {k: v for k, v in meta.items() if k not in _SUMMARY_CORE}
    if others:
        entry["extra"] = others
    return entry


def _conversation_temporal(kept: Any, first: datetime, last: datetime) -> dict[str, Any]:
    """The conversation's span; an imported ``temporal`` stays while no later turn extends it."""
    if isinstance(kept, dict) and kept.get("created_at"):
        try:
            kept_last = parse_timestamp(kept.get("updated_at") or kept["created_at"])
        except ValueError:
            kept = None
        else:
            if last <= kept_last:
                return dict(kept)
            return {"created_at": kept["created_at"], "updated_at": pam_time(last)}
    out = {"created_at": pam_time(first)}
    if last != first:
        out["updated_at"] = pam_time(last)
    return out


def conversation_to_pam(
    conversation_id: str,
    turns: Iterable[tuple[str, str, Mapping[str, Any]]],
    summaries: Iterable[tuple[str, str, Mapping[str, Any]]] = (),
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """A brain conversation — its turns and summaries as ``(id, text, metadata)`` — as a PAM
    conversation document; see the module docstring for the mapping."""
    warnings = warnings if warnings is not None else []
    turns, summaries = _ordered_turns(turns), _ordered_summaries(summaries)
    if not turns and not summaries:
        raise ValueError(f"conversation {conversation_id} has neither turns nor summaries")
    kept = (
        _load_extra(turns[0][2].get(CONVERSATION_KEY), turns[0][0], warnings, "turn", CONVERSATION_KEY)
        if turns else {}
    )
    times = [parse_timestamp(meta["timestamp"]) for _, _, meta in (*turns, *summaries)]
    messages = [_message(doc_id, text, meta, warnings) for doc_id, text, meta in turns]
    for before, after in pairwise(messages):  # a linear conversation, as a DAG too
        after["parent_id"] = before["id"]
        before["children_ids"] = [after["id"]]
    conversation: dict[str, Any] = {
        "schema": "portable-ai-memory-conversation",
        "schema_version": SCHEMA_VERSION,
        "id": kept.get("id") or conversation_id,
        "provider": kept.get("provider") or {"name": PLATFORM, "conversation_id": conversation_id},
    }
    if "title" in kept:
        conversation["title"] = kept["title"]
    conversation["temporal"] = _conversation_temporal(kept.get("temporal"), min(times), max(times))
    roles = {m["role"] for m in messages}
    conversation["participants"] = kept.get("participants") or [{"role": r} for r in _ROLES if r in roles]
    conversation["messages"] = messages
    for key in ("model", "system_instruction", "is_archived", "tags", "import_metadata"):
        if key in kept:
            conversation[key] = kept[key]
    brain: dict[str, Any] = {"conversation_id": conversation_id}
    if summaries:
        brain["summaries"] = [_summary_entry(*s) for s in summaries]
    raw = kept.get("raw_metadata") if isinstance(kept.get("raw_metadata"), dict) else {}
    conversation["raw_metadata"] = {**raw, BRAIN_KEY: brain}
    return conversation


def _conversation_file(conversation_id: str) -> str:
    """The file name of a conversation: its brain id when that is a safe file name, else a hash of it."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", conversation_id) and len(conversation_id) <= 200:
        return f"{conversation_id}.json"
    return f"conv-{hashlib.sha256(conversation_id.encode('utf-8')).hexdigest()[:32]}.json"


def _index_entry(conversation: dict[str, Any], ref: str, derived: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": conversation["id"], "platform": conversation["provider"]["name"]}
    if conversation.get("title") is not None:
        entry["title"] = conversation["title"]
    entry["message_count"] = len(conversation["messages"])
    entry["temporal"] = conversation["temporal"]
    if conversation.get("tags"):
        entry["tags"] = conversation["tags"]
    entry["derived_memories"] = derived
    entry["storage"] = {"type": "file", "ref": ref, "format": "json"}
    return entry


def _store_conversations(store: RagStore, warnings: list[str]) -> dict[str, dict[str, Any]]:
    """Every conversation of the store (of its turns and summaries) as a PAM document, by brain id."""
    grouped: dict[str, tuple[list, list]] = {}
    for doc_type, slot in ((DocType.TURN, 0), (DocType.SUMMARY, 1)):
        for doc in store.get(type=doc_type):
            grouped.setdefault(doc.metadata["conversation_id"], ([], []))[slot].append((doc.id, doc.text, doc.metadata))
    return {cid: conversation_to_pam(cid, t, s, warnings) for cid, (t, s) in sorted(grouped.items())}


# ---- export --------------------------------------------------------------------------------------
def export_pam(
    store: RagStore, out_dir: str | Path, *, embeddings: bool = True, conversations: bool = True,
    owner_id: str | None = None, force: bool = False,
) -> ExportReport:
    """Write every memory of ``store`` to ``out_dir/memory-store.json``, with ``embeddings`` their
    vectors to ``out_dir/embeddings.json`` and, with ``conversations``, every conversation (its turns
    and summaries) to ``out_dir/conversations/<file>.json``, listed in ``conversations_index``.

    ``out_dir`` must be new, empty or hold a previous brain export; any other directory is refused
    (nothing written) unless ``force``. A previous brain export is replaced file for file: its files
    this export no longer writes (``embeddings.json`` without embeddings, conversations no longer in
    the store) are deleted, and the report lists what was replaced and removed. Files brain did not
    write are never deleted (with ``force`` one of the same name as an export file is overwritten).
    Files are replaced atomically, the memory store last: a failed export leaves the previous files
    (or none) in place."""
    started = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValidationError(f"{out} is a file; give the directory to export into")
    if owner_id is not None and (not isinstance(owner_id, str) or not owner_id.strip()):
        raise ValidationError(f"owner_id must be a non-empty string, got {owner_id!r}")
    previous = _previous_export(out)
    if previous is None and not force:
        _refuse_foreign_directory(out)
    previous = previous or set()
    conv_dir = out / CONVERSATIONS_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BrainError(f"cannot create the export directory {out}: {exc}") from exc
    owner = owner_id or default_owner_id(store)
    model = store.embedder.name
    warnings: list[str] = []
    convs = _store_conversations(store, warnings) if conversations else {}
    refs = {cid: conv["id"] for cid, conv in convs.items()} if conversations else None
    if refs is not None and len(set(refs.values())) < len(refs):
        seen: dict[str, str] = {}
        for cid, pam_id in refs.items():
            if pam_id in seen:
                raise BrainError(
                    f"conversations {seen[pam_id]} and {cid} both carry the PAM id {pam_id!r} "
                    f"(in the {CONVERSATION_KEY} metadata of their first turn); change or remove one"
                )
            seen[pam_id] = cid
    stored = store.get(type=DocType.MEMORY, include_embeddings=embeddings)
    docs = sorted((d for d in stored if not is_part(d.metadata)), key=lambda d: d.id)
    parts_skipped = len(stored) - len(docs)
    memories = [
        memory_to_pam(doc.id, doc.text, doc.metadata, embedding_id(doc.id) if embeddings else None, warnings, refs)
        for doc in docs
    ]
    # PAM's access.exportable=false (kept from an import) is honoured: such memories stay here
    keep = [not (isinstance(m.get("access"), dict) and m["access"].get("exportable") is False) for m in memories]
    not_exportable = keep.count(False)
    if not_exportable:
        docs = [d for d, k in zip(docs, keep) if k]
        memories = [m for m, k in zip(memories, keep) if k]
    checksum = integrity_checksum(memories)
    document: dict[str, Any] = {
        "schema": "portable-ai-memory",
        "schema_version": SCHEMA_VERSION,
        "spec_uri": SPEC_URI,
        "export_id": str(uuid.uuid4()),
        "exported_by": f"brain/{_version()}",
        "export_date": pam_time(datetime.now(timezone.utc)),
        "owner": {"id": owner},
        "memories": memories,
    }
    conv_files: dict[str, bytes] = {}
    if conversations:
        # derived_memories from the very provenance written above: the two agree by construction
        derived: dict[str, list[str]] = {}
        for mem in memories:
            ref = mem["provenance"].get("conversation_ref")
            if ref is not None:
                derived.setdefault(ref, []).append(mem["id"])
        index = []
        for cid, conv in convs.items():
            name = _conversation_file(cid)
            problems = _schema_problems(conv, "conversation", f"{CONVERSATIONS_DIR}/{name}")
            if problems:  # never written; only hand-edited pam_extra / pam_conversation metadata does this
                raise BrainError(
                    f"conversation {cid} does not validate against the PAM conversation schema, so nothing was "
                    f"written: {_summary(problems)} (check the {EXTRA_KEY} / {CONVERSATION_KEY} metadata of its turns)"
                )
            conv_files[name] = orjson.dumps(conv, option=orjson.OPT_INDENT_2) + b"\n"
            index.append(_index_entry(conv, f"{CONVERSATIONS_DIR}/{name}", derived.get(conv["id"], [])))
        document["conversations_index"] = index
    document["integrity"] = {"canonicalization": "RFC8785", "checksum": checksum, "total_memories": len(memories)}
    document["export_type"] = "full"
    problems = _schema_problems(document, "memory-store", MEMORY_STORE_FILE)
    if problems:  # never written; the mapping is sound, so this is pam_extra metadata edited by hand
        raise BrainError(
            f"the export does not validate against the PAM schema, so nothing was written: {_summary(problems)} "
            f"(check the {EXTRA_KEY} metadata of that memory)"
        )
    store_path = out / MEMORY_STORE_FILE
    emb_path = out / EMBEDDINGS_FILE
    if conv_files:
        try:
            conv_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise BrainError(f"cannot create the conversations directory {conv_dir}: {exc}") from exc
    pending: list[tuple[Path, Path]] = []
    try:
        # conversations and embeddings first, the memory store last: it never names files not there yet
        for name, data in conv_files.items():
            pending.append((conv_dir / name, _write_temp(conv_dir, name, data)))
        if embeddings:
            emb_bytes = orjson.dumps(_embeddings_document(docs, memories, model), option=orjson.OPT_SERIALIZE_NUMPY)
            pending.append((emb_path, _write_temp(out, EMBEDDINGS_FILE, emb_bytes)))
        store_bytes = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
        pending.append((store_path, _write_temp(out, MEMORY_STORE_FILE, store_bytes)))
    except BaseException:
        _discard(pending)
        raise
    replaced = sorted(_relative(final, out) for final, _ in pending if final.exists())
    for final, temp in pending:
        os.replace(temp, final)
    written = {final for final, _ in pending}
    removed = []
    for stale in sorted(previous - written):  # only brain's own files, never anything else
        try:
            stale.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            warnings.append(f"could not remove {stale}, a file of the previous export this one does not write: {exc}")
            continue
        removed.append(_relative(stale, out))
    if not embeddings and emb_path.exists():
        warnings.append(
            f"{emb_path} was not written by brain and is left as it is; it does not belong to this export "
            f"(an importer reads it beside {MEMORY_STORE_FILE}): move it away"
        )
    return ExportReport(
        out_dir=out, memory_store=store_path, embeddings=emb_path if embeddings else None,
        memories=len(memories), embeddings_written=len(docs) if embeddings else 0, checksum=checksum,
        owner_id=owner, not_exportable=not_exportable, parts_skipped=parts_skipped,
        conversations=len(conv_files), messages=sum(len(c["messages"]) for c in convs.values()),
        summaries=sum(len(c["raw_metadata"][BRAIN_KEY].get("summaries", [])) for c in convs.values()),
        conversations_dir=conv_dir if conversations else None, replaced=replaced, removed=removed,
        warnings=warnings, seconds=time.perf_counter() - started,
    )


def _relative(path: Path, out: Path) -> str:
    return path.relative_to(out).as_posix()


def _read_object(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing or something else."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _previous_export(out: Path) -> set[Path] | None:
    """The files of a brain export already in ``out``: its memory store (``exported_by`` brain), the
    ``embeddings.json`` holding exactly brain's embeddings of its memories, and the conversation files its
    ``conversations_index`` names. None when ``out`` holds no brain export."""
    store_path = out / MEMORY_STORE_FILE
    document = _read_object(store_path) if store_path.is_file() else None
    if (document is None or document.get("schema") != "portable-ai-memory"
            or not str(document.get("exported_by", "")).startswith(f"{PLATFORM}/")):
        return None
    files = {store_path}
    memory_ids = {m.get("id") for m in document.get("memories") or [] if isinstance(m, dict)}
    emb_path = out / EMBEDDINGS_FILE
    emb = _read_object(emb_path) if emb_path.is_file() else None
    entries = emb.get("embeddings") if emb is not None and emb.get("schema") == "portable-ai-memory-embeddings" else None
    if isinstance(entries, list):
        if all(isinstance(e, dict) and e.get("memory_id") in memory_ids and e.get("id") == embedding_id(e["memory_id"])
               for e in entries):
            files.add(emb_path)
    for entry in document.get("conversations_index") or []:
        storage = entry.get("storage") if isinstance(entry, dict) else None
        ref = storage.get("ref") if isinstance(storage, dict) and storage.get("type") == "file" else None
        # brain writes refs as conversations/<plain file name>; anything else it did not write
        name = ref.removeprefix(f"{CONVERSATIONS_DIR}/") if isinstance(ref, str) else ""
        if name != ref and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*\.json", name):
            path = out / CONVERSATIONS_DIR / name
            if path.is_file():
                files.add(path)
    return files


def _refuse_foreign_directory(out: Path) -> None:
    """Refuse to export into a directory that holds files but no brain export (nothing is written)."""
    try:
        entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    except OSError as exc:
        raise BrainError(f"cannot read the export directory {out}: {exc}") from exc
    if entries:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise ValidationError(
            f"{out} is not empty ({shown}) and holds no brain export; nothing was written. Export into a new "
            f"or empty directory, or force it (`brain export --force`, force=True): brain then writes its files "
            f"there, overwriting any of the same name, and deletes nothing",
            [{"item": None, "field": "out_dir", "message": f"not empty and not a brain export: {shown}"}],
        )


def _embeddings_document(docs, memories: list[dict[str, Any]], model: str) -> dict[str, Any]:
    return {
        "schema": "portable-ai-memory-embeddings",
        "schema_version": SCHEMA_VERSION,
        "embeddings": [
            {
                "id": embedding_id(doc.id),
                "memory_id": doc.id,
                "model": model,
                "dimensions": int(doc.embedding.shape[0]),
                # vectors are computed when a memory is written, so its time is theirs too
                "created_at": mem["temporal"].get("updated_at") or mem["temporal"]["created_at"],
                "vector": np.ascontiguousarray(doc.embedding, dtype=np.float32),
            }
            for doc, mem in zip(docs, memories)
        ],
    }


def _write_temp(directory: Path, name: str, data: bytes) -> Path:
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise BrainError(f"cannot write {directory / name}: {exc}") from exc
    return Path(temp)


def _discard(pending: list[tuple[Path, Path]]) -> None:
    for _, temp in pending:
        temp.unlink(missing_ok=True)


@lru_cache(maxsize=1)
def _version() -> str:
    from brain import __version__

    return __version__


# ---- reading and validating PAM files ------------------------------------------------------------
@dataclass
class PamFiles:
    """A validated PAM export: the memory store (and its embeddings, when there were any)."""

    memory_store_path: Path
    embeddings_path: Path | None
    document: dict[str, Any]
    #: memories as the portable-ai-memory package dumps them (nulls dropped, defaults filled)
    memories: list[dict[str, Any]]
    #: embedding objects by embedding id
    embeddings: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    #: the conversation files conversations_index names, validated against the conversation schema
    conversations: list[ConversationFile] = field(default_factory=list)
    #: whether the memory store has a conversations_index at all (an empty one counts)
    conversations_indexed: bool = False
    #: index entries without a file to read (no ``storage``, or storage other than ``file``)
    unfiled_conversations: int = 0


@dataclass
class ConversationFile:
    """One conversation file of an export, as read (schema-valid)."""

    path: Path
    name: str  # its storage ref, as problems name it, e.g. conversations/conv-1.json
    index: int  # its entry in conversations_index
    document: dict[str, Any]


def _json_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{orjson.dumps(str(part)).decode()}]"
    return out or "(document root)"


def _problem(file: str, path: str, message: str, item: int | None = None) -> dict[str, Any]:
    if len(message) > 300:
        message = message[:300] + "..."
    return {"item": item, "field": path, "file": file, "message": message}


def _summary(problems: list[dict[str, Any]]) -> str:
    shown = "; ".join(f"{p['file']}: {p['field']}: {p['message']}" for p in problems[:_MAX_REPORTED])
    more = len(problems) - _MAX_REPORTED
    return shown + (f"; and {more} more" if more > 0 else "")


def _reject(problems: list[dict[str, Any]]) -> None:
    if problems:
        raise ValidationError(f"{_summary(problems)} (nothing was written)", problems)


@cache
def _validator(name: str):
    import jsonschema_rs
    from portable_ai_memory.schemas import load_schema

    return jsonschema_rs.Draft202012Validator(load_schema(name), validate_formats=True)


def _schema_problems(document: Any, schema: str, file: str) -> list[dict[str, Any]]:
    problems = []
    for error in islice(_validator(schema).iter_errors(document), 200):
        path = list(error.instance_path)
        listed = ("memories", "embeddings", "messages", "conversations_index")
        item = path[1] if len(path) > 1 and path[0] in listed and isinstance(path[1], int) else None
        problems.append(_problem(file, _json_path(path), error.message, item))
    return problems


def _read_json(path: Path, name: str | None = None, *, non_finite: bool = False) -> Any:
    """A PAM file, parsed and no deeper than :data:`MAX_NESTING`. With ``non_finite``, the numbers JSON
    cannot carry (``NaN``, ``Infinity``, ``1e999``) are read as such, so that the caller can name the
    object holding them (orjson would only give a line and column)."""
    name = name or path.name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:  # also invalid UTF-8, NaN and Infinity, and 1024 levels of nesting
        if "depth limit" in str(exc) or "recursion" in str(exc).lower():
            where = f"line {exc.lineno}, column {exc.colno}"
            raise ValidationError(
                f"{name}: {where}: nested more than {MAX_NESTING} levels deep (PAM documents need fewer than 10); "
                "nothing was written",
                [_problem(name, where, f"nested more than {MAX_NESTING} levels deep")],
            ) from None
        document = _lenient_json(data) if non_finite else None
        if document is None:
            raise ValidationError(
                f"{name} is not valid JSON: {exc} (nothing was written)",
                [_problem(name, "(document root)", str(exc))],
            ) from None
    if _nesting(data) > MAX_NESTING:
        where = _json_path(_too_deep(document, MAX_NESTING)[:8]) + "..."
        raise ValidationError(
            f"{name}: {where}: nested more than {MAX_NESTING} levels deep (PAM documents need fewer than 10); "
            "nothing was written",
            [_problem(name, where, f"nested more than {MAX_NESTING} levels deep")],
        )
    return document


def _lenient_json(data: bytes) -> Any:
    """``data`` parsed by the standard library (which reads NaN and infinities), or None when that fails
    too or finds no such number (then orjson refused it for another reason, which stands)."""
    import json

    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return document if _non_finite(document, "") else None


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def _nesting(data: bytes) -> int:
    """How deeply the valid JSON text ``data`` nests: its brackets outside strings, counted in numpy
    (an embeddings file holds millions of numbers; walking the parsed document would be slow)."""
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    return int(np.cumsum(np.where((codes == ord("[")) | (codes == ord("{")), 1, -1), dtype=np.int64).max())


def _too_deep(document: Any, limit: int) -> list[Any]:
    """The JSON path of the first object or list nested deeper than ``limit`` (iteratively: the
    document may be deeper than Python's recursion limit)."""
    stack: list[tuple[Any, list[Any]]] = [(document, [])]
    while stack:
        value, path = stack.pop()
        if len(path) >= limit:
            return path
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        stack.extend((child, [*path, key]) for key, child in items if isinstance(child, (dict, list)))
    return []


def _non_finite(document: Any, file: str) -> list[dict[str, Any]]:
    """Problems for every NaN or infinite number in an embeddings document, naming its embedding."""
    problems: list[dict[str, Any]] = []
    stack: list[tuple[Any, list[Any]]] = [(document, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float) and not np.isfinite(value):
            where, owner = _json_path(path), ""
            if len(path) >= 2 and path[0] == "embeddings" and isinstance(path[1], int):
                emb = document["embeddings"][path[1]]
                if isinstance(emb, dict):
                    owner = f"embedding {emb.get('id')!r} of memory {emb.get('memory_id')!r} "
                if len(path) >= 3 and path[2] == "vector":
                    where = _json_path(path[:3])  # one problem per vector, not per value
            message = f"{owner}has a value that is not a finite number ({value}); vectors hold finite numbers"
            if not any(p["field"] == where for p in problems):
                problems.append(_problem(file, where, message, path[1] if owner else None))
            continue
        if isinstance(value, dict):
            stack.extend((child, [*path, key]) for key, child in value.items())
        elif isinstance(value, list):
            stack.extend((child, [*path, i]) for i, child in enumerate(value))
    return sorted(problems, key=lambda p: p["field"])


def _locate(path: str | Path) -> tuple[Path, Path | None]:
    given = Path(path)
    if given.is_dir():
        store_path = given / MEMORY_STORE_FILE
        if not store_path.is_file():
            raise ValidationError(f"no {MEMORY_STORE_FILE} in {given}; give the export directory or the file itself")
    elif given.is_file():
        store_path = given
    else:
        raise ValidationError(f"{given} does not exist; give a PAM export directory or its {MEMORY_STORE_FILE}")
    emb_path = store_path.parent / EMBEDDINGS_FILE
    return store_path, emb_path if emb_path.is_file() else None


def read_pam(path: str | Path) -> PamFiles:
    """Read and validate a PAM export (directory or memory-store file, with an optional
    ``embeddings.json`` beside it). Raises :class:`ValidationError` naming every problem's JSON path."""
    store_path, emb_path = _locate(path)
    sfile = store_path.name
    document = _read_json(store_path)
    problems = _schema_problems(document, "memory-store", sfile)
    _reject(problems)
    warnings: list[str] = []
    version = document["schema_version"]
    if version.split("-")[0].split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        problems.append(_problem(sfile, "schema_version", f"PAM {version} is not supported; brain reads PAM 1.x"))
    raw_memories: list[dict[str, Any]] = document["memories"]
    first_index: dict[str, int] = {}
    for i, mem in enumerate(raw_memories):
        if mem["id"] in first_index:
            first = first_index[mem["id"]]
            message = f"duplicate id {mem['id']!r} (also memories[{first}])"
            problems.append(_problem(sfile, f"memories[{i}].id", message, i))
        else:
            first_index[mem["id"]] = i
        expected = content_hash(mem["content"])
        if mem["content_hash"] != expected:
            problems.append(_problem(
                sfile, f"memories[{i}].content_hash",
                f"is {mem['content_hash']} but the content hashes to {expected} (content edited after export?)", i,
            ))
    _reject(problems)
    memories = _package_dump(raw_memories, sfile)
    integrity = document.get("integrity")
    if integrity is not None:
        if integrity["total_memories"] != len(raw_memories):
            problems.append(_problem(
                sfile, "integrity.total_memories",
                f"says {integrity['total_memories']} but the file holds {len(raw_memories)} memories",
            ))
        elif not _checksum_matches(integrity["checksum"], raw_memories, memories):
            problems.append(_problem(
                sfile, "integrity.checksum",
                "does not match the memories (the file changed after export); remove the integrity block "
                "to import it anyway",
            ))
    by_memory: dict[str, dict[str, Any]] = {}
    by_id: dict[str, dict[str, Any]] = {}
    if emb_path is not None:
        efile = emb_path.name
        emb_doc = _read_json(emb_path, non_finite=True)
        _reject(problems + _non_finite(emb_doc, efile))
        emb_problems = _schema_problems(emb_doc, "embeddings", efile)
        _reject(problems + emb_problems)
        if emb_doc["schema_version"] != version:
            problems.append(_problem(
                efile, "schema_version", f"is {emb_doc['schema_version']!r} but {sfile} is {version!r}"
            ))
        for j, emb in enumerate(emb_doc["embeddings"]):
            where = f"embeddings[{j}]"
            if emb["id"] in by_id:
                problems.append(_problem(efile, f"{where}.id", f"duplicate embedding id {emb['id']!r}", j))
            by_id[emb["id"]] = emb
            if emb["memory_id"] in by_memory:
                problems.append(_problem(
                    efile, f"{where}.memory_id", f"a second embedding for memory {emb['memory_id']!r}", j
                ))
            elif emb["memory_id"] not in first_index:
                problems.append(_problem(efile, f"{where}.memory_id", f"no memory {emb['memory_id']!r} in {sfile}", j))
            by_memory.setdefault(emb["memory_id"], emb)
            vector = emb.get("vector")
            if vector is not None and len(vector) != emb["dimensions"]:
                problems.append(_problem(
                    efile, f"{where}.vector",
                    f"embedding {emb['id']!r} of memory {emb['memory_id']!r} has {len(vector)} values but "
                    f"dimensions is {emb['dimensions']}", j,
                ))
    dangling = 0
    for i, mem in enumerate(raw_memories):
        ref = mem.get("embedding_ref")
        if ref is None:
            continue
        if emb_path is None:
            dangling += 1
        elif ref not in by_id:
            problems.append(_problem(
                sfile, f"memories[{i}].embedding_ref", f"names {ref!r}, which {EMBEDDINGS_FILE} does not hold", i
            ))
        elif by_id[ref]["memory_id"] != mem["id"]:
            problems.append(_problem(
                sfile, f"memories[{i}].embedding_ref",
                f"names {ref!r}, which is the embedding of memory {by_id[ref]['memory_id']!r}, not of {mem['id']!r}", i,
            ))
    conversations, unfiled = _read_conversations(document, store_path.parent, sfile, problems)
    _reject(problems)
    if unfiled:
        warnings.append(
            f"{unfiled} conversations_index entries name no conversation file (no storage, or storage other "
            "than a file); their conversations are not imported"
        )
    if dangling:
        warnings.append(
            f"{dangling} memories name embeddings but there is no {EMBEDDINGS_FILE}; "
            "their vectors are computed from content"
        )
    return PamFiles(
        store_path, emb_path, document, memories, by_id, warnings, conversations,
        "conversations_index" in document, unfiled,
    )


def _read_conversations(document: dict[str, Any], base: Path, sfile: str, problems: list[dict[str, Any]]
                        ) -> tuple[list[ConversationFile], int]:
    """Read and schema-check every conversation file the index names (paths relative to ``base``)."""
    out: list[ConversationFile] = []
    unfiled = 0
    version = document["schema_version"]
    seen: dict[str, int] = {}
    files: dict[Path, int] = {}
    root = base.resolve()
    for i, entry in enumerate(document.get("conversations_index") or []):
        where = f"conversations_index[{i}]"
        if entry["id"] in seen:
            problems.append(_problem(sfile, f"{where}.id", f"duplicate conversation id {entry['id']!r} "
                                                          f"(also conversations_index[{seen[entry['id']]}])", i))
            continue
        seen[entry["id"]] = i
        storage = entry.get("storage")
        if not storage or storage["type"] != "file":
            unfiled += 1
            continue
        ref = storage["ref"]
        path = (base / ref).resolve()
        if not path.is_relative_to(root):
            problems.append(_problem(sfile, f"{where}.storage.ref",
                                     f"{ref!r} is outside the export directory; give a path relative to it", i))
            continue
        if path in files:
            problems.append(_problem(sfile, f"{where}.storage.ref",
                                     f"{ref!r} is also the file of conversations_index[{files[path]}]", i))
            continue
        files[path] = i
        if not path.is_file():
            problems.append(_problem(
                sfile, f"{where}.storage.ref",
                f"names the conversation file {ref}, which does not exist ({path}); copy it beside {sfile} "
                "or remove the entry", i,
            ))
            continue
        conv = _read_json(path, ref)
        found = _schema_problems(conv, "conversation", ref)
        if found:
            problems.extend(found)
            continue
        if conv["schema_version"] != version:
            problems.append(_problem(ref, "schema_version", f"is {conv['schema_version']!r} but {sfile} is {version!r}"))
        if conv["id"] != entry["id"]:
            problems.append(_problem(ref, "id", f"is {conv['id']!r} but {sfile} {where} names {entry['id']!r}"))
        out.append(ConversationFile(path, ref, i, conv))
    return out, unfiled


def _checksum_matches(declared: str, raw: list[dict[str, Any]], dumped: list[dict[str, Any]]) -> bool:
    """The declared checksum is over the memories as written, or as the PAM package dumps them."""
    if integrity_checksum(raw) == declared:
        return True
    return dumped != raw and integrity_checksum(dumped) == declared


def _package_dump(raw_memories: list[dict[str, Any]], file: str) -> list[dict[str, Any]]:
    """The memories as the portable-ai-memory package models dump them (its checksum's form)."""
    import pydantic
    from portable_ai_memory.models import MemoryObject

    out, problems = [], []
    for i, mem in enumerate(raw_memories):
        try:
            out.append(MemoryObject.model_validate(mem).model_dump(mode="json", by_alias=True, exclude_none=True))
        except pydantic.ValidationError as exc:  # the schema passed; the package's models are stricter here
            for err in exc.errors():
                problems.append(_problem(file, _json_path(["memories", i, *err["loc"]]), err["msg"], i))
    _reject(problems)
    return out


# ---- PAM memory object -> brain memory ----------------------------------------------------------
def _brain_block(mem: dict[str, Any], where: str, file: str, i: int, problems: list) -> dict[str, Any]:
    brain = (mem.get("metadata") or {}).get(BRAIN_KEY)
    if brain is None:
        return {}
    if not isinstance(brain, dict):
        problems.append(_problem(file, f"{where}.metadata.brain", "must be an object (brain's own fields)", i))
        return {}
    for key in brain:
        if key not in _BRAIN_FIELDS:
            problems.append(_problem(
                file, f"{where}.metadata.brain.{key}",
                f"is not a field of brain's block (expected {', '.join(_BRAIN_FIELDS)})", i,
            ))
    extra = brain.get("extra", {})
    if not isinstance(extra, dict):
        problems.append(_problem(file, f"{where}.metadata.brain.extra", "must be an object", i))
    else:
        for key, value in extra.items():
            problem = f"{key!r} cannot be an extra field" if key in _NOT_EXTRA else metadata_value_problem(value)
            if problem:
                problems.append(_problem(
                    file, f"{where}.metadata.brain.extra.{key}",
                    f"{problem}: extra fields are strings, numbers, booleans or non-empty lists of one of those", i,
                ))
    return brain


def pam_to_memory(
    mem: dict[str, Any], i: int, file: str = MEMORY_STORE_FILE, conversations: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A PAM memory object (package-dump form) as an ``upsert_docs`` item, and the problems found.
    ``conversations`` maps the PAM ids of the conversations imported with it to their brain ids (None:
    the file has no conversations_index)."""
    where = f"memories[{i}]"
    problems: list[dict[str, Any]] = []
    brain = _brain_block(mem, where, file, i, problems)
    tags = mem.get("tags", [])
    original = brain.get("tags")
    # the original tags, unless another tool changed the PAM tags since brain wrote them
    if isinstance(original, list) and all(isinstance(t, str) for t in original) and pam_tags(original) == tags:
        tags = original
    temporal = mem["temporal"]
    try:
        timestamp = parse_timestamp(temporal.get("updated_at") or temporal["created_at"])
    except ValueError as exc:
        problems.append(_problem(file, f"{where}.temporal", str(exc), i))
        return {}, problems
    meta: dict[str, Any] = {
        "timestamp": timestamp,
        "scope": brain.get("scope", GLOBAL_SCOPE),
        "source": brain.get("source", Source.IMPORT.value),
        "importance": brain.get("importance", 3),
        "tags": tags,
    }
    for key in ("entity", "conversation_id"):
        if brain.get(key) is not None:
            meta[key] = brain[key]
    if meta["scope"] == GLOBAL_SCOPE:
        # older exports named who a global memory was about; the entity is now the scope, and the
        # memory stays global (visible to everyone) as it was
        meta.pop("entity", None)
    ref = (mem.get("provenance") or {}).get("conversation_ref")
    if "conversation_id" not in meta and conversations and ref in conversations:
        meta["conversation_id"] = conversations[ref]  # a foreign memory, linked to its imported conversation
    if isinstance(brain.get("extra"), dict):
        meta.update((k, v) for k, v in brain["extra"].items() if k not in _NOT_EXTRA)
    if problems:
        return {}, problems
    pam_type = _join_type(mem["type"], mem.get("custom_type"))
    if pam_type is not None:
        meta[TYPE_KEY] = pam_type
    if mem.get("status", "active") != "active":
        meta[STATUS_KEY] = mem["status"]
    # what an export of the memory as mapped so far would write; keep what differs from it
    try:
        refs = None if conversations is None else {b: p for p, b in conversations.items()}
        plain = memory_to_pam(mem["id"], mem["content"], {**meta, "type": DocType.MEMORY.value},
                              conversation_refs=refs)
    except (TypeError, ValueError) as exc:
        problems.append(_problem(file, f"{where}.metadata.brain", str(exc), i))
        return {}, problems
    kept = {}
    for key in _PRESERVED:
        value = mem.get(key)
        if key == "metadata":
            value = {k: v for k, v in (value or {}).items() if k != BRAIN_KEY} or None
        if value is not None and value != plain.get(key):
            kept[key] = value
    if kept:
        meta[EXTRA_KEY] = orjson.dumps(kept).decode()
    try:
        validate_metadata(DocType.MEMORY, meta)
    except ValidationError as exc:
        for p in exc.problems or [{"field": "metadata", "message": str(exc)}]:
            problems.append(_problem(file, _brain_path(where, p.get("field") or "metadata"), p["message"], i))
    return {"id": mem["id"], "type": DocType.MEMORY.value, "text": mem["content"], **meta}, problems


def _brain_path(where: str, field_name: str) -> str:
    """The JSON path in a PAM memory of a brain metadata field."""
    top = field_name.split(".")[0]
    if top == "timestamp":
        return f"{where}.temporal"
    if top == "tags":
        return f"{where}.tags"
    if top in _BRAIN_FIELDS:
        return f"{where}.metadata.brain.{field_name}"
    if top in (TYPE_KEY, STATUS_KEY, EXTRA_KEY, "type"):
        return where
    if top == "metadata":  # a rule over several fields, e.g. entity against scope
        return f"{where}.metadata.brain"
    return f"{where}.metadata.brain.extra.{field_name}"


def _vector_problems(files: PamFiles, model: str, dimension: int) -> list[dict[str, Any]]:
    """Embeddings labelled with the store's model that cannot be its vectors: another dimension, or no
    direction at all. (Values are finite and match ``dimensions`` already: :func:`read_pam` checks that.)"""
    problems = []
    efile = files.embeddings_path.name if files.embeddings_path else EMBEDDINGS_FILE
    fix = "correct it, or remove the embedding and set the memory's embedding_ref to null to embed it from content"
    for j, emb in enumerate(files.embeddings.values()):  # read_pam refused duplicate ids: j is the file's index
        if emb["model"] != model:
            continue
        who = f"embedding {emb['id']!r} of memory {emb['memory_id']!r}"
        if emb["dimensions"] != dimension:
            problems.append(_problem(
                efile, f"embeddings[{j}].dimensions",
                f"{who} is labelled {model}, whose vectors have {dimension} dimensions, but has "
                f"{emb['dimensions']}; {fix}", j,
            ))
        elif emb.get("vector") is not None and float(np.linalg.norm(np.asarray(emb["vector"], np.float64))) < _MIN_NORM:
            problems.append(_problem(efile, f"embeddings[{j}].vector", f"{who} is all zeros (no direction); {fix}", j))
    return problems


def _usable_vector(emb: dict[str, Any] | None, model: str) -> tuple[np.ndarray | None, bool]:
    """The embedding's vector, unit length, when it is of the store's model (its dimension checked by
    :func:`_vector_problems`), and whether it had to be normalised; (None, False) otherwise."""
    if emb is None or emb["model"] != model or emb.get("vector") is None:
        return None, False
    return to_unit_length(emb["vector"])


# ---- PAM conversation -> brain turns and summaries -----------------------------------------------
@dataclass
class ConversationItems:
    """A PAM conversation mapped to brain documents."""

    pam_id: str
    conversation_id: str  # brain's conv-... id
    turns: list[dict[str, Any]]  # upsert_docs items
    summaries: list[dict[str, Any]]
    skipped: dict[str, int]  # messages not imported, by reason


def foreign_conversation_id(pam_id: str) -> str:
    """The brain id of another producer's conversation: ``conv-<uuid5 of its PAM id>``, stable across imports."""
    return f"conv-{uuid.uuid5(_CONVERSATION_NAMESPACE, pam_id)}"


def _message_text(content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    if content.get("type") == "multipart":
        return "\n\n".join(p["text"] for p in content.get("parts") or [] if p.get("text"))
    return content.get("text") or ""


def _block(value: Any, allowed: tuple[str, ...], where: str, file: str, problems: list) -> dict[str, Any]:
    """A brain block (``raw_metadata.brain`` and the like), checked for its shape and field names."""
    if not isinstance(value, dict):
        problems.append(_problem(file, where, "must be an object (brain's own fields)"))
        return {}
    for key in value:
        if key not in allowed:
            problems.append(_problem(file, f"{where}.{key}", f"is not a field of brain's block (expected {', '.join(allowed)})"))
    return value


def _extra_fields(block: dict[str, Any], reserved: frozenset[str], where: str, file: str, problems: list) -> dict[str, Any]:
    extra = block.get("extra", {})
    if not isinstance(extra, dict):
        problems.append(_problem(file, f"{where}.extra", "must be an object"))
        return {}
    for key, value in extra.items():
        problem = f"{key!r} cannot be an extra field" if key in reserved else metadata_value_problem(value)
        if problem:
            problems.append(_problem(
                file, f"{where}.extra.{key}",
                f"{problem}: extra fields are strings, numbers, booleans or non-empty lists of one of those",
            ))
    return extra


def _check_item(item: dict[str, Any], where: str, file: str, problems: list) -> None:
    meta = {k: v for k, v in item.items() if k not in ("id", "text")}
    try:
        validate_metadata(item["type"], meta)
    except ValidationError as exc:
        for p in exc.problems or [{"field": "metadata", "message": str(exc)}]:
            problems.append(_problem(file, where, f"{p.get('field') or 'metadata'}: {p['message']}"))


def _kept(given: dict[str, Any], plain: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The fields of ``given`` an export would not write as they are (absent ones and schema defaults
    left out: the export's own value stands for them)."""
    kept = {}
    for key in keys:
        if key not in given:
            continue
        value = given[key]
        if key == "raw_metadata":
            value = {k: v for k, v in (value or {}).items() if k != BRAIN_KEY}
            wanted = {k: v for k, v in (plain.get(key) or {}).items() if k != BRAIN_KEY}
        else:
            wanted = plain.get(key)
        if value in (None, [], {}, False) and wanted is None:
            continue
        if value != wanted:
            kept[key] = value
    return kept


_NOT_TURN_EXTRA = _TURN_CORE | _TURN_PAM_KEYS | {"text", "id", "embedding"}
_NOT_SUMMARY_EXTRA = _SUMMARY_CORE | {"text", "id", "embedding"}


def pam_to_conversation(conv: dict[str, Any], file: str) -> tuple[ConversationItems | None, list[dict[str, Any]]]:
    """A PAM conversation document as brain turns and summaries, and the problems found. A brain
    export (``raw_metadata.brain``) comes back with its ids, indexes and metadata; another producer's
    conversation gets a derived ``conv-<uuid>`` id, derived turn ids and turn_index by message order."""
    problems: list[dict[str, Any]] = []
    raw = conv.get("raw_metadata") or {}
    brain = None
    if BRAIN_KEY in raw:
        brain = _block(raw[BRAIN_KEY], ("conversation_id", "summaries"), "raw_metadata.brain", file, problems)
    if brain:
        cid = brain.get("conversation_id")
        try:
            check_conversation_id(cid)
        except ValueError as exc:
            problems.append(_problem(file, "raw_metadata.brain.conversation_id", str(exc)))
            return None, problems
    else:
        cid = foreign_conversation_id(conv["id"])
    skipped: dict[str, int] = {}
    turns: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    last = 0
    for j, msg in enumerate(conv["messages"]):
        where = f"messages[{j}]"
        text = _message_text(msg.get("content"))
        reason = None
        if msg["role"] not in _ROLES:
            reason = f"role {msg['role']}"
        elif msg.get("is_thought"):
            reason = "thought"
        elif not text.strip():
            reason = "no text"
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        own = (msg.get("raw_metadata") or {}).get(BRAIN_KEY) if brain else None
        if own is not None:
            block = _block(own, _MESSAGE_BRAIN_FIELDS, f"{where}.raw_metadata.brain", file, problems)
            doc_id, turn_index = msg["id"], block.get("turn_index")
            source, scope = block.get("source", Source.IMPORT.value), block.get("scope", GLOBAL_SCOPE)
            extra = _extra_fields(block, _NOT_TURN_EXTRA, f"{where}.raw_metadata.brain", file, problems)
        else:  # message ids are unique within their conversation only
            doc_id, turn_index = derived_id("pam-message", conv["id"], msg["id"]), last + 1
            source, scope, extra = Source.IMPORT.value, GLOBAL_SCOPE, {}
        if isinstance(turn_index, int) and not isinstance(turn_index, bool):
            last = max(last, turn_index)
        item = {
            "id": doc_id, "type": DocType.TURN.value, "text": text, "timestamp": msg["created_at"],
            "source": source, "scope": scope, "conversation_id": cid, "role": msg["role"], "turn_index": turn_index,
            **{k: v for k, v in extra.items() if k not in _NOT_TURN_EXTRA},
        }
        _check_item(item, f"{where}.raw_metadata.brain" if own is not None else where, file, problems)
        turns.append((j, item, msg))
    summaries = []
    entries = brain.get("summaries", []) if brain else []
    if not isinstance(entries, list):
        problems.append(_problem(file, "raw_metadata.brain.summaries", "must be a list"))
        entries = []
    for k, entry in enumerate(entries):
        where = f"raw_metadata.brain.summaries[{k}]"
        block = _block(entry, _SUMMARY_BRAIN_FIELDS, where, file, problems)
        if not block:
            continue
        missing = [key for key in ("id", "text", "created_at") if not isinstance(block.get(key), str) or not block[key]]
        if missing:
            problems.append(_problem(file, where, f"needs {', '.join(missing)} (non-empty strings)"))
            continue
        extra = _extra_fields(block, _NOT_SUMMARY_EXTRA, where, file, problems)
        item = {
            "id": block["id"], "type": DocType.SUMMARY.value, "text": block["text"], "timestamp": block["created_at"],
            "source": block.get("source", Source.IMPORT.value), "scope": block.get("scope", GLOBAL_SCOPE),
            "conversation_id": cid, "summary_index": block.get("summary_index"), "turn_range": block.get("turn_range"),
            **{k: v for k, v in extra.items() if k not in _NOT_SUMMARY_EXTRA},
        }
        _check_item(item, where, file, problems)
        summaries.append(item)
    if problems:
        return None, problems
    # PAM fields brain has no place for: kept as JSON, written back unchanged by an export
    for j, item, msg in turns:
        plain = _message(item["id"], item["text"], _meta_of(item), [])
        kept = _kept(msg, plain, _MESSAGE_PRESERVED)
        if kept:
            item[EXTRA_KEY] = orjson.dumps(kept).decode()
    items = [item for _, item, _ in turns]
    if items or summaries:
        try:
            plain_conv = conversation_to_pam(
                cid, [(t["id"], t["text"], _meta_of(t)) for t in items],
                [(s["id"], s["text"], _meta_of(s)) for s in summaries],
            )
        except ValueError as exc:  # e.g. a time that does not parse
            return None, [_problem(file, "messages", str(exc))]
        kept = _kept(conv, plain_conv, _CONVERSATION_PRESERVED)
        if kept and items:
            first = _ordered_turns([(t["id"], t["text"], t) for t in items])[0][2]
            first[CONVERSATION_KEY] = orjson.dumps(kept).decode()
    return ConversationItems(conv["id"], cid, items, summaries, skipped), []


def _meta_of(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("id", "text")}


# ---- import --------------------------------------------------------------------------------------
def import_pam(store: RagStore, path: str | Path) -> ImportReport:
    """Import a PAM export (directory, or its memory-store file) into ``store``: its memories and the
    conversations its ``conversations_index`` names; see the module docstring."""
    started = time.perf_counter()
    files = read_pam(path)
    sfile = files.memory_store_path.name
    problems: list[dict[str, Any]] = []
    mapped: list[ConversationItems] = []
    for cfile in files.conversations:
        conv, found = pam_to_conversation(cfile.document, cfile.name)
        problems.extend(found)
        if conv is not None:
            mapped.append(conv)
    _reject(problems)
    by_brain_id: dict[str, str] = {}
    for conv, cfile in zip(mapped, files.conversations):
        if conv.conversation_id in by_brain_id:
            problems.append(_problem(
                cfile.name, "raw_metadata.brain.conversation_id",
                f"{conv.conversation_id!r} is also the conversation of {by_brain_id[conv.conversation_id]}",
            ))
        by_brain_id[conv.conversation_id] = cfile.name
    conversations = {c.pam_id: c.conversation_id for c in mapped} if files.conversations_indexed else None
    items = []
    for i, mem in enumerate(files.memories):
        item, found = pam_to_memory(mem, i, sfile, conversations)
        problems.extend(found)
        items.append(item)
    _reject(problems)
    # every document of the import, with where it came from (for problems)
    located: list[tuple[dict[str, Any], str, str]] = [(item, sfile, f"memories[{i}].id") for i, item in enumerate(items)]
    for conv, cfile in zip(mapped, files.conversations):
        located += [(t, cfile.name, f"messages (turn {t['id']})") for t in conv.turns]
        located += [(s, cfile.name, f"raw_metadata.brain.summaries (summary {s['id']})") for s in conv.summaries]
    first_seen: dict[str, str] = {}
    for item, file, where in located:
        if item["id"] in first_seen:
            problems.append(_problem(file, where, f"id {item['id']!r} is also used in {first_seen[item['id']]}"))
        else:
            first_seen[item["id"]] = f"{file}: {where}"
    _reject(problems)
    ids = [item["id"] for item, _, _ in located]
    existing = {doc.id: doc for doc in store.get(ids)} if ids else {}
    for item, file, where in located:
        doc = existing.get(item["id"])
        if doc is not None and doc.type != item["type"]:
            problems.append(_problem(
                file, where,
                f"{item['id']!r} is the id of a {doc.type} document in the store; a {item['type']} cannot replace it",
            ))
    _reject(problems)
    model, dimension = store.embedder.name, store.dimension
    _reject(_vector_problems(files, model, dimension))
    report = ImportReport(
        memory_store=files.memory_store_path, embeddings=files.embeddings_path, memories=len(items),
        owner_id=files.document["owner"]["id"], warnings=list(files.warnings), conversations=len(mapped),
        turns=sum(len(c.turns) for c in mapped), summaries=sum(len(c.summaries) for c in mapped),
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
    batch = []
    for item, mem in zip(items, files.memories):
        change = _change(existing.get(item["id"]), item)
        setattr(report, change, getattr(report, change) + 1)
        if change == "unchanged":
            continue
        # only the embedding a memory names: a null embedding_ref means "no vector" (e.g. content edited)
        ref = mem.get("embedding_ref")
        vector, normalised = _usable_vector(files.embeddings.get(ref) if ref else None, model)
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
    for item, _, _ in located[len(items):]:
        change = _change(existing.get(item["id"]), item)
        setattr(report, f"conversation_{change}", getattr(report, f"conversation_{change}") + 1)
        if change == "unchanged":
            continue
        batch.append(item)  # turns and summaries are embedded from their text (PAM carries no vectors for them)
    if batch:
        store.upsert_docs(batch)
    report.seconds = time.perf_counter() - started
    return report


def _change(doc, item: dict[str, Any]) -> str:
    """What importing ``item`` does to the stored ``doc``: "new", "updated" or "unchanged"."""
    if doc is None:
        return "new"
    return "unchanged" if _same(doc, item) else "updated"


def _same(doc, item: dict[str, Any]) -> bool:
    """Whether the stored document already is exactly what the import would write."""
    if doc.text != item["text"] or doc.type != item["type"]:
        return False
    meta = {k: v for k, v in item.items() if k not in ("id", "text")}
    wanted = from_chroma(validate_metadata(item["type"], meta).to_chroma())
    return wanted == doc.metadata


__all__ = [
    "CONVERSATIONS_DIR",
    "EMBEDDINGS_FILE",
    "MAX_NESTING",
    "MEMORY_STORE_FILE",
    "ConversationFile",
    "ConversationItems",
    "ExportReport",
    "ImportReport",
    "PamFiles",
    "content_hash",
    "conversation_to_pam",
    "default_owner_id",
    "export_pam",
    "foreign_conversation_id",
    "import_pam",
    "integrity_checksum",
    "memory_to_pam",
    "normalize_content",
    "pam_tag",
    "pam_tags",
    "pam_to_conversation",
    "pam_to_memory",
    "read_pam",
]
