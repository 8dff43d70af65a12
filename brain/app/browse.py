"""Read-only views over the store for people looking inside it (the memory browser, ``/v1/...`` reads):
the conversations by last activity, the knowledge base by file and topic, the current persona by section.

Each is a plain function of the store; who may see which conversation is :mod:`brain.access.policy`'s rule,
applied here through :func:`~brain.rules.memories.may_use_conversation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.features.persona import current_persona
from brain.model.schemas import FORMATION_STATES, GLOBAL_SCOPE, DocType, entity_of, format_timestamp
from brain.rules.memories import may_use_conversation

if TYPE_CHECKING:
    from brain.store import Store


# ---- conversations --------------------------------------------------------------------------------


@dataclass
class ConversationInfo:
    """One conversation: whose it is (the entity of the scope it started in; None for global), how many
    turns and summaries it has, its latest turn's or summary's time, and its memory-formation batches
    by state (``{"pending": n, "failed": n, "done": n}``, read from its summaries)."""

    conversation_id: str
    entity: str | None
    turns: int
    summaries: int
    last_activity: datetime
    formation: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FORMATION_STATES, 0))

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "last_activity": format_timestamp(self.last_activity)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConversationInfo:
        """The inverse of :meth:`to_dict` (a served listing)."""
        return cls(
            str(data["conversation_id"]),
            data.get("entity"),
            int(data["turns"]),
            int(data["summaries"]),
            datetime.fromisoformat(str(data["last_activity"]).replace("Z", "+00:00")),
            dict(data.get("formation") or {}),
        )


@dataclass
class _Seen:
    turn_scopes: set[str] = field(default_factory=set)
    summary_scopes: set[str] = field(default_factory=set)
    first: tuple[int, float, str] | None = None  # (turn index, time, scope) of the earliest turn
    turns: int = 0
    summaries: int = 0
    latest: float = 0.0
    formation: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FORMATION_STATES, 0))


def list_conversations(
    store: Store, *, acting: str | None = None, limit: int | None = None, offset: int = 0
) -> list[ConversationInfo]:
    """Conversations, most recent activity first (then by id), that a request acting as ``acting``
    may use (None: every one). One pass over the turns' and summaries' metadata (which also carry the
    formation state of each summary's window); no text is read."""
    seen: dict[str, _Seen] = {}
    where = {"type": {"$in": [DocType.TURN.value, DocType.SUMMARY.value]}}
    for page in store.chroma.pages(where, ["metadatas"]):
        for meta in page["metadatas"]:
            conversation = (meta or {}).get("conversation_id")
            if not isinstance(conversation, str):
                continue
            scope = str(meta.get("scope") or GLOBAL_SCOPE)
            at = float(meta.get("ts_epoch") or 0.0)
            entry = seen.setdefault(conversation, _Seen())
            entry.latest = max(entry.latest, at)
            if meta.get("type") == DocType.TURN.value:
                entry.turns += 1
                entry.turn_scopes.add(scope)
                turn = (int(meta.get("turn_index") or 0), at, scope)
                entry.first = turn if entry.first is None else min(entry.first, turn)
            else:
                entry.summaries += 1
                entry.summary_scopes.add(scope)
                state = meta.get("formation")
                if state in entry.formation:
                    entry.formation[state] += 1
    infos = []
    for conversation, entry in seen.items():
        # as brain.access.policy decides it: a conversation belongs to its turns' scopes (its summaries' without turns)
        scopes = entry.turn_scopes or entry.summary_scopes
        if not may_use_conversation(scopes, acting):
            continue
        started = entry.first[2] if entry.first is not None else min(scopes)
        infos.append(
            ConversationInfo(
                conversation,
                entity_of(started),
                entry.turns,
                entry.summaries,
                datetime.fromtimestamp(entry.latest, UTC),
                entry.formation,
            )
        )
    infos.sort(key=lambda c: (-c.last_activity.timestamp(), c.conversation_id))
    return infos[offset:] if limit is None else infos[offset : offset + limit]


# ---- the knowledge base ---------------------------------------------------------------------------


def knowledge_by_file(store: Store, *, acting: str | None = None) -> list[dict[str, object]]:
    """The FAQ documents a request acting as ``acting`` may read (its own and global ones; None: every
    one) as ``[{"kb_file", "topics": [{"topic", "documents": [doc dict]}]}]``: files by
    name (documents written without a file last, as ``kb_file`` None), topics by name (untitled last),
    documents in their file's order (``kb_part``, then id)."""
    files: dict[str | None, dict[str | None, list[Any]]] = {}
    for doc in store.get(type=DocType.FAQ, entity=acting):
        meta = doc.metadata
        files.setdefault(meta.get("kb_file"), {}).setdefault(meta.get("topic"), []).append(doc)

    def named_last(name: str | None) -> tuple[bool, str]:
        return (name is None, name or "")

    return [
        {
            "kb_file": kb_file,
            "topics": [
                {
                    "topic": topic,
                    "documents": [
                        d.to_dict() for d in sorted(docs, key=lambda d: (int(d.metadata.get("kb_part") or 0), d.id))
                    ],
                }
                for topic, docs in sorted(topics.items(), key=lambda item: named_last(item[0]))
            ],
        }
        for kb_file, topics in sorted(files.items(), key=lambda item: named_last(item[0]))
    ]


# ---- the persona ----------------------------------------------------------------------------------


def persona_sections(store: Store, *, acting: str | None = None) -> dict[str, Any]:
    """The current persona version as ``acting`` sees it (see :func:`brain.features.persona.current_persona`):
    ``{"version", "source", "sections": [{"title", "text", "topic",
    "position", "id"}]}`` in file order. ``version`` is None when no persona is stored; ``source`` is
    ``BRAIN_PERSONA_PATH`` when that file exists (it is what ``brain persona`` loads), else None."""
    docs = current_persona(store, acting)
    path = Path(store.settings.persona_path)
    return {
        "version": docs[0].metadata.get("version") if docs else None,
        "source": str(path) if path.is_file() else None,
        "sections": [
            {
                "id": d.id,
                "title": d.metadata.get("heading") or d.metadata.get("topic") or "",
                "heading": d.metadata.get("heading"),
                "topic": d.metadata.get("topic"),
                "position": d.metadata.get("position"),
                "text": d.text,
            }
            for d in docs
        ],
    }


__all__ = ["ConversationInfo", "knowledge_by_file", "list_conversations", "persona_sections"]
