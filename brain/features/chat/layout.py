"""The context in cache order: what a chat model reads, laid out so that each prompt starts exactly as the
previous one did. Pure: no store access.

A local model (llama.cpp, Ollama, vLLM) and the hosted APIs keep the state of a prompt's beginning and read only
what follows it when the next prompt starts the same way. A context block that changes with every message and
sits before the conversation makes the model read everything again, every turn. So the layout is:

1. the client's own system messages (the caller's);
2. :attr:`Layout.stable`, one system message: the persona, the facts always kept in mind about the person
   (chosen by importance and age, not by the message) and the summaries of the turns before the window;
3. :attr:`Layout.conversation`: the conversation's recorded turns from the window's start, as ``user`` and
   ``assistant`` messages; each user message carries the part it was sent with (below), re-rendered from the
   ids recorded with it, so nothing already sent is rewritten;
4. the last user message, its text after :attr:`Layout.part`: the memories, knowledge-base passages and
   related older turns chosen for this message (:func:`user_content`), less what the prompt already holds
   (the stable part's facts, the window's turns and what its earlier parts showed): the model has read those.

The window starts at a multiple of the summary window (``BRAIN_SUMMARY_EVERY_N`` exchanges) and moves on only
when the turns from its start, with their parts, no longer fit ``RAG_CONTEXT_MAX_CHARS`` less the persona and the
facts kept in mind (:func:`window_start`; characters, not tokens): a conversation
that fits is read once, and one that does not is read again only when the window moves.

A part re-rendered later shows what its documents say then: a memory since deleted, retired or out of the
reader's scope is left out (:func:`parts_from_shown`), so an old part never brings back what was forgotten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain.features.chat.prompt import ContextItem, render_prompt

#: the sections of the part chosen for each message, in the order it shows them
PART_SECTIONS = ("memory", "faq", "related")
#: the sections of the stable system message
STABLE_SECTIONS = ("persona", "core", "summary")
#: the turn metadata key that records which documents the part sent with a user message showed
SHOWN_KEY = "context_shown"
#: the most documents one recorded part names (a longer list, written by hand, is read no further)
MAX_SHOWN = 100
#: how the part opens and closes, so that a model (a small one too) tells it from what the user wrote
PART_OPENING = "[Memory notes for this message; the user did not write them]"
PART_CLOSING = "[The user wrote:]"
_SHOWN_SECTION = {"memory": "memory", "faq": "faq", "related": "turn"}


@dataclass
class Layout:
    """The context of one message in cache order (see the module). ``shown``: the (section, id) pairs of
    :attr:`part`, in order, to be recorded with the user's turn (:func:`shown_value`) so that later prompts
    repeat the part as it was sent. ``window_start``: the turn index the conversation's messages start at
    (None: no recorded turns)."""

    stable: str = ""
    conversation: list[dict[str, str]] = field(default_factory=list)
    part: str = ""
    shown: list[tuple[str, str]] = field(default_factory=list)
    window_start: int | None = None

    def messages(self, user_message: str) -> list[dict[str, str]]:
        """The chat messages for ``user_message`` after the client's own system messages."""
        stable = [{"role": "system", "content": self.stable}] if self.stable else []
        return [*stable, *self.conversation, {"role": "user", "content": user_content(self.part, user_message)}]

    def to_dict(self) -> dict[str, object]:
        return {
            "stable": self.stable,
            "conversation": [dict(m) for m in self.conversation],
            "part": self.part,
            "shown": [list(pair) for pair in self.shown],
            "window_start": self.window_start,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Layout:
        return cls(
            stable=str(data.get("stable", "")),
            conversation=[
                {"role": str(m.get("role")), "content": str(m.get("content"))} for m in data.get("conversation") or []
            ],
            part=str(data.get("part", "")),
            shown=[(str(s), str(i)) for s, i in data.get("shown") or []],
            window_start=data.get("window_start"),
        )


def render_part(sections: Mapping[str, Sequence[ContextItem]]) -> str:
    """The part for one message: its sections' blocks (:data:`PART_SECTIONS`), or "" when they are empty."""
    return render_prompt({name: sections.get(name) or [] for name in PART_SECTIONS}, PART_SECTIONS)


def render_stable(sections: Mapping[str, Sequence[ContextItem]]) -> str:
    return render_prompt({name: sections.get(name) or [] for name in STABLE_SECTIONS}, STABLE_SECTIONS)


def user_content(part: str, text: str) -> str:
    """A user message as the model reads it: the part chosen for it, marked as brain's, then what the user wrote."""
    return f"{PART_OPENING}\n{part}\n{PART_CLOSING}\n{text}" if part else text


def shown_value(shown: Sequence[tuple[str, str]]) -> str:
    """``shown`` as recorded in a user turn's :data:`SHOWN_KEY` metadata."""
    return json.dumps([list(pair) for pair in shown], separators=(",", ":"))


def parse_shown(value: Any) -> list[tuple[str, str]]:
    """The (section, id) pairs a turn's :data:`SHOWN_KEY` names; [] for a value that is not such a list (a
    turn recorded by hand may hold anything there, and a part that cannot be read is simply not repeated)."""
    if not isinstance(value, str):
        return []
    try:
        pairs = json.loads(value)
    except ValueError:
        return []
    if not isinstance(pairs, list):
        return []
    shown = []
    for pair in pairs[:MAX_SHOWN]:
        if (
            isinstance(pair, list)
            and len(pair) == 2
            and pair[0] in PART_SECTIONS
            and isinstance(pair[1], str)
            and pair[1]
        ):
            shown.append((pair[0], pair[1]))
    return shown


def parts_from_shown(
    shown: Sequence[tuple[str, str]],
    documents: Mapping[str, Any],
    *,
    conversation_id: str,
    usable: Any,
) -> dict[str, list[ContextItem]]:
    """The sections of a part recorded as ``shown``, from ``documents`` (id -> a document with ``text`` and
    ``metadata``, as the reader may see them now): an id missing there, of another type than its section's,
    a related turn of another conversation, or a memory ``usable(metadata)`` refuses, is left out."""
    sections: dict[str, list[ContextItem]] = {name: [] for name in PART_SECTIONS}
    for section, doc_id in shown:
        doc = documents.get(doc_id)
        if doc is None or doc.metadata.get("type") != _SHOWN_SECTION[section]:
            continue
        if section == "related" and doc.metadata.get("conversation_id") != conversation_id:
            continue
        if section == "memory" and not usable(doc.metadata):
            continue
        sections[section].append(ContextItem(doc.id, doc.text, dict(doc.metadata)))
    return sections


def window_start(sizes: Sequence[int], stride: int, budget: int) -> int:
    """Where the conversation's messages start, as a position in its turns: the first multiple of ``stride``
    from which the turns' ``sizes`` fit ``budget``; the last such multiple when none fits, so the latest turns
    are always there."""
    start, total = 0, sum(sizes)
    while total > budget and start + stride < len(sizes):
        total -= sum(sizes[start : start + stride])
        start += stride
    return start


__all__ = [
    "MAX_SHOWN",
    "PART_CLOSING",
    "PART_OPENING",
    "PART_SECTIONS",
    "SHOWN_KEY",
    "STABLE_SECTIONS",
    "Layout",
    "parse_shown",
    "parts_from_shown",
    "render_part",
    "render_stable",
    "shown_value",
    "user_content",
    "window_start",
]
