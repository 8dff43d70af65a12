"""One document of a context as the model reads it: :class:`ContextItem`, why it is there (:func:`explain`),
and how the prompt shows it (:func:`render_line`, :func:`render_prompt`). Shared by the whole prompt
(:mod:`brain.features.chat.context`) and its cache-ordered layout (:mod:`brain.features.chat.layout`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: sections in the order they appear in the prompt
SECTIONS = ("persona", "core", "faq", "memory", "summary", "related", "turn")
HEADINGS = {
    "persona": "## Persona",
    "core": "## Always keep in mind about this person",
    "faq": "## Knowledge base",
    "memory": "## What you remember",
    "summary": "## Earlier in this conversation",
    "related": "## Earlier turns related to this message",
    "turn": "## Recent turns",
}
SEPARATOR = {"persona": "\n\n"}


@dataclass
class ContextItem:
    """One document in a context. ``scores``: memories have ``score``, ``similarity``,
    ``similarity_part``, ``lexical_part``, ``importance_part``, ``recency_part``; persona, FAQ and
    summaries ``similarity``; turns none (they are chosen by position). ``why``: what put it there,
    in words (see :func:`explain`)."""

    id: str
    text: str
    metadata: dict[str, Any]
    scores: dict[str, float] = field(default_factory=dict)
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "metadata": dict(self.metadata),
            "scores": dict(self.scores),
            "why": self.why,
        }


def explain(section: str, scores: Mapping[str, float], floor: float | None) -> str:
    """Why an item is in its section, from its scores and the floor it passed (None: no floor)."""
    if section == "turn":
        return "one of the latest turns"
    sim = scores.get("similarity")
    if section == "core":
        return (
            f"always shown: importance {scores.get('importance', 0):.0f}, among the person's most important "
            f"facts" + (f" (similarity {sim:.2f})" if sim is not None else "")
        )
    if section == "persona" or sim is None:
        return "the persona is always shown" if section == "persona" else ""
    passed = f"similarity {sim:.2f}" + (f" >= floor {floor:.2f}" if floor is not None else "")
    if section == "memory" and "score" in scores:
        relevance = sim + scores.get("lexical_part", 0.0)
        passed = f"relevance {relevance:.2f}" + (f" >= floor {floor:.2f}" if floor is not None else "")
        parts = [f"similarity {scores.get('similarity_part', 0.0):.2f}"]
        if scores.get("lexical_part"):
            parts.append(f"words in common {scores['lexical_part']:.2f}")
        parts += [
            f"importance {scores.get('importance_part', 0.0):.2f}",
            f"recency {scores.get('recency_part', 0.0):.2f}",
        ]
        return f"{passed}; score {scores['score']:.2f} = " + " + ".join(parts)
    if section == "related" and "score" in scores:
        why = (
            f"similarity {sim:.2f}; turn search score {scores['score']:.2f} "
            "(dense, words, speaker, session, neighbours, time)"
        )
        # the floor gates the section, not the turn: it is there because the closest turn reached it
        return why + (f"; the conversation's closest turn reaches floor {floor:.2f}" if floor is not None else "")
    return passed


# ---- the prompt ---------------------------------------------------------------------------------------
def render_line(section: str, item: ContextItem) -> str:
    """One item as the prompt shows it."""
    text = item.text.strip()
    meta = item.metadata
    if section == "persona":
        return f"{meta['heading']}:\n{text}" if meta.get("heading") else text
    if section in ("memory", "core"):
        notes = [f"about {meta['entity']}"] if meta.get("entity") else []
        learned = learned_on(meta)
        if learned:
            notes.append(learned)
        return f"- {text}" + (f" ({', '.join(notes)})" if notes else "")
    if section == "summary":
        return f"- (turns {meta['turn_range']}) {text}" if meta.get("turn_range") else f"- {text}"
    if section == "turn":
        return f"{str(meta.get('role', 'user')).capitalize()}: {text}"
    if section == "related":
        when = str(meta.get("timestamp", ""))[:10]
        return f"{str(meta.get('role', 'user')).capitalize()} (turn {meta.get('turn_index')}, {when}): {text}"
    return f"- {text}"


def learned_on(metadata: Mapping[str, object]) -> str:
    """The day a memory was learned, in the conversation's time: when it became true (``valid_from``),
    else its timestamp; "" when neither is a date."""
    for key in ("valid_from", "timestamp"):
        value = metadata.get(key)
        if isinstance(value, str) and len(value) >= 10 and value[4] == "-" and value[7] == "-":
            return value[:10]
    return ""


def render_prompt(sections: Mapping[str, Sequence[ContextItem]], names: Sequence[str] = SECTIONS) -> str:
    """The prompt block: one headed block per non-empty section of ``names``, in that order."""
    blocks = []
    for name in names:
        items = sections.get(name) or []
        if items:
            body = SEPARATOR.get(name, "\n").join(render_line(name, item) for item in items)
            blocks.append(f"{HEADINGS[name]}\n{body}")
    return "\n\n".join(blocks)


__all__ = ["HEADINGS", "SECTIONS", "SEPARATOR", "ContextItem", "explain", "learned_on", "render_line", "render_prompt"]
