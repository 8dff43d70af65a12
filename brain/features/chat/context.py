"""What the model sees for one message: sections -> budget -> prompt. Pure: no store access.

The caller (:class:`~brain.features.chat.ChatMemory`) gathers the candidates of each section, best first, and
hands them to :func:`assemble_context`, which orders them for reading, drops whole items until the
prompt fits the character (and optionally token) budget, and renders the prompt.

When the budget is tight, whole items are dropped, lowest priority first (:data:`DROP_PRIORITY`):
the persona is who the assistant is and goes last; the facts always kept in mind about the person (``core``:
their most important memories, shown whatever the message) next; the recent turns are what the user is replying
to; memories are the durable personal facts; summaries restate older turns (partly covered by the
memories); FAQ entries are generic knowledge the model often partly has. Inside a section the
weakest item goes first (lowest score or similarity; for turns, the oldest).

Relevance first: the caller puts a memory, FAQ entry or summary among the candidates only when it is
relevant to the message (the gate of :mod:`brain.rules.ranking`, with the embedder's calibrated floor, see
:mod:`brain.rules.relevance`); a section may be empty, and :attr:`Context.relevance` says why — how many
candidates were looked at and how many fell below the floor — while each item's ``why`` says what
let it in (its similarity against the floor, the parts of its score).

Sizes are counted per rendered line and added up, so dropping an item never re-renders the prompt:
characters exactly; tokens with :class:`TokenCounter`, whose pieces split at whitespace and
punctuation, so the counts of lines add up to the count of the prompt.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain.features.chat.layout import Layout
from brain.features.chat.prompt import HEADINGS, SECTIONS, SEPARATOR, ContextItem, render_line, render_prompt
from brain.model.errors import BrainError
from brain.model.schemas import parse_turn_range
from brain.providers.summarizers.extractive import ExtractiveSummarizer
from brain.text.tokenizer import counting_tokenizer, tokenizer_path

log = logging.getLogger(__name__)

#: sections in the order they are kept when the budget is tight (the last is dropped first)
DROP_PRIORITY = ("persona", "core", "turn", "memory", "related", "summary", "faq")
#: when no tokenizer is at hand: about four characters per token for English prose
CHARS_PER_TOKEN = 4


# ---- results ---------------------------------------------------------------------------------------
@dataclass
class Context:
    """What the model should see for one user message: one list per document type and the
    rendered ``prompt``. ``dropped`` lists the items the budget left out (section, id)."""

    conversation_id: str | None
    entity: str | None
    enabled: bool = True
    persona: list[ContextItem] = field(default_factory=list)
    core: list[ContextItem] = field(default_factory=list)
    faq: list[ContextItem] = field(default_factory=list)
    memory: list[ContextItem] = field(default_factory=list)
    summary: list[ContextItem] = field(default_factory=list)
    related: list[ContextItem] = field(default_factory=list)
    turn: list[ContextItem] = field(default_factory=list)
    prompt: str = ""
    chars: int = 0
    tokens: int | None = None
    dropped: list[dict[str, str]] = field(default_factory=list)
    #: per gated section, what the gate did: ``floor``, ``candidates`` looked at, ``below_floor`` (and
    #: for memories ``margin``; for related turns ``best_similarity``, the closest turn's, which the floor
    #: is held against); a section with candidates and no items had nothing relevant enough
    relevance: dict[str, dict[str, object]] = field(default_factory=dict)
    #: the same context in cache order, for a chat model that keeps a prompt's beginning
    #: (:mod:`brain.features.chat.layout`); None when the context was built without it
    layout: Layout | None = None

    def sections(self) -> dict[str, list[ContextItem]]:
        return {name: getattr(self, name) for name in SECTIONS}

    def to_dict(self) -> dict[str, object]:
        return {
            "conversation_id": self.conversation_id,
            "entity": self.entity,
            "enabled": self.enabled,
            "sections": {name: [item.to_dict() for item in items] for name, items in self.sections().items()},
            "prompt": self.prompt,
            "chars": self.chars,
            "tokens": self.tokens,
            "dropped": [dict(d) for d in self.dropped],
            "relevance": {name: dict(gate) for name, gate in self.relevance.items()},
            "layout": None if self.layout is None else self.layout.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Context:
        """The inverse of :meth:`to_dict` (the context a server built)."""
        sections = data.get("sections") or {}
        layout = data.get("layout")
        return cls(
            conversation_id=data.get("conversation_id"),
            entity=data.get("entity"),
            enabled=bool(data.get("enabled", True)),
            **{name: [ContextItem(**item) for item in sections.get(name, [])] for name in SECTIONS},
            prompt=str(data.get("prompt", "")),
            chars=int(data.get("chars", 0)),
            tokens=data.get("tokens"),
            dropped=[dict(d) for d in data.get("dropped", [])],
            relevance={name: dict(gate) for name, gate in (data.get("relevance") or {}).items()},
            layout=Layout.from_dict(layout) if isinstance(layout, Mapping) else None,
        )


# ---- token counting ----------------------------------------------------------------------------------
class TokenCounter:
    """Counts tokens for the budget: the local MiniLM WordPiece tokenizer (no truncation, no special
    tokens) when its file is installed, else ``ceil(chars / 4)``. WordPiece is not the chat model's
    tokenizer; on English it counts a little more than Llama-style BPE does, so the budget errs on the
    safe side. Pieces split at whitespace and punctuation, so counts of lines add up."""

    def __init__(self) -> None:
        self._tokenizer = None
        self.method = f"estimate: ceil(chars / {CHARS_PER_TOKEN})"
        estimating = "no local tokenizer; the token budget uses an estimate of %d characters per token"
        try:
            tokenizer_path()
        except BrainError:  # not installed (an Ollama-only setup): estimating is expected
            log.info(estimating, CHARS_PER_TOKEN)
            return
        try:
            self._tokenizer = counting_tokenizer()
        except ImportError:
            log.info(estimating, CHARS_PER_TOKEN)
            return
        except BrainError as exc:  # installed but unreadable: worth a warning
            log.warning("cannot read the local tokenizer (%s); the token budget uses an estimate", exc)
            return
        self.method = "wordpiece (local/minilm-l6-v2 tokenizer)"

    def count(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        if self._tokenizer is None:
            return [math.ceil(len(t) / CHARS_PER_TOKEN) for t in texts]
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]


# ---- the budget ---------------------------------------------------------------------------------------
class ContextBudget:
    """Drops whole items, lowest priority first, until the prompt fits ``max_chars`` and ``max_tokens``.

    ``sections``: the items as shown (reading order); ``drop_order``: per section, the order in which
    its items go (weakest first). ``max_tokens`` 0, or no ``counter``: characters only."""

    def __init__(
        self,
        sections: Mapping[str, Sequence[ContextItem]],
        drop_order: Mapping[str, Sequence[ContextItem]],
        max_chars: int,
        max_tokens: int = 0,
        counter: TokenCounter | None = None,
    ):
        self.sections = {name: list(sections.get(name) or []) for name in SECTIONS}
        self.drop_order = {name: list(drop_order.get(name) or []) for name in SECTIONS}
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        lines = {id(item): render_line(name, item) for name, items in self.sections.items() for item in items}
        self._chars = {key: len(text) for key, text in lines.items()}
        self._tokens: dict[int, int] = {}
        self._heading_tokens: dict[str, int] = {}
        if max_tokens > 0 and counter is not None:
            keys = list(lines)
            self._tokens = dict(zip(keys, counter.count([lines[k] for k in keys])))
            self._heading_tokens = dict(zip(SECTIONS, counter.count([HEADINGS[s] for s in SECTIONS])))

    def size(self) -> tuple[int, int | None]:
        """(characters, tokens or None when tokens are not counted) of the prompt the kept items render to."""
        chars, tokens, blocks = 0, 0, 0
        for name in SECTIONS:
            items = self.sections[name]
            if not items:
                continue
            blocks += 1
            sep = len(SEPARATOR.get(name, "\n"))
            chars += len(HEADINGS[name]) + 1 + sum(self._chars[id(i)] for i in items) + sep * (len(items) - 1)
            if self._tokens:
                tokens += self._heading_tokens[name] + sum(self._tokens[id(i)] for i in items)
        chars += 2 * max(blocks - 1, 0)
        return chars, (tokens if self._tokens else None)

    def fit(self) -> list[dict[str, str]]:
        """Drop items until the prompt fits; returns what was dropped (section, id, reason), in order."""
        dropped = []
        queue = [(name, item) for name in reversed(DROP_PRIORITY) for item in self.drop_order[name]]
        chars, tokens = self.size()
        for name, item in queue:
            if chars <= self.max_chars and (tokens is None or tokens <= self.max_tokens):
                break
            self.sections[name] = [i for i in self.sections[name] if i is not item]
            reason = "max_chars" if chars > self.max_chars else "max_tokens"
            dropped.append({"section": name, "id": item.id, "reason": reason})
            chars, tokens = self.size()
        return dropped


def reading_order(ranked: Mapping[str, Sequence[ContextItem]]) -> dict[str, list[ContextItem]]:
    """Each section as the prompt shows it: the persona in file order, summaries and related turns in
    conversation order, recent turns oldest first; FAQ entries and memories best first."""

    def of(name: str) -> list[ContextItem]:
        return list(ranked.get(name) or [])

    return {
        "persona": sorted(of("persona"), key=lambda i: int(i.metadata.get("position", 0))),
        "core": of("core"),
        "faq": of("faq"),
        "memory": of("memory"),
        "summary": sorted(of("summary"), key=lambda i: int(i.metadata.get("summary_index") or 0)),
        "related": sorted(of("related"), key=lambda i: int(i.metadata.get("turn_index") or 0)),
        "turn": list(reversed(of("turn"))),
    }


def repeats_shown_turns(ranked: Mapping[str, Sequence[ContextItem]]) -> list[ContextItem]:
    """The extractive summaries among ``ranked["summary"]`` (the fallback's, ``fallback: true``, or the
    extractive summariser's) whose every turn is among the recent or related turns: such a summary quotes
    those turns' sentences word for word, so showing it adds nothing. The budget drops summaries before
    those turns, so leaving it out never loses text. A model's summary restates, and stays."""
    shown = {
        int(i.metadata["turn_index"])
        for name in ("turn", "related")
        for i in ranked.get(name) or []
        if isinstance(i.metadata.get("turn_index"), int)
    }
    repeating = []
    for item in ranked.get("summary") or []:
        if item.metadata.get("fallback") is not True and item.metadata.get("summarizer") != ExtractiveSummarizer.name:
            continue
        try:
            start, end = parse_turn_range(item.metadata.get("turn_range"))
        except ValueError:
            continue
        if all(index in shown for index in range(start, end + 1)):
            repeating.append(item)
    return repeating


def assemble_context(
    ranked: Mapping[str, Sequence[ContextItem]],
    *,
    conversation_id: str | None = None,
    entity: str | None = None,
    max_chars: int,
    max_tokens: int = 0,
    counter: TokenCounter | None = None,
    relevance: Mapping[str, Mapping[str, Any]] | None = None,
) -> Context:
    """Sections -> budget -> prompt. ``ranked``: per section (:data:`SECTIONS`), the candidates best
    first (recent turns: newest first); a missing section is empty. A fallback summary whose turns are
    all shown (:func:`repeats_shown_turns`) stays out, listed in ``dropped`` with reason ``repeats_turns``.
    ``relevance``: what the gate did per section (:attr:`Context.relevance`)."""
    repeating = repeats_shown_turns(ranked)
    if repeating:
        ranked = {**ranked, "summary": [i for i in ranked.get("summary") or [] if i not in repeating]}
    budget = ContextBudget(
        reading_order(ranked),
        {name: list(reversed(ranked.get(name) or [])) for name in SECTIONS},
        max_chars,
        max_tokens,
        counter,
    )
    context = Context(
        conversation_id=conversation_id,
        entity=entity,
        relevance={name: dict(gate) for name, gate in (relevance or {}).items()},
    )
    context.dropped = [{"section": "summary", "id": i.id, "reason": "repeats_turns"} for i in repeating] + budget.fit()
    for name in SECTIONS:
        setattr(context, name, budget.sections[name])
    context.prompt = render_prompt(budget.sections)
    context.chars, context.tokens = budget.size()
    return context


__all__ = [
    "CHARS_PER_TOKEN",
    "DROP_PRIORITY",
    "Context",
    "ContextBudget",
    "TokenCounter",
    "assemble_context",
    "reading_order",
    "repeats_shown_turns",
]
