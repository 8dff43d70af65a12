"""Memory formation's exchange with a model: the request, the answer's shape, and the rules it must keep.

Pure: no store, no network. The runner (:mod:`brain.features.chat.formation`) shows a model a window of
turns (a summary's window) and the closest current memories of the window's scope, asks for the durable
facts, and checks the answer here before anything is written.

**The request** (:func:`formation_messages`): a system message with the rules, and a user message with the
conversation's time, the known memories under short keys ``M1``..``Mn`` (never their ids: small models
mangle long ids; :func:`candidate_keys` maps the keys back) and the turns, numbered by ``turn_index``.
Ollama's ``format`` is :func:`answer_schema`, so a model that honours it answers in that shape.

**The answer** (:class:`FormationAnswer`): ``{"facts": [...]}``, each fact a :class:`FormedFact`: its text
(one fact, third person), importance 1..5, tags (the store's tag rules), the entity it is about, what it
does to the known memories (``add``; ``same``, ``update`` or ``contradict`` a memory named by its key),
an optional expiry and start (ISO times with a timezone, conversation time) and the turns it comes from.

**Refused whole** (:func:`check_answer`): an answer that is not JSON, has the wrong shape, or holds one
fact that breaks a rule (an importance of 9, a turn outside the window, a key that was not listed, no
key for same/update/contradict, an entity the scope rule refuses) is refused as a whole with
:class:`~brain.model.errors.FormationAnswerError` naming every problem; nothing of it is applied.
:func:`repair_messages` asks the model once to correct it, showing those problems.

**The scope rule.** A fact is stored in the scope of the window's turns (the scope of its last turn, as
for summaries). In an entity's conversation the only accepted ``entity`` is that entity's name (case
aside: "Alice" is alice in alice's conversation); in a conversation without an entity the only accepted
value is ``"global"``. Anything else, another entity or ``"global"`` in Alice's conversation, refuses the
answer. So a fact from Alice's conversation is Alice's: never Bob's, never everyone's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from brain.model.errors import FormationAnswerError, Problem, ValidationError, joined
from brain.model.schemas import (
    GLOBAL_SCOPE,
    check_importance,
    check_tags,
    format_timestamp,
    parse_timestamp,
    pydantic_problems,
)

#: the longest fact text kept (characters, after stripping)
MAX_FACT_CHARS = 1000
#: the most facts one answer may hold: a window of turns states far fewer durable facts
MAX_FACTS = 50
#: a turn's text is cut to this many characters in the request (a pasted document is not a fact source)
MAX_TURN_CHARS = 4000
#: a refused answer is shown back to the model at most this long in the repair request
MAX_REPAIR_ECHO_CHARS = 4000
#: problems listed in a repair request; the rest are counted
MAX_REPAIR_PROBLEMS = 20

Action = Literal["add", "same", "update", "contradict"]
#: a time in the answer: the schema's ``date-time`` format makes a constrained model write one with a timezone
IsoTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
#: the actions that name a known memory (``target``)
TARGETED_ACTIONS = ("same", "update", "contradict")

# reasoning models put their thinking before the answer; some models wrap JSON in a Markdown fence
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


# ---- what the model is shown ------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowTurn:
    """One turn of the window, as the model sees it: ``timestamp`` is the turn's time (ISO or datetime),
    ``speaker`` its speaker's display name when the conversation records one."""

    turn_index: int
    role: str  # "user" or "assistant"
    text: str
    timestamp: str | datetime | None = None
    speaker: str | None = None


@dataclass(frozen=True)
class Candidate:
    """A current memory shown to the model for comparison; ``id`` is never shown (the key is)."""

    id: str
    text: str
    valid_from: str | datetime | None = None


def candidate_keys(candidates: Sequence[Candidate]) -> dict[str, Candidate]:
    """The short keys the request lists ``candidates`` under, in order: ``{"M1": first, "M2": ...}``."""
    return {f"M{n}": candidate for n, candidate in enumerate(candidates, start=1)}


def accepted_entity(entity: str | None) -> str:
    """The one ``entity`` value the scope rule accepts in a conversation of ``entity`` (None: global)."""
    return GLOBAL_SCOPE if entity is None else entity


