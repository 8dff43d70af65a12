"""What PAM 1.0 itself defines: file and schema names, the memory types and statuses, and the spec's
deterministic operations (content normalisation and hash, the integrity checksum, tags, times).

Kept apart from the mapping so that both directions (export and import) and the tests compute these
exactly one way. See docs/pam.md.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import rfc8785

from brain.model.errors import Problem, ValidationError
from brain.model.schemas import parse_timestamp

SCHEMA_VERSION = "1.0"
MEMORY_STORE_FILE = "memory-store.json"
EMBEDDINGS_FILE = "embeddings.json"
CONVERSATIONS_DIR = "conversations"
SPEC_URI = "https://portable-ai-memory.org/spec/v1.0"
PLATFORM = "brain"
PAM_TYPES = (
    "fact",
    "preference",
    "skill",
    "context",
    "relationship",
    "goal",
    "instruction",
    "identity",
    "environment",
    "project",
)  # plus "custom", which needs a custom_type
PAM_STATUSES = ("active", "superseded", "deprecated", "retracted", "archived")
DEFAULT_TYPE = "fact"
#: how deeply a PAM file may nest objects and lists; the spec's documents need fewer than 10 levels, and
#: the validators and serialisers downstream give up (with their own errors) at a few hundred
MAX_NESTING = 64


def normalize_content(text: str) -> str:
    """PAM's content normalisation: trim, lowercase, Unicode NFC, runs of whitespace -> one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text.strip().lower()))


def content_hash(text: str) -> str:
    """``sha256:<hex>`` of the normalised content (PAM ``content_hash``)."""
    return "sha256:" + hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def integrity_checksum(memories: Sequence[Mapping[str, Any]]) -> str:
    """``sha256:<hex>`` of the RFC 8785 canonical JSON of the memories sorted by id."""
    ordered = sorted(memories, key=lambda m: m.get("id", ""))
    try:
        canonical = rfc8785.dumps(ordered)
    except rfc8785.CanonicalizationError as exc:  # e.g. an integer beyond I-JSON's 2**53
        culprit = next((m.get("id") for m in ordered if not _canonicalizable(m)), None)
        raise ValidationError(
            f"memory {culprit!r} cannot be written as RFC 8785 canonical JSON ({exc}); integers must lie "
            f"within +-(2**53-1): store larger numbers as strings",
            [Problem("id", str(exc))],
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
