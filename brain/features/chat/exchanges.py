"""One exchange as :meth:`ChatMemory.record_exchange <brain.features.chat.ChatMemory.record_exchange>` takes
it: the checks made before anything is written, the ids an idempotency key derives, and the answer of an
exchange a retry sends again."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from brain.model.errors import Problem, ValidationError
from brain.model.ids import check_idempotency_key, derived_id
from brain.model.schemas import turn_text_problem, valid_conversation_id

if TYPE_CHECKING:
    from brain.store import Store

#: the fields record_exchange sets itself, which its ``metadata`` may not
_TURN_KEYS = frozenset(
    {
        "text",
        "type",
        "id",
        "embedding",
        "role",
        "conversation_id",
        "turn_index",
        "timestamp",
        "ts_epoch",
        "source",
        "scope",
        "speaker",
    }
)


def new_conversation_id() -> str:
    return f"conv-{uuid.uuid4()}"


def idempotent_turn_id(key: str, scope: str, role: str) -> str:
    """The id of the ``role`` turn of the exchange sent with ``key`` in ``scope`` (the same in every process)."""
    return derived_id("exchange", scope, key, role)


def idempotent_conversation_id(key: str, scope: str) -> str:
    """The id of the conversation an exchange sent with ``key`` (and no conversation id) starts."""
    return "conv-" + derived_id("conversation", scope, key).removeprefix("doc-")


@dataclass
class Exchange:
    """What :meth:`ChatMemory.record_exchange` stored; ``summaries_scheduled`` lists the turn ranges
    queued for summarising because of this exchange (e.g. ``["1-10"]``). The id and index of a side
    the exchange did not have (``user_text`` or ``assistant_text`` None) are None."""

    conversation_id: str
    user_turn_id: str | None
    assistant_turn_id: str | None
    user_turn_index: int | None
    assistant_turn_index: int | None
    summaries_scheduled: list[str] = field(default_factory=list)
    replayed: bool = False  # an earlier call with its idempotency key stored it: nothing was written now

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def check_conversation(value: object) -> str | None:
    """A conversation id, or None (none given)."""
    return None if value is None else valid_conversation_id(value)


def checked_exchange(
    user_text: str | None,
    assistant_text: str | None,
    idempotency_key: str | None,
    conversation_id: str | None,
    metadata: Mapping[str, object] | None,
) -> tuple[str | None, str | None, dict[str, Any]]:
    """The key, the conversation id and the turns' extra metadata of an exchange; raises
    :class:`ValidationError` naming the first problem, before anything is written."""
    for name, text in (("user_text", user_text), ("assistant_text", assistant_text)):
        if text is not None and (not isinstance(text, str) or not text.strip()):  # the store would say "item 0"
            raise ValidationError.of(name, f"{name} must be a non-empty string, got {text!r} (nothing was written)")
        if text is not None and (too_long := turn_text_problem(name, text)):
            raise ValidationError.of(name, too_long)
    key = None if idempotency_key is None else check_idempotency_key(idempotency_key)
    conversation_id = check_conversation(conversation_id)
    if user_text is None and assistant_text is None:
        raise ValidationError(
            "an exchange needs user_text, assistant_text or both; both are None",
            [Problem("user_text", "missing"), Problem("assistant_text", "missing")],
        )
    extra = dict(metadata or {})
    clashing = sorted(k for k in extra if k in _TURN_KEYS)
    if clashing:
        raise ValidationError(
            f"metadata may not set {clashing}: record_exchange sets them itself"
            + (" (give user_name / assistant_name for speaker)" if "speaker" in clashing else ""),
            [Problem(f"metadata.{k}", "reserved") for k in clashing],
        )
    return key, conversation_id, extra


def replayed_exchange(
    store: Store,
    key: str,
    scope: str,
    conversation_id: str | None,
    turns: list[tuple[str, str, str | None]],
    summary_every_n: int,
) -> Exchange | None:
    """The answer of the exchange first stored under ``key`` in ``scope``, or None when there is none;
    :class:`ValidationError` when ``turns`` are not that exchange."""
    wanted = {role: idempotent_turn_id(key, scope, role) for role in ("user", "assistant")}
    stored = {d.metadata.get("role"): d for d in store.get(list(wanted.values()))}
    if not stored:
        return None
    sent = {role: text for role, text, _ in turns}
    first = next(iter(stored.values())).metadata.get("conversation_id")
    if (
        set(stored) != set(sent)
        or any(stored[r].text != sent[r] for r in sent)
        or (conversation_id is not None and conversation_id != first)
    ):
        raise ValidationError.of(
            "idempotency_key",
            (
                f"idempotency key {key!r} was used for another exchange (other texts or another conversation); "
                f"a retry sends the same exchange again, a new exchange needs a new key (nothing was written)"
            ),
        )
    positions = {r: int(d.metadata["turn_index"]) for r, d in stored.items()}
    window = 2 * summary_every_n
    low, high = min(positions.values()), max(positions.values())
    # the windows this exchange completed, as its first answer listed them (windows are aligned)
    scheduled = [f"{end - window + 1}-{end}" for end in range(low, high + 1) if end % window == 0]
    return Exchange(
        str(first),
        stored["user"].id if "user" in stored else None,
        stored["assistant"].id if "assistant" in stored else None,
        positions.get("user"),
        positions.get("assistant"),
        scheduled,
        replayed=True,
    )
