"""Opening brain: on the data directory itself when it is free, through ``brain serve`` when it holds it.

:func:`open_operations` gives a shell its :class:`~brain.ops.protocol.Operations`; :func:`open` gives a Python
caller an :class:`OpenBrain` (the store, the chat layer and the operations of one process) or, beside a running
server, a :class:`ServedBrain` whose ``chat`` and ``store`` answer the calls a chat backend makes
(``remember``, ``build_context``, ``record_exchange``, ``retrieve_memories``, ...) through the server. Both have
the operations by noun (``b.memories``, ``b.conversations``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.access.policy import ADMIN, Caller
from brain.app.core import Brain
from brain.app.core import open as open_brain
from brain.config import Settings, load_settings
from brain.model.errors import ConfigError, NotFound, StoreLocked
from brain.model.results import Document, Hit, MemoryHit, Supersession
from brain.ops.arguments import Metadata, When
from brain.ops.local import LocalOperations
from brain.ops.protocol import Operations
from brain.ops.served import ServedOperations

if TYPE_CHECKING:
    from brain.features.chat import Context, Exchange
    from brain.features.chat.formation import FormationReport


def _served(locked: StoreLocked, settings: Settings, caller: Caller = ADMIN) -> ServedOperations:
    """The operations of the server ``locked`` names, with the admin token of ``settings`` (``BRAIN_API_TOKEN``)."""
    token = settings.api_token.get_secret_value() if settings.api_token is not None else None
    return ServedOperations.beside(locked, token=token, data_dir=Path(settings.data_dir), caller=caller)


def open_operations(
    settings: Settings | None = None,
    *,
    caller: Caller = ADMIN,
    create: bool = True,
    start_worker: bool = False,
    through_server: bool = True,
) -> Operations:
    """The operations on the store ``settings`` name, for ``caller``: opened here, or, while a ``brain serve``
    holds the data directory, that server's (its admin token, ``BRAIN_API_TOKEN``, is sent with the caller,
    whose rules the server applies). ``start_worker``: the chat layer of a store opened here runs its summary
    worker (a long-running process: ``brain mcp``). ``through_server=False``: a server itself, which never
    goes through another one. Close what it gives."""
    settings = settings or load_settings()
    try:
        brain = open_brain(settings, create=create, start_worker=start_worker)
    except StoreLocked as locked:
        if locked.server_url is None or not through_server:
            raise
        return _served(locked, settings, caller)
    return LocalOperations(brain, caller, owns_brain=True)


class OpenBrain(Brain):
    """A :class:`~brain.app.core.Brain` with the operations by noun, for the admin: what :func:`open` gives
    when this process opens the store."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.ops = LocalOperations(self)
        self.memories = self.ops.memories
        self.conversations = self.ops.conversations
        self.knowledge = self.ops.knowledge
        self.documents = self.ops.documents
        self.entities = self.ops.entities
        self.maintenance = self.ops.maintenance