def formation_messages(
    turns: Sequence[WindowTurn], candidates: Sequence[Candidate], *, entity: str | None, now: str | datetime
) -> list[dict[str, str]]:
    """The chat messages that ask for the durable facts of ``turns`` (system + user). ``candidates`` are the
    known memories (keys from :func:`candidate_keys`); ``entity`` the conversation's entity (None: global);
    ``now`` the conversation's time (the last turn's), from which "tomorrow" is reckoned."""
    if not turns:
        raise ValidationError.of("turns", "formation needs at least one turn: there is nothing to form memories from")
    person = entity if entity is not None else _user_name(turns)
    system = _SYSTEM.format(person=person, entity=accepted_entity(entity))
    known = (
        "\n".join(
            f"{key}{_since(c.valid_from)}: {_one_line(c.text, MAX_TURN_CHARS)}"
            for key, c in candidate_keys(candidates).items()
        )
        or "(none)"
    )
    user = (
        f"Current time: {_iso(now)}\n\nKnown memories:\n{known}\n\n"
        f"Conversation:\n{_transcript(turns)}\n\nWhich durable facts does this conversation state?"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_SYSTEM = """\
You read part of a conversation between a user and an assistant and write down the durable facts worth \
remembering about {person}: preferences, plans, relationships, biography, decisions, lasting circumstances. \
Leave out small talk, greetings, questions, passing moods, and what the assistant said unless the user \
confirmed it.
For each fact:
- text: one fact, a short sentence that stands alone, in the third person, naming the person \
("{person} is vegetarian."), never "I", "you" or "the user".
- importance: 1 trivia, 2 minor detail, 3 useful, 4 important (plans, relationships, decisions), \
5 essential (health, safety, firm commitments).
- tags: up to three short lowercase labels (food, work, family).
- entity: always "{entity}".
- turns: the numbers of the turns the fact comes from.
- valid_from: when it became true, an ISO time with timezone, only if the conversation says; else null.
- expires_at: only for a fact that ends at a known time ("the exam is tomorrow": the end of that day), an \
ISO time with timezone; else null.
- action and target: the known memories are listed with keys M1, M2, ... If the fact says what one of them \
says, action "same" and target its key; if it changes one (moved, new job), "update"; if it shows one was \
wrong, "contradict"; otherwise "add" with target null. Do not repeat a known memory with nothing new.
If nothing durable was said, answer {{"facts": []}}. Answer with the JSON object only."""


def _user_name(turns: Sequence[WindowTurn]) -> str:
    return next((t.speaker for t in turns if t.role == "user" and t.speaker), "the user")


def _iso(value: str | datetime) -> str:
    return format_timestamp(parse_timestamp(value))


def _since(valid_from: str | datetime | None) -> str:
    return "" if valid_from is None else f" (since {_iso(valid_from)})"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit].rsplit(" ", 1)[0] + " …"


def _transcript(turns: Sequence[WindowTurn]) -> str:
    """``[index] time Role (speaker): text`` lines; the time only where it changes, to save tokens."""
    lines, shown = [], None
    for turn in turns:
        at = None if turn.timestamp is None else _iso(turn.timestamp)
        stamp = f" {at}" if at is not None and at != shown else ""
        shown = at if at is not None else shown
        who = turn.role.capitalize() + (f" ({turn.speaker})" if turn.speaker else "")
        lines.append(f"[{turn.turn_index}]{stamp} {who}: {_one_line(turn.text, MAX_TURN_CHARS)}")
    return "\n".join(lines)


# ---- what the model answers ---------------------------------------------------------------------------


