"""persona.md -> persona documents, one per section, loaded idempotently at start-up.

Sections are split at Markdown headings; ``topic`` is the heading slugified (``## Tone`` -> ``tone``)
and text before the first heading is ``core``. A content hash decides whether anything changed:
an unchanged file writes and embeds nothing. A changed file's sections are written first and the
previous version's removed after, so a reader never sees an empty persona.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from brain.errors import ValidationError
from brain.rag_store import RagStore, derived_id
from brain.schemas import DocType, format_timestamp, utc_now

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True)
class PersonaSection:
    topic: str
    text: str
    position: int
    heading: str = ""


@dataclass(frozen=True)
class PersonaLoad:
    changed: bool
    version: str
    content_hash: str
    sections: int
    removed: int


def slugify(heading: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", heading.casefold()).strip("_")
    return slug or "section"


def split_sections(markdown: str) -> list[PersonaSection]:
    sections: list[PersonaSection] = []
    topic, heading, lines = "core", "", []

    def flush() -> None:
        text = "\n".join(lines).strip()
        if text:
            sections.append(PersonaSection(topic=topic, text=text, position=len(sections), heading=heading))

    for line in markdown.splitlines():
        match = _HEADING.match(line)
        if match:
            flush()
            topic, heading, lines = slugify(match.group(2)), match.group(2), []
        else:
            lines.append(line)
    flush()
    return sections


def load_persona(store: RagStore, path: str | Path) -> PersonaLoad:
    path = Path(path)
    try:
        markdown = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError(f"persona file {path} does not exist; create it or point to another file") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"persona file {path} is not valid UTF-8 ({exc})") from None
    sections = split_sections(markdown)
    if not sections:
        raise ValidationError(f"persona file {path} has no text")
    digest = hashlib.sha256(markdown.encode("utf-8")).hexdigest()[:16]
    current = store.get(type=DocType.PERSONA)
    if current and all(d.metadata.get("content_hash") == digest for d in current) and len(current) == len(sections):
        return PersonaLoad(False, current[0].metadata["version"], digest, len(current), 0)
    version = format_timestamp(utc_now())
    store.upsert_docs([
        {"id": derived_id("persona", digest, str(s.position)), "text": s.text, "type": DocType.PERSONA,
         "version": version, "topic": s.topic, "position": s.position, "content_hash": digest, "source": "system",
         **({"heading": s.heading} if s.heading else {})}
        for s in sections
    ])
    stale = [d.id for d in current if d.metadata.get("content_hash") != digest]
    removed = store.delete(stale) if stale else 0
    return PersonaLoad(True, version, digest, len(sections), removed)


def persona_block(store: RagStore, max_chars: int | None = None) -> str:
    """The current persona as prompt-ready text, in file order."""
    docs = sorted(store.get(type=DocType.PERSONA), key=lambda d: int(d.metadata.get("position", 0)))
    block = "\n\n".join(
        (f"{d.metadata['heading']}:\n{d.text}" if d.metadata.get("heading") else d.text) for d in docs
    )
    if max_chars is not None and len(block) > max_chars:
        block = block[: max(0, max_chars - 1)].rstrip() + "…"
    return block
