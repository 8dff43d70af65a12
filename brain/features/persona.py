"""persona.md -> persona documents, one per section, loaded idempotently at start-up.

Sections are split at Markdown headings (:mod:`brain.text.markdown`); ``topic`` is the heading
slugified (``## Tone`` -> ``tone``) and text before the first heading is ``core``. A content hash decides
whether anything changed: an unchanged file writes and embeds nothing. A changed file is written as a new
version — every section carries ``version`` (the UTC time of the load that introduced it), ``content_hash``,
``position`` and ``sections`` (how many the version has) — and the previous version is removed
afterwards. Readers use the newest *complete* version (all its sections present), so at no moment
do they see a mix of versions or no persona at all, even if a load is interrupted half-way.

The persona's **name** (the assistant's display name on the turns it speaks, see
:meth:`brain.features.chat.ChatMemory.record_exchange`) is read from the text before the first heading: a
line ``name: <Name>``, else an opening sentence ``You are <Name>,`` (or ``.``, ``!``, ``;``, ``:``)
whose name is one to three capitalised words. A persona without either has no name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.model.errors import ValidationError
from brain.model.ids import derived_id
from brain.model.schemas import GLOBAL_SCOPE, DocType, check_speaker_name, format_timestamp, parse_timestamp, utc_now
from brain.rules.memories import visible_scopes
from brain.text.bounded import TooLarge, read_bounded_text
from brain.text.markdown import markdown_sections, slugify
from brain.text.wording import counted

if TYPE_CHECKING:
    from brain.model.results import Document
    from brain.store import Store

#: a persona file larger than this is refused: a persona is a few kilobytes, and every section of it is
#: embedded at each load, kept in process and put in every context. Set from bench/bench_persona.py: at
#: 1,000,000 bytes of ~1 KB sections `brain init` took minutes and 2.5 GB; the cost grows with the bytes
#: (each embedded token), and at this cap it stays within a few seconds of the shipped persona's
MAX_PERSONA_BYTES = 32_768
#: a persona of more sections than this is refused (the context serves at most this many)
MAX_PERSONA_SECTIONS = 1000
_NAME_LINE = re.compile(r"^[ \t]*name[ \t]*:(?P<name>.*)$", re.IGNORECASE | re.MULTILINE)
# "You are Brain, the assistant of ..." -> Brain; "You are a helpful assistant" names no one
_YOU_ARE = re.compile(r"^\s*You are (?P<name>[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,2})\s*[,.;:!]")


@dataclass(frozen=True)
class PersonaSection:
    topic: str
    text: str
    position: int
    heading: str = ""


@dataclass(frozen=True)
class PersonaLoad:
    """What a load did: ``changed`` False means nothing was written or embedded."""

    path: str
    changed: bool
    version: str
    content_hash: str
    sections: int
    removed: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def summary(self) -> str:
        state = f"loaded version {self.version}" if self.changed else f"unchanged (version {self.version})"
        removed = f", {counted(self.removed, 'old section')} removed" if self.removed else ""
        return f"persona {self.path}: {counted(self.sections, 'section')}, {state}{removed}"


def split_sections(markdown: str) -> list[PersonaSection]:
    """The file's non-empty sections in order (:mod:`brain.text.markdown`: a ``#`` line inside a fenced
    code block is code, not a heading); text before the first heading has topic ``core``."""
    sections: list[PersonaSection] = []
    for section in markdown_sections(markdown.splitlines()):
        text = section.text
        if text:
            topic = slugify(section.title) if section.level else "core"
            sections.append(PersonaSection(topic=topic, text=text, position=len(sections), heading=section.title))
    return sections


def name_in(core_text: str) -> str | None:
    """The persona's name in its text before the first heading (see the module docstring), or None.
    A ``name:`` line that is not a valid display name raises ValueError saying why."""
    line = _NAME_LINE.search(core_text)
    if line is not None:
        return check_speaker_name(line.group("name").strip(), "the persona's name: line")
    opening = _YOU_ARE.match(core_text)
    return opening.group("name") if opening is not None else None


def persona_name(sections: Iterable[Document]) -> str | None:
    """The name of a stored persona version (its sections), or None when it has none."""
    for doc in sections:
        if doc.metadata.get("topic") == "core" and not doc.metadata.get("heading"):
            try:
                return name_in(doc.text)
            except ValueError:  # stored before the rule; load_persona refuses such a file now
                return None
    return None


def current_version(metadatas: Iterable[dict[str, Any]]) -> str | None:
    """The newest persona version whose sections are all stored, or None."""
    present: dict[str, int] = {}
    expected: dict[str, int] = {}
    for meta in metadatas:
        version = meta.get("version")
        if version is None:
            continue
        present[version] = present.get(version, 0) + 1
        expected[version] = int(meta.get("sections") or 0)
    complete = [v for v, n in present.items() if expected[v] in (0, n)]  # 0: written without a count
    return max(complete, key=_version_order, default=None)


def _version_order(version: str) -> tuple[float, str]:
    try:
        return (parse_timestamp(version).timestamp(), version)
    except ValueError:
        return (float("-inf"), version)  # a hand-written version sorts before loaded ones


def current_persona(store: Store, entity: str | None = None) -> list[Document]:
    """The sections of the current persona version, in file order, as ``entity`` sees it: chosen among
    the global sections and that entity's (without ``entity``, the global ones: the persona
    ``persona.md`` loads)."""
    docs = _persona_docs(store, entity)
    version = current_version(d.metadata for d in docs)
    chosen = [d for d in docs if d.metadata.get("version") == version]
    return sorted(chosen, key=lambda d: int(d.metadata.get("position", 0)))


def load_persona(store: Store, path: str | Path) -> PersonaLoad:
    """Bring the stored persona in line with the file at ``path`` (see the module docstring)."""
    return load_persona_text(store, read_persona_file(path), str(path))


def read_persona_file(path: str | Path) -> str:
    """The text of the persona file at ``path``: UTF-8, at most :data:`MAX_PERSONA_BYTES`, else an error
    that says what to do."""
    path = Path(path)
    try:
        markdown = read_bounded_text(path, MAX_PERSONA_BYTES)
    except TooLarge:
        raise ValidationError(
            f"persona file {path} is {_size_of(path)}, over the cap of {MAX_PERSONA_BYTES:,} bytes "
            f"(MAX_PERSONA_BYTES; every section is embedded at each load). Keep the persona to who the assistant "
            f"is and how it speaks, a few kilobytes, and move reference material into the knowledge base "
            f"(`brain ingest <kb>`); or check that BRAIN_PERSONA_PATH names the right file"
        ) from None
    except FileNotFoundError:
        raise ValidationError(f"persona file {path} does not exist; create it or set BRAIN_PERSONA_PATH") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"persona file {path} is not valid UTF-8 (byte {exc.start}); save it as UTF-8") from None
    return markdown


def load_persona_text(store: Store, markdown: str, source: str) -> PersonaLoad:
    """Bring the stored persona in line with ``markdown``, the text of the persona file ``source`` (which the
    messages and the report name)."""
    if len(markdown.encode("utf-8")) > MAX_PERSONA_BYTES:
        raise ValidationError(
            f"persona {source} is over the cap of {MAX_PERSONA_BYTES:,} bytes (MAX_PERSONA_BYTES); keep the persona "
            "to who the assistant is and how it speaks, and move reference material into the knowledge base"
        )
    sections = split_sections(markdown)
    if not sections:
        raise ValidationError(f"persona file {source} has no text")
    if len(sections) > MAX_PERSONA_SECTIONS:
        raise ValidationError(
            f"persona file {source} has {len(sections)} sections; a persona has at most "
            f"{MAX_PERSONA_SECTIONS} (MAX_PERSONA_SECTIONS): check that BRAIN_PERSONA_PATH names "
            "the right file"
        )
    if sections[0].topic == "core" and not sections[0].heading:
        try:
            name_in(sections[0].text)
        except ValueError as exc:
            raise ValidationError.of("name", f"persona file {source}: {exc}") from None
    digest = hashlib.sha256(markdown.encode("utf-8")).hexdigest()[:16]
    existing = _persona_docs(store, None)
    version = current_version(d.metadata for d in existing)
    current = [d for d in existing if d.metadata.get("version") == version]
    if current and all(d.metadata.get("content_hash") == digest for d in current):
        stale = [d.id for d in existing if d.metadata.get("version") != version]
        removed = store.delete(stale) if stale else 0  # leftovers of an interrupted load
        return PersonaLoad(source, False, version or "", digest, len(current), removed)
    new_version = format_timestamp(utc_now())
    store.upsert_docs(
        [
            {
                "id": derived_id("persona", new_version, str(s.position)),
                "text": s.text,
                "type": DocType.PERSONA,
                "version": new_version,
                "topic": s.topic,
                "position": s.position,
                "sections": len(sections),
                "content_hash": digest,
                "source": "system",
                **({"heading": s.heading} if s.heading else {}),
            }
            for s in sections
        ]
    )
    # the new version is complete and newest: readers use it from here on; now drop the rest
    stale = [d.id for d in existing]
    removed = store.delete(stale) if stale else 0
    return PersonaLoad(source, True, new_version, digest, len(sections), removed)


def _size_of(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    return f"{size:,} bytes" if size > MAX_PERSONA_BYTES else f"larger than {MAX_PERSONA_BYTES:,} bytes"


def _persona_docs(store: Store, entity: str | None) -> list[Document]:
    scopes = visible_scopes(entity)
    return [d for d in store.get(type=DocType.PERSONA) if d.metadata.get("scope", GLOBAL_SCOPE) in scopes]


def persona_report(store: Store, path: str | Path | None = None) -> dict[str, Any]:
    """The stored persona (``version``, ``sections``, ``name``; 0 sections: none loaded) and, given
    ``path``, the file: ``file`` and ``file_state``: ``loaded`` (the stored version is this file),
    ``changed`` (the file differs: ``brain persona load`` or a restart loads it), ``not loaded``,
    ``missing``, ``unreadable`` (not UTF-8) or ``too large`` (over :data:`MAX_PERSONA_BYTES`)."""
    sections = current_persona(store)
    report: dict[str, object] = {
        "version": sections[0].metadata.get("version") if sections else None,
        "sections": len(sections),
        "name": persona_name(sections),
    }
    if path is not None:
        path = Path(path)
        try:  # hashed as load_persona hashes it
            digest = hashlib.sha256(read_bounded_text(path, MAX_PERSONA_BYTES).encode("utf-8")).hexdigest()[:16]
        except TooLarge:
            state = "too large"
        except OSError:
            state = "missing"
        except UnicodeDecodeError:
            state = "unreadable"
        else:
            state = (
                "not loaded"
                if not sections
                else "loaded"
                if all(d.metadata.get("content_hash") == digest for d in sections)
                else "changed"
            )
        report.update(file=str(path), file_state=state)
    return report


def persona_block(store: Store, max_chars: int | None = None) -> str:
    """The current persona as prompt-ready text, in file order."""
    block = "\n\n".join(
        (f"{d.metadata['heading']}:\n{d.text}" if d.metadata.get("heading") else d.text) for d in current_persona(store)
    )
    if max_chars is not None and len(block) > max_chars:
        block = block[: max(0, max_chars - 1)].rstrip() + "…"
    return block
