"""Markdown sections: the text split at its ATX headings (``# Title`` .. ``###### Title``).

The knowledge-base ingester and the persona loader both cut files into sections, and a heading means
the same to both. The rules follow CommonMark where they matter here: up to three spaces may indent a
heading; ``#`` must be followed by a space or end the line (``#hashtag`` is text); a closing run of
``#`` is dropped only when a space precedes it (``# C#`` is titled ``C#``); and a line inside a fenced
code block (``` or ~~~, closed by a fence of the same character at least as long) is never a
heading, so a shell comment in an example does not start a section. Each line also says whether it
is code, so callers looking for their own markers (``Q:`` lines) can skip code the same way.
:func:`slugify` turns a heading into the ``topic`` both store with a section.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class MarkdownLine:
    number: int  # 1-based line number in the file
    text: str
    code: bool  # a fence line or a line inside a fenced code block


@dataclass(frozen=True)
class MarkdownSection:
    """``level`` 1-6 and the heading's ``title`` (may be empty: ``##`` alone), or level 0 and title
    ``""`` for the text before the first heading. ``lines`` start with the heading line (level > 0)."""

    level: int
    title: str
    lines: tuple[MarkdownLine, ...]

    @property
    def body(self) -> tuple[MarkdownLine, ...]:
        """The lines after the heading (every line of the level-0 section)."""
        return self.lines[1:] if self.level else self.lines

    @property
    def text(self) -> str:
        """The body, stripped of surrounding blank space."""
        return "\n".join(line.text for line in self.body).strip()


def slugify(heading: str) -> str:
    """A heading (or a file name) as a topic: lower-case ASCII letters and digits joined by ``_``
    (``## Web search`` -> ``web_search``); ``section`` when nothing is left."""
    slug = re.sub(r"[^a-z0-9]+", "_", heading.casefold()).strip("_")
    return slug or "section"


def _fence_step(fence: str | None, line: str) -> tuple[str | None, bool]:
    """(the open fence after ``line`` or None, whether ``line`` is code or a fence)."""
    match = _FENCE.match(line)
    if fence is not None:
        if (
            match
            and match.group(1)[0] == fence[0]
            and len(match.group(1)) >= len(fence)
            and not line.strip()[len(match.group(1)) :].strip()
        ):
            return None, True
        return fence, True
    if match:
        return match.group(1), True
    return None, False


def markdown_sections(lines: Iterable[str], *, first_line: int = 1) -> list[MarkdownSection]:
    """The sections of ``lines`` in order, the level-0 section (possibly empty) first.
    ``first_line`` is the number of the first line (e.g. after front matter the caller removed)."""
    sections: list[MarkdownSection] = []
    level, title = 0, ""
    current: list[MarkdownLine] = []
    fence: str | None = None
    for number, line in enumerate(lines, start=first_line):
        fence, code = _fence_step(fence, line)
        heading = None if code else _HEADING.match(line)
        if heading:
            sections.append(MarkdownSection(level, title, tuple(current)))
            level = len(heading.group(1))
            title = _CLOSING_HASHES.sub("", heading.group(2) or "").strip()
            current = []
        current.append(MarkdownLine(number, line, code))
    sections.append(MarkdownSection(level, title, tuple(current)))
    return sections


__all__ = ["MarkdownLine", "MarkdownSection", "markdown_sections", "slugify"]