class FormedFact(BaseModel):
    """One fact of a model's answer. Checked against a request when validated with the context
    ``{"entity": <accepted entity>, "turn_indices": set, "candidate_keys": set}`` (:func:`check_answer`)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="one self-contained fact in the third person")
    importance: int = Field(json_schema_extra={"minimum": 1, "maximum": 5}, description="1 trivia .. 5 essential")
    tags: list[str] = Field(default_factory=list, description="short labels")
    entity: str = Field(description="who the fact is about: the conversation's entity, or 'global'")
    action: Action = Field("add", description="what the fact does to the known memories")
    target: str | None = Field(
        None, validate_default=True, description="the known memory's key (M1, M2, ...) for same, update, contradict"
    )
    expires_at: IsoTime | None = Field(None, description="when the fact stops being true (ISO 8601 with timezone)")
    valid_from: IsoTime | None = Field(None, description="when the fact became true (ISO 8601 with timezone)")
    turns: list[int] = Field(min_length=1, description="the numbers of the turns the fact comes from")

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"text must be a string, got {type(value).__name__}")
        text = value.strip()
        if not text:
            raise ValueError("text is empty: give the fact as a sentence")
        if len(text) > MAX_FACT_CHARS:
            raise ValueError(
                f"text has {len(text)} characters; a fact has at most {MAX_FACT_CHARS}: split it into shorter facts"
            )
        return text

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, value: object) -> int:
        return check_importance(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: object) -> list[str]:
        return check_tags(value)

    @field_validator("entity")
    @classmethod
    def _entity(cls, value: str, info: ValidationInfo) -> str:
        accepted: str | None = (info.context or {}).get("entity")
        if accepted is None:
            return value
        if value.strip().casefold() == accepted.casefold():
            return accepted
        if accepted == GLOBAL_SCOPE:
            raise ValueError(
                f"entity {value!r} is refused: this conversation belongs to no entity, so every "
                f"fact's entity is {GLOBAL_SCOPE!r}"
            )
        raise ValueError(
            f"entity {value!r} is refused: this conversation belongs to {accepted!r}, so every fact's "
            f"entity is {accepted!r} (never another entity, never {GLOBAL_SCOPE!r})"
        )

    @field_validator("target")
    @classmethod
    def _target(cls, value: str | None, info: ValidationInfo) -> str | None:
        action = info.data.get("action")
        if action is None:  # the action itself was refused; its problem is reported
            return value
        if action == "add":
            return None  # an added fact names no memory; a key given anyway means nothing
        keys = (info.context or {}).get("candidate_keys")
        if value is None or not value.strip():
            listed = f" ({', '.join(_ordered_keys(keys))})" if keys else ""
            raise ValueError(
                f"target is required for action {action!r}: the key of the known memory{listed} "
                "it is the same as, updates or contradicts; or use action 'add'"
            )
        value = value.strip()
        if keys is not None and value not in keys:
            listed = f"the known memories are {', '.join(_ordered_keys(keys))}" if keys else "no memories are known"
            raise ValueError(f"target {value!r} is not a listed memory: {listed}")
        return value

    @field_validator("expires_at", "valid_from")
    @classmethod
    def _time(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        return format_timestamp(parse_timestamp(value, info.field_name or "time"))

    @field_validator("turns")
    @classmethod
    def _turns(cls, value: list[int], info: ValidationInfo) -> list[int]:
        known = (info.context or {}).get("turn_indices")
        unknown = [] if known is None else [n for n in value if n not in known]
        if unknown and known is not None:
            raise ValueError(
                f"turns {unknown} are not turns of this conversation window: the turns shown are {_span(known)}"
            )
        return sorted(set(value))


class FormationAnswer(BaseModel):
    """A model's whole answer: the facts it found (none when nothing durable was said)."""

    model_config = ConfigDict(extra="forbid")

    facts: list[FormedFact] = Field(max_length=MAX_FACTS)


def answer_schema(
    *, entity: str | None = None, turn_indices: Iterable[int] | None = None, candidate_keys: Iterable[str] | None = None
) -> dict[str, object]:
    """The JSON schema of :class:`FormationAnswer`, self-contained (no ``$ref``) and without titles: what
    is passed as Ollama's ``format`` or OpenAI's ``response_format``, which constrains the model's output to it.

    Given the request's ``entity`` (its accepted value, :func:`accepted_entity`), ``turn_indices`` and
    ``candidate_keys``, the schema also holds the rules that depend on them, as enums: a server that constrains
    its output to the schema then cannot write a fact about another entity, a turn outside the window or an
    unlisted key, which small models otherwise do (a fact about "assistant" refuses the whole answer)."""
    schema = _generic_schema()
    item = schema["properties"]["facts"]["items"]
    # a constrained model leaves out what it may: asked for action and target every time, it weighs each fact
    # against the known memories instead of adding it beside the one it changes
    item["required"] = [*item["required"], *(k for k in ("action", "target") if k not in item["required"])]
    fact = item["properties"]
    if entity is not None:
        fact["entity"] = {**fact["entity"], "enum": [entity]}
    if turn_indices is not None:
        fact["turns"] = {**fact["turns"], "items": {"type": "integer", "enum": sorted(set(turn_indices))}}
    if candidate_keys is not None:
        keys = _ordered_keys(candidate_keys)
        fact["target"] = {
            **{k: v for k, v in fact["target"].items() if k != "anyOf"},
            "anyOf": [{"type": "string", "enum": keys}, {"type": "null"}] if keys else [{"type": "null"}],
        }
        if not keys:
            # every other action needs a known memory's key: with none listed, "update" can only be refused
            fact["action"] = {**fact["action"], "enum": ["add"]}
    return schema