class ServedChat:
    """The chat layer's calls a chat backend makes, through the server (:class:`~brain.features.chat.ChatMemory`'s
    names and arguments)."""

    def __init__(self, ops: ServedOperations):
        self._ops = ops

    def remember(
        self,
        text: str,
        importance: int = 3,
        tags: Sequence[str] | None = None,
        entity: str | None = None,
        *,
        conversation_id: str | None = None,
        timestamp: When | None = None,
        metadata: Metadata | None = None,
        expires_at: str | datetime | None = None,
    ) -> str:
        return self._ops.memories.add(
            text,
            importance=importance,
            tags=tags,
            entity=entity,
            conversation_id=conversation_id,
            timestamp=timestamp,
            metadata=metadata,
            expires_at=expires_at,
        ).id

    def build_context(self, conversation_id: str | None, user_message: str, entity: str | None = None) -> Context:
        return self._ops.conversations.context(conversation_id, user_message, entity=entity)

    def record_exchange(
        self,
        conversation_id: str | None,
        user_text: str,
        assistant_text: str,
        entity: str | None = None,
        *,
        timestamp: When | None = None,
        metadata: Metadata | None = None,
        user_name: str | None = None,
        assistant_name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Exchange:
        return self._ops.conversations.record(
            conversation_id,
            user_text,
            assistant_text,
            entity=entity,
            timestamp=timestamp,
            metadata=metadata,
            user_name=user_name,
            assistant_name=assistant_name,
            idempotency_key=idempotency_key,
        )

    def extract_memories(self, conversation_id: str | None = None, *, again: bool = False) -> FormationReport:
        return self._ops.conversations.extract(conversation_id, again=again)


class ServedStore:
    """The store's reads and memory writes a script makes, through the server (:class:`~brain.rag_store.RagStore`'s
    names and arguments). What only the store itself can do is :class:`~brain.model.errors.StoreLocked`."""

    def __init__(self, ops: ServedOperations, settings: Settings):
        self._ops = ops
        self.settings = settings

    def retrieve_memories(
        self,
        query: str,
        k: int | None = None,
        *,
        entity: str | None = None,
        tags: Sequence[str] | None = None,
        as_of: When | None = None,
    ) -> list[MemoryHit]:
        return self._ops.memories.search(query, k=k, entity=entity, tags=tags, as_of=as_of)

    def upsert_memory(
        self,
        text: str,
        scope: str | None = None,
        importance: int = 3,
        tags: Sequence[str] | None = None,
        *,
        expires_at: str | datetime | None = None,
    ) -> str:
        return self._ops.memories.add(text, scope=scope, importance=importance, tags=tags, expires_at=expires_at).id

    def supersede(self, old_id: str, new_text: str, **fields: Any) -> Supersession:
        return self._ops.memories.supersede(old_id, new_text, **fields)

    def history(self, memory_id: str, *, entity: str | None = None) -> list[Document]:
        return self._ops.memories.history(memory_id, entity=entity)

    def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, object] | None = None,
        type: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        entity: str | None = None,
    ) -> list[Document]:
        wanted = [ids] if isinstance(ids, str) else ids
        return self._ops.documents.get(wanted, where=where, type=type, limit=limit, offset=offset, entity=entity)

    def get_one(self, doc_id: str) -> Document:
        docs = self.get([doc_id])
        if not docs:
            raise NotFound(f"no document with id {doc_id!r}")
        return docs[0]

    def search(
        self, query: str, k: int = 5, *, type: str | None = None, entity: str | None = None
    ) -> list[Hit | MemoryHit]:
        return self._ops.documents.search(query, type=type, k=k, entity=entity)

    def recent_turns(self, conversation_id: str, k: int | None = None, *, entity: str | None = None) -> list[Document]:
        try:
            return self._ops.conversations.turns(conversation_id, k=k, entity=entity)
        except NotFound:  # the admin sees every conversation: not found is none recorded
            return []

    def stats(self) -> dict[str, object]:
        return self._ops.maintenance.stats()

    def __getattr__(self, name: str) -> Any:
        raise self._ops.link.needs_the_store(
            f"RagStore.{name}", "a script beside the server reaches it through the operations: b.memories, ..."
        )


class ServedBrain:
    """What :func:`open` gives beside a running ``brain serve``: the operations by noun, and ``chat`` and
    ``store`` answering a chat backend's calls, all through the server. Close it."""

    def __init__(self, ops: ServedOperations, settings: Settings):
        self.settings = settings
        self.ops = ops
        self.memories = ops.memories
        self.conversations = ops.conversations
        self.knowledge = ops.knowledge
        self.documents = ops.documents
        self.entities = ops.entities
        self.maintenance = ops.maintenance
        self.chat = ServedChat(ops)
        self.store = ServedStore(ops, settings)

    def close(self) -> None:
        self.ops.close()

    def __enter__(self) -> ServedBrain:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open(
    settings: Settings | None = None,
    *,
    create: bool = True,
    start_worker: bool = True,
    **overrides: Any,
) -> OpenBrain | ServedBrain:
    """Open brain for a Python caller (close it, or use ``with``): an :class:`OpenBrain` on the store, or,
    while ``brain serve`` holds the data directory, a :class:`ServedBrain` through it.

    ``settings`` default to :func:`~brain.config.load_settings` with ``overrides`` (Settings fields by name, e.g.
    ``data_dir=...``; a provider given by object: ``embedder=``, ``summarizer=``, ``extractor=``).
    ``create=False`` raises :class:`~brain.model.errors.StoreNotFound` instead of creating a store.
    ``start_worker=False``: the chat layer starts no summary thread."""
    providers = {key: overrides.pop(key) for key in ("embedder", "summarizer", "extractor") if key in overrides}
    if settings is None:
        settings = load_settings(**overrides)
    elif overrides:
        raise ConfigError(
            f"brain.open: give settings or Settings fields ({', '.join(sorted(overrides))}), not both; "
            "Settings(...) takes the fields"
        )
    try:
        opened = open_brain(settings, create=create, start_worker=start_worker, brain_type=OpenBrain, **providers)
    except StoreLocked as locked:
        if locked.server_url is None or providers:
            raise
        return ServedBrain(_served(locked, settings), settings)
    assert isinstance(opened, OpenBrain)
    return opened


__all__ = ["OpenBrain", "ServedBrain", "ServedChat", "ServedStore", "open", "open_operations"]
