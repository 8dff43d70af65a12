"""brain in front of a chat model: which entity and conversation a chat request is, the messages the model
gets (brain's context as a system message, the client's own history trimmed), and the answer's text to record.

Nothing here speaks HTTP; :mod:`brain.shells.api.routes.proxy` does, over the operation layer's
``conversations.context`` and ``conversations.record``. The rules, and why:

* The entity is the caller's token's when it is bound to one; otherwise the ``X-Brain-Entity`` header or OpenAI's
  ``user`` field (both: they must agree). A bound caller naming another entity is refused by the operation layer,
  as on every route.
* The conversation is the ``X-Brain-Conversation`` header's, and always one of the acting entity's own: an id an
  entity names that is not already its own (recorded in its scope, being recorded for it, or an id the proxy gave
  it) is read as that entity's conversation of that name, ``<id>.<tag>`` (:func:`own_conversation_id`). So an id
  one entity sends never takes, blocks or tells of the same id of another, and a client sending a fixed id of
  its choosing stays in one conversation. Without it, a conversation of the same entity whose
  last recorded turns are the request's earlier user and assistant messages, word for word, continues (the most
  recent such; an exchange of the entity still being recorded is waited for first); with no earlier messages,
  or none matching, a new one starts. Its id is chosen here, before the model answers, so that the answer's
  head can carry it.
* The model gets the client's system messages, then brain's context, then the messages from the last user
  message on (a tool call's round trip included) as the client sent them. The earlier messages are the history:
  when brain's context holds the conversation's past (its recorded turns or summaries, within its budget), they
  are not sent twice; when it holds none, the newest of them that fit the context budget (RAG_CONTEXT_MAX_CHARS)
  are kept, from a user message on (so no tool result loses the call it answers).
* The exchange recorded is the last user message's text and the answer's text, once the whole answer is in,
  each cut to :data:`RECORDED_CHARS` with a marker saying so (a longer turn could not show in a prompt, and
  writing one holds up every other request to the store).
  An answer with no text (only tool calls) records nothing: the exchange is recorded with the answer that ends
  the round trip.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brain.model.errors import NotFound, ValidationError
from brain.model.ids import own_conversation_id
from brain.model.schemas.limits import MAX_TURN_CHARS
from brain.model.schemas.values import valid_conversation_id, valid_name
from brain.ops import Operations
from brain.ops.values import Layout, shown_value, user_content

if TYPE_CHECKING:
    from brain.ops.values import Context

ENTITY_HEADER = "X-Brain-Entity"
CONVERSATION_HEADER = "X-Brain-Conversation"
#: how many of an entity's most recent conversations a request without the header is matched against
MATCH_CANDIDATES = 20
#: the message roles that instruct the model rather than converse
SYSTEM_ROLES = ("system", "developer")
#: characters of each turn the proxy records (the user's message, the answer): the turn limit, less room for the
#: note that says a longer one was cut
RECORDED_CHARS = MAX_TURN_CHARS - 400

Message = dict[str, Any]


def message_text(message: Mapping[str, object]) -> str:
    """The text of a chat message: its content, or the text parts of a multi-part content (images left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def checked_messages(body: Mapping[str, object]) -> list[Message]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValidationError.of("messages", "messages must be a non-empty list of chat messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValidationError.of(f"messages.{i}", f"messages.{i} must be an object with a string 'role'")
    return messages


def previous_user_text(messages: Sequence[Message]) -> str | None:
    """The text of the user message before the last one, as the proxy recorded it: the exchange a client that
    resends its history continues."""
    before = [m for m in messages[: last_user_index(messages)] if m["role"] == "user" and message_text(m).strip()]
    return recorded_text(message_text(before[-1])) if before else None


def last_user_index(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user" and message_text(messages[i]).strip():
            return i
    raise ValidationError.of(
        "messages",
        "messages hold no user message with text: brain builds the model's context for the last user message",
    )


def requested_entity(header: str | None, user: object) -> str | None:
    """The entity a request names: the ``X-Brain-Entity`` header, or OpenAI's ``user`` field, in canonical form
    (an entity name's case and the spaces around it do not tell two entities apart); a name that is not an
    entity's is refused naming the field it came in."""
    if user is not None and not isinstance(user, str):
        raise ValidationError.of("user", f"user must be a string (the entity the request is for), got {user!r}")
    header = valid_name(header.strip(), ENTITY_HEADER) if header and header.strip() else None
    user = valid_name(user.strip(), "user") if user is not None else None
    if header is not None and user is not None and user != header:
        raise ValidationError.of(
            "user",
            f"the {ENTITY_HEADER} header ({header!r}) and the body's user ({user!r}) differ: send one, or the same",
        )
    return header if header is not None else user


def new_conversation_id(entity: str | None = None) -> str:
    """A new conversation's id; an entity's is of its own form, so that it is the entity's before it is recorded
    (another worker, a restart)."""
    new = f"conv-{uuid.uuid4()}"
    return new if entity is None else own_conversation_id(new, entity)


def header_conversation(header: str) -> str:
    try:
        return valid_conversation_id(header.strip())
    except ValidationError as exc:
        raise ValidationError.of(CONVERSATION_HEADER, f"{CONVERSATION_HEADER}: {exc}") from None


def is_own_conversation(ops: Operations, conversation_id: str, entity: str) -> bool:
    """Whether ``entity`` has recorded turns in ``conversation_id`` (reads the store)."""
    try:
        return bool(ops.conversations.turns(conversation_id, k=1, entity=entity))
    except NotFound:
        return False


def recorded_text(text: str) -> str:
    """``text`` as the proxy records it: at most :data:`RECORDED_CHARS` characters, then a marker."""
    if len(text) <= RECORDED_CHARS:
        return text
    return f"{text[:RECORDED_CHARS]}\n[brain recorded the first {RECORDED_CHARS:,} of {len(text):,} characters]"


def _exchanges(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """The user and assistant messages with text, as (role, text): what a recorded conversation holds."""
    pairs = []
    for message in messages:
        text = message_text(message)
        if message["role"] in ("user", "assistant") and text.strip():
            pairs.append((message["role"], recorded_text(text)))
    return pairs


@dataclass
class ChatPlan:
    """What one proxied request is: for whom, in which conversation, the text to record, the messages to send."""

    entity: str | None
    conversation_id: str
    user_text: str
    messages: list[Message]
    history_sent: int  # how many of the client's earlier messages go to the model (none when brain holds them)
    shown: str | None = None  # what the part sent with the message showed, recorded with the user's turn


def plan_chat(
    ops: Operations,
    messages: list[Message],
    *,
    entity: str | None,
    conversation_id: str | None,
    budget_chars: int,
) -> ChatPlan:
    """The request's conversation, context and messages for the model (see the module's rules). Blocking: it
    reads the store."""
    last = last_user_index(messages)
    earlier = messages[:last]
    if conversation_id is not None:
        conversation_id = valid_conversation_id(conversation_id)
    else:
        conversation_id = _matching_conversation(ops, _exchanges(earlier), entity) or new_conversation_id(entity)
    asked = message_text(messages[last])
    user_text = recorded_text(asked)
    context = ops.conversations.context(conversation_id, asked[:RECORDED_CHARS], entity=entity)
    layout = context.layout if context.layout is not None else Layout()
    system = [m for m in earlier if m["role"] in SYSTEM_ROLES]
    history = [m for m in earlier if m["role"] not in SYSTEM_ROLES]
    carried = bool(layout.conversation) or _carries_history(context)
    kept = [] if carried else _newest_fitting(history, budget_chars)
    stable = [{"role": "system", "content": layout.stable}] if layout.stable else []
    return ChatPlan(
        entity=entity,
        conversation_id=conversation_id,
        user_text=user_text,
        messages=[*system, *stable, *layout.conversation, *kept, _with_part(messages[last], layout.part)]
        + messages[last + 1 :],
        history_sent=len(kept),
        shown=shown_value(layout.shown) if layout.shown else None,
    )


def _with_part(message: Message, part: str) -> Message:
    """The last user message with the part chosen for it before its text (:func:`user_content`)."""
    if not part:
        return message
    content = message.get("content")
    if isinstance(content, list):  # a multi-part message: the part is a text part of its own, first
        return {**message, "content": [{"type": "text", "text": user_content(part, "")}, *content]}
    return {**message, "content": user_content(part, message_text(message))}


def _carries_history(context: Context) -> bool:
    """Whether brain's context holds the conversation's past: its turns or summaries, in the prompt or left out
    of it by the budget (the client's copy is then not sent beside it)."""
    if context.turn or context.summary:
        return True
    return any(d.get("section") in ("turn", "summary") for d in context.dropped)


def _matching_conversation(ops: Operations, history: list[tuple[str, str]], entity: str | None) -> str | None:
    if not history:
        return None
    for info in ops.conversations.list(entity=entity, limit=MATCH_CANDIDATES):
        if info.entity != entity or info.turns < len(history):
            continue
        turns = ops.conversations.turns(info.conversation_id, k=len(history), entity=entity)
        if [(t.metadata.get("role"), t.text) for t in turns] == history:
            return info.conversation_id
    return None


def _newest_fitting(history: list[Message], budget_chars: int) -> list[Message]:
    """The newest messages of ``history`` whose texts fit ``budget_chars``, starting at a user message."""
    used, start = 0, len(history)
    for i in range(len(history) - 1, -1, -1):
        used += len(message_text(history[i]))
        if used > budget_chars:
            break
        if history[i]["role"] == "user":
            start = i
    return history[start:]


# ---- the answer --------------------------------------------------------------------------------------


def completion_text(body: bytes) -> str | None:
    """The text of an OpenAI chat completion's first choice, or None (no text, or not a completion)."""
    try:
        data = json.loads(body)
        content = data["choices"][0]["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return content if isinstance(content, str) and content.strip() else None


@dataclass
class StreamedAnswer:
    """An OpenAI server-sent event stream read as it passes: the first choice's text so far, and whether the
    upstream said it was done (``data: [DONE]``)."""

    parts: list[str] = field(default_factory=list)
    done: bool = False
    _pending: bytes = b""

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
            for choice in event.get("choices") or ():
                content = (choice.get("delta") or {}).get("content")
                if choice.get("index", 0) == 0 and isinstance(content, str):
                    self.parts.append(content)
        except (ValueError, AttributeError, TypeError):
            return  # not an event of a completion: passed on, not read

    @property
    def text(self) -> str:
        return "".join(self.parts)


# ---- recording after the answer ----------------------------------------------------------------------


@dataclass
class _Pending:
    entity: str | None
    user_text: str
    event: asyncio.Event = field(default_factory=asyncio.Event)


class PendingRecords:
    """The exchanges still being recorded (after their answer went out), so that the next message of their
    conversation, or a resent history that ends with one, waits for it rather than being answered without it.
    A wait is only ever on the waiting entity's own exchanges (the admin's: any). One event loop's; a worker's
    own."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    def start(self, conversation_id: str, entity: str | None, user_text: str) -> _Pending:
        pending = self._pending[conversation_id] = _Pending(entity, user_text)
        return pending

    def finish(self, conversation_id: str, pending: _Pending) -> None:
        pending.event.set()
        if self._pending.get(conversation_id) is pending:
            del self._pending[conversation_id]

    def _visible(self, pending: _Pending, entity: str | None) -> bool:
        return entity is None or pending.entity == entity

    def is_pending(self, conversation_id: str, entity: str | None) -> bool:
        """Whether an exchange of ``entity``'s is being recorded in ``conversation_id``."""
        pending = self._pending.get(conversation_id)
        return pending is not None and self._visible(pending, entity)

    async def wait(self, conversation_id: str, entity: str | None, timeout: float) -> None:
        pending = self._pending.get(conversation_id)
        if pending is not None and self._visible(pending, entity):
            await self._until([pending], timeout)

    async def wait_for_message(self, user_text: str, entity: str | None, timeout: float) -> None:
        """Until ``entity``'s exchanges of the user message ``user_text`` are recorded: a client that resends
        its history at once finds its previous exchange."""
        found = [p for p in self._pending.values() if self._visible(p, entity) and p.user_text == user_text]
        await self._until(found, timeout)

    @staticmethod
    async def _until(found: list[_Pending], timeout: float) -> None:
        if not found:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*(p.event.wait() for p in found)), timeout)
        except TimeoutError:
            return  # answered without the exchange still being written, rather than not at all