def _generic_schema() -> dict[str, Any]:
    schema = FormationAnswer.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            # titles, defaults and the models' docstrings are for Python readers, not for the model
            dropped = ("title", "default", "description") if "properties" in node else ("title", "default")
            return {k: inline(v) for k, v in node.items() if k not in dropped}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    inlined: dict[str, object] = inline(schema)
    return inlined


def check_answer(
    content: str, *, entity: str | None, turn_indices: set[int], candidate_keys: set[str]
) -> list[FormedFact]:
    """The facts of the model's answer ``content``, checked against its request: ``entity`` the
    conversation's entity (None: global; the scope rule), ``turn_indices`` the window's turns,
    ``candidate_keys`` the keys the request listed. Raises :class:`FormationAnswerError` naming every
    problem (the answer is refused whole); a fact's ``entity`` comes back as the accepted name."""
    data, problem = _parse(content)
    if problem is not None:
        raise FormationAnswerError(problem.message, [problem], content=content)
    context = {
        "entity": accepted_entity(entity),
        "turn_indices": set(turn_indices),
        "candidate_keys": set(candidate_keys),
    }
    try:
        answer = FormationAnswer.model_validate(data, context=context)
    except pydantic.ValidationError as exc:
        problems = pydantic_problems(exc)
        raise FormationAnswerError(f"the answer was refused: {joined(problems)}", problems, content=content) from None
    return list(answer.facts)


def _parse(content: object) -> tuple[Any, Problem | None]:
    """The answer's JSON object, or the problem that it is not one."""
    if not isinstance(content, str):
        return None, Problem("answer", f"the answer must be JSON text, got {type(content).__name__}")
    text = _THINK.sub("", content).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not text:
        return None, Problem("answer", 'the answer is empty: answer with a JSON object {"facts": [...]}')
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, Problem(
            "answer",
            f"the answer is not JSON ({exc.msg} at line {exc.lineno} column "
            f'{exc.colno}): answer with one JSON object {{"facts": [...]}}',
        )
    if not isinstance(data, dict):
        return None, Problem("answer", f'the answer must be a JSON object {{"facts": [...]}}, got a {_json_kind(data)}')
    return data, None


def refusal_outcome(error: FormationAnswerError, *, truncated: bool = False) -> str:
    """Which outcome (:data:`~brain.model.schemas.FORMATION_OUTCOMES`) a refused answer counts as: ``too_long``
    when the model was cut at its token limit (``truncated``), ``not_json`` when the text is no JSON object,
    ``foreign`` when a fact names an entity the scope rule refuses (another person, or everyone), else
    ``wrong_fields``."""
    if truncated:
        return "too_long"
    if any(p.field == "answer" for p in error.problems):
        return "not_json"
    if any(_foreign(p) for p in error.problems):
        return "foreign"
    return "wrong_fields"


def _foreign(problem: Problem) -> bool:
    """A fact's entity refused by the scope rule (not one left out, which is the wrong fields)."""
    return bool(problem.field) and problem.field.rsplit(".", 1)[-1] == "entity" and "is refused" in problem.message


def repair_messages(
    messages: Sequence[Mapping[str, str]], content: str, error: FormationAnswerError
) -> list[dict[str, str]]:
    """``messages`` followed by the refused answer ``content`` and a request to correct every problem
    ``error`` names; the model's one chance to repair its answer."""
    shown = error.problems[:MAX_REPAIR_PROBLEMS]
    lines = [f"- {p.field}: {p.message}" if p.field and p.field not in p.message else f"- {p.message}" for p in shown]
    if len(error.problems) > len(shown):
        lines.append(f"- and {len(error.problems) - len(shown)} more problems")
    echo = content if len(content) <= MAX_REPAIR_ECHO_CHARS else content[:MAX_REPAIR_ECHO_CHARS] + " …"
    request = (
        "Your answer was refused as a whole, for these problems:\n"
        + "\n".join(lines)
        + '\nAnswer again with the complete corrected JSON object {"facts": [...]}, every fact, and '
        "nothing else."
    )
    return [*(dict(m) for m in messages), {"role": "assistant", "content": echo}, {"role": "user", "content": request}]


def _ordered_keys(keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=lambda k: (len(k), k))


def _span(indices: Iterable[int]) -> str:
    ordered = sorted(indices)
    if not ordered:
        return "none"
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]} to {ordered[-1]}"
    return ", ".join(map(str, ordered))


def _json_kind(value: object) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")
