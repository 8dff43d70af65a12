"""brain in front of a chat model: which entity and conversation a chat request is, the messages the model
gets (brain's context as a system message, the client's own history trimmed), and the answer's text to record.

Nothing here speaks HTTP; :mod:`brain.shells.api.routes.proxy` does, over the operation layer's
``conversations.context`` and ``conversations.record``. The rules, and why:

* The entity is the caller's token's when it is bound to one; otherwise the ``X-Brain-Entity`` header or OpenAI's
  ``user`` field (both: they must agree). A bound caller naming another entity is refused by the operation layer,
  as on every route.
* The conversation is the ``X-Brain-Conversation`` header's. Without it, a conversation of the same entity whose
  last recorded turns are the request's earlier user and assistant messages, word for word, continues (the most
  recent such); with no earlier messages, or none matching, a new one starts. Its id is chosen here, before the
  model answers, so that the answer's head can carry it.
* The model gets the client's system messages, then brain's context, then the messages from the last user
  message on (a tool call's round trip included) as the client sent them. The earlier messages are the history:
  when brain's context holds the conversation's past (its recorded turns or summaries, within its budget), they
  are not sent twice; when it holds none, the newest of them that fit the context budget (RAG_CONTEXT_MAX_CHARS)
  are kept, from a user message on (so no tool result loses the call it answers).
* The exchange recorded is the last user message's text and the answer's text, once the whole answer is in.
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

from brain.model.errors import ValidationError
from brain.model.schemas.values import valid_conversation_id
from brain.ops import Operations

if TYPE_CHECKING:
    from brain.ops.values import Context

ENTITY_HEADER = "X-Brain-Entity"
CONVERSATION_HEADER = "X-Brain-Conversation"
#: how many of an entity's most recent conversations a request without the header is matched against
MATCH_CANDIDATES = 20
#: the message roles that instruct the model rather than converse
SYSTEM_ROLES = ("system", "developer")

Message = dict[str, Any]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat message: its content, or the text parts of a multi-part content (images left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def checked_messages(body: Mapping[str, Any]) -> list[Message]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValidationError.of("messages", "messages must be a non-empty list of chat messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValidationError.of(f"messages.{i}", f"messages.{i} must be an object with a string 'role'")
    return messages


def last_user_index(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user" and message_text(messages[i]).strip():
            return i
    raise ValidationError.of(
        "messages",
        "messages hold no user message with text: brain builds the model's context for the last user message",
    )


def requested_entity(header: str | None, user: Any) -> str | None:
    """The entity a request names: the ``X-Brain-Entity`` header, or OpenAI's ``user`` field."""
    if user is not None and not isinstance(user, str):
        raise ValidationError.of("user", f"user must be a string (the entity the request is for), got {user!r}")
    header = header.strip() if header and header.strip() else None
    if header is not None and user is not None and user != header:
        raise ValidationError.of(
            "user",
            f"the {ENTITY_HEADER} header ({header!r}) and the body's user ({user!r}) differ: send one, or the same",
        )
    return header if header is not None else user


def new_conversation_id() -> str:
    return f"conv-{uuid.uuid4()}"


def _exchanges(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """The user and assistant messages with text, as (role, text): what a recorded conversation holds."""
    pairs = []
    for message in messages:
        text = message_text(message)
        if message["role"] in ("user", "assistant") and text.strip():
            pairs.append((message["role"], text))
    return pairs


@dataclass
class ChatPlan:
    """What one proxied request is: for whom, in which conversation, the text to record, the messages to send."""

    entity: str | None
    conversation_id: str
    user_text: str
    messages: list[Message]
    history_sent: int  # how many of the client's earlier messages go to the model (none when brain holds them)


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
        conversation_id = _matching_conversation(ops, _exchanges(earlier), entity) or new_conversation_id()
    user_text = message_text(messages[last])
    context = ops.conversations.context(conversation_id, user_text, entity=entity)
    system = [m for m in earlier if m["role"] in SYSTEM_ROLES]
    history = [m for m in earlier if m["role"] not in SYSTEM_ROLES]
    kept = [] if _carries_history(context) else _newest_fitting(history, budget_chars)
    brain_message = [{"role": "system", "content": context.prompt}] if context.prompt else []
    return ChatPlan(
        entity=entity,
        conversation_id=conversation_id,
        user_text=user_text,
        messages=[*system, *brain_message, *kept, *messages[last:]],
        history_sent=len(kept),
    )


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


class PendingRecords:
    """The conversations whose last exchange is still being recorded (after its answer went out), so that their
    next message waits for it rather than being answered without it. One event loop's; a worker's own."""

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Event] = {}

    def start(self, conversation_id: str) -> asyncio.Event:
        event = self._pending[conversation_id] = asyncio.Event()
        return event

    def finish(self, conversation_id: str, event: asyncio.Event) -> None:
        event.set()
        if self._pending.get(conversation_id) is event:
            del self._pending[conversation_id]

    async def wait(self, conversation_id: str | None, timeout: float) -> None:
        event = self._pending.get(conversation_id) if conversation_id else None
        if event is not None:
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except TimeoutError:
                return  # answered without the exchange still being written, rather than not at all
