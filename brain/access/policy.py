"""Who may read and change what: the rules behind entity-bound API tokens, in one place.

A :class:`Caller` is the admin or is bound to one entity. Each request *acts as* an entity or
unrestricted: a bound caller always acts as its own entity (naming another is :class:`Forbidden`, so a
parameter can never widen it); the admin acts as the entity a request names, else unrestricted.

Acting as entity ``E``:

- **memories**: ``E`` reads global memories and its own (scope ``entity:E``) and creates, changes and
  deletes only its own. Another entity's memory does not exist for ``E`` (:class:`NotFound`); a global
  one can be read but not changed (:class:`Forbidden`).
- **conversations**: a conversation belongs to the scope its turns were written in. ``E`` sees only
  conversations whose turns are all in ``entity:E``; any other id (another entity's, a shared one, an
  unknown one) is :class:`NotFound` for every read, so a read never tells whether it exists. The
  context of a message is the exception that says the same thing another way: any other id gives the
  context of an empty conversation (persona, knowledge and memories, no turns or summaries), as a
  conversation not yet recorded does. New conversations ``E`` starts are written in ``entity:E``, and
  later exchanges stay in the scope the conversation started in.
- **documents of any type** (``/v1/docs``): unrestricted callers only.

Unrestricted (the admin naming no entity): every memory and conversation; searches and contexts rank
global memories only, as :meth:`RagStore.retrieve_memories` does without an entity.

:class:`Access` applies these rules to the store and the chat layer; the HTTP API calls nothing else
for memories and conversations. Which scopes an entity reads and changes is :mod:`brain.rules.memories`' rule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from brain.app.browse import ConversationInfo, list_conversations
from brain.features.chat import ChatMemory, Context, Exchange
from brain.features.chat.formation import FormationReport
from brain.model.errors import ConversationOwned, Forbidden, NotFound, Problem, ValidationError, joined
from brain.model.ids import tagged_for_another
from brain.model.results import Document, MemoryHit, Supersession
from brain.model.schemas import (
    CHAIN_KEYS,
    ENTITY_MAX_LENGTH,
    ENTITY_PATTERN,
    GLOBAL_SCOPE,
    RESERVED_KEYS,
    DocType,
    check_scope,
    entity_of,
    entity_scope,
    valid_conversation_id,
    valid_name,
)
from brain.rules.memories import global_refusal, may_change, may_read, may_use_conversation, readable_scopes
from brain.store import Store
from brain.store.memory_listing import list_memories

#: a point in time as the library takes it: ISO 8601 text, epoch seconds or a datetime
When = str | float | datetime

#: memory metadata keys a caller never sets through ``metadata``: the store's own keys, the fields that
#: decide who a memory belongs to, and the fields requests carry at their top level
#: (the store refuses the reserved ones too; this names the field before anything is read)
MEMORY_FIELD_KEYS = (
    RESERVED_KEYS
    | CHAIN_KEYS
    | frozenset(
        {
            "id",
            "text",
            "embedding",
            "ts_epoch",
            "importance",
            "tags",
            "entity",
            "scope",
            "conversation_id",
            "created_at",
            "last_used",
        }
    )
)


@dataclass(frozen=True)
class Caller:
    """Who is asking: the admin (``entity`` None) or a caller bound to one entity. ``bound_by`` names
    what binds it (an API token, an MCP server started with ``--entity``), for the messages."""

    entity: str | None = None
    bound_by: str = "token"

    @property
    def is_admin(self) -> bool:
        return self.entity is None

    def require_admin(self, what: str) -> None:
        """:class:`Forbidden` for ``what`` unless this is the admin (documents of any type, the store as a whole)."""
        if self.entity is not None:
            raise Forbidden(
                f"{what} needs the admin (the admin token, acting for no entity); a {self.bound_by} bound to "
                f"entity {self.entity!r} may not"
            )

    def acting_as(self, requested: str | None) -> str | None:
        """The entity a request acts as (None: unrestricted), given the entity it names."""
        if requested is not None:
            requested = valid_name(requested)  # canonical, as the bound name is: "Alice" is "alice"
        if self.entity is None:
            return requested
        if requested is None or requested == self.entity:
            return self.entity
        raise Forbidden(
            f"this {self.bound_by} is bound to entity {self.entity!r}; it cannot act for {requested!r} "
            "(leave entity out, or name its own)"
        )


ADMIN = Caller()


def refuse_field_keys(metadata: Mapping[str, object] | None, top_level: Iterable[str] = ()) -> None:
    """:class:`ValidationError` naming every key of ``metadata`` that is not free-form (see
    :data:`MEMORY_FIELD_KEYS`); ``top_level`` are the fields the request itself has."""
    clash = sorted(set(metadata or {}) & MEMORY_FIELD_KEYS)
    if not clash:
        return
    top = set(top_level)
    problems = [
        Problem(
            f"metadata.{key}",
            f"metadata.{key}: {key!r} is a field of its own; send it at the top level of the body"
            if key in top
            else f"metadata.{key}: {key!r} is set by brain and cannot be sent",
        )
        for key in clash
    ]
    raise ValidationError(joined(problems), problems)


def _no_conversation(conversation_id: str) -> NotFound:
    # the same answer for another entity's conversation and for none at all
    return NotFound(
        f"no conversation {conversation_id!r} (a new one starts with an exchange sent without conversation_id)"
    )


# conversation ids hashed onto these locks: checking who owns a conversation and appending to it is one step
_STRIPES = [threading.Lock() for _ in range(64)]


class Access:
    """The memory and conversation operations of one request, under the rules of this module.

    ``entity`` is the entity the request names (None: none named); ``caller`` decides whether it may.
    """

    def __init__(
        self,
        store: Store,
        chat: ChatMemory | Callable[[], ChatMemory],
        caller: Caller = ADMIN,
        entity: str | None = None,
    ):
        self.store = store
        # the chat layer starts a worker: a request that only reads memories never builds it
        self._chat = chat
        self.caller = caller
        self.entity = caller.acting_as(entity)

    @property
    def chat(self) -> ChatMemory:
        if not isinstance(self._chat, ChatMemory):
            self._chat = self._chat()
        return self._chat

    # ---- documents of any type ------------------------------------------------------------------
    def require_unrestricted(self, what: str) -> None:
        if self.entity is not None:
            who = (
                f"a {self.caller.bound_by} bound to entity {self.entity!r}"
                if not self.caller.is_admin
                else f"a request acting for entity {self.entity!r}"
            )
            raise Forbidden(f"{what} needs the admin token without an entity; {who} may not")

    # ---- memories -------------------------------------------------------------------------------
    def list_memories(
        self,
        *,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        importance: Sequence[int] = (),
        status: Sequence[str] = (),
        order: str = "stored",
        history: bool = False,
    ) -> list[Document]:
        """Memories the request may read (unrestricted: every memory), filtered and ordered as
        :func:`brain.store.memory_listing.list_memories` does: the current ones unless ``history``."""
        return list_memories(
            self.store,
            scopes=None if (readable := readable_scopes(self.entity)) is None else sorted(readable),
            tags=tags or (),
            importance=importance,
            status=status,
            order=order,
            limit=limit,
            offset=offset,
            history=history,
        )

    def search_memories(
        self, query: str, k: int | None = None, *, tags: Sequence[str] | None = None, as_of: When | None = None
    ) -> list[MemoryHit]:
        """Ranked memories: global ones and, acting as an entity, its own; with ``as_of``, those held true
        then (see :meth:`RagStore.retrieve_memories`)."""
        return self.store.retrieve_memories(query, k, entity=self.entity, tags=tags or None, as_of=as_of)

    def _memory(self, doc_id: str) -> Document:
        docs = self.store.get([doc_id], type=DocType.MEMORY)
        if not docs or not may_read(str(docs[0].metadata.get("scope", GLOBAL_SCOPE)), self.entity):
            raise NotFound(f"no memory with id {doc_id!r}")
        return docs[0]

    def _changeable(self, doc_id: str) -> Document:
        doc = self._memory(doc_id)
        if not may_change(str(doc.metadata.get("scope", GLOBAL_SCOPE)), self.entity):
            raise self._refused([doc_id])
        return doc

    def _refused(self, doc_ids: Sequence[str]) -> Forbidden:
        who = "a request acting for" if self.caller.is_admin else f"a {self.caller.bound_by} bound to"
        return Forbidden(global_refusal(doc_ids, str(self.entity), who))

    def get_memory(self, doc_id: str) -> Document:
        return self._memory(doc_id)

    def create_memory(
        self,
        text: str,
        *,
        scope: str | None = None,
        importance: int = 3,
        tags: Sequence[str] | None = None,
        conversation_id: str | None = None,
        timestamp: When | None = None,
        metadata: Mapping[str, object] | None = None,
        source: str = "system",
        expires_at: str | datetime | None = None,
    ) -> Document:
        """Store a memory in the acting entity's scope (unrestricted: ``scope``, default global)."""
        refuse_field_keys(metadata, ("text", "importance", "tags", "entity", "scope", "conversation_id", "timestamp"))
        if scope is not None:
            try:
                scope = check_scope(scope)
            except ValueError as exc:
                raise ValidationError.of("scope", str(exc)) from None
        if self.entity is not None:
            own = entity_scope(self.entity)
            if scope is not None and scope != own:
                if not self.caller.is_admin:
                    raise Forbidden(
                        f"a {self.caller.bound_by} bound to entity {self.entity!r} creates memories in scope {own!r} "
                        f"only, not {scope!r}"
                    )
                message = f"scope {scope!r} disagrees with entity {self.entity!r} (whose scope is {own!r}); send one"
                raise ValidationError.of("scope", message)
            scope = own
        entity = entity_of(scope or GLOBAL_SCOPE)
        doc_id = self.chat.remember(
            text,
            importance=importance,
            tags=tags,
            entity=entity,
            conversation_id=conversation_id,
            timestamp=timestamp,
            source=source,
            metadata=metadata,
            expires_at=expires_at,
        )
        return self.store.get_one(doc_id)

    def update_memory(
        self,
        doc_id: str,
        text: str | None = None,
        *,
        importance: int | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, object] | None = None,
        replace_metadata: bool = False,
        status: str | None = None,
    ) -> Document:
        """Change one memory the request may change (see :meth:`RagStore.update_memory`); ``status``
        retires it (``retracted``, ...) or brings it back (``active``)."""
        refuse_field_keys(metadata, ("text", "importance", "tags"))
        if status is not None:
            if metadata and "status" in metadata and metadata["status"] != status:
                raise ValidationError.of(
                    "status", f"status {status!r} disagrees with metadata.status {metadata['status']!r}; send one"
                )
            metadata = {**(metadata or {}), "status": status}
        self._changeable(doc_id)
        return self.store.update_memory(
            doc_id, text, importance=importance, tags=tags, metadata=metadata, replace_metadata=replace_metadata
        )

    def supersede_memory(
        self,
        doc_id: str,
        text: str,
        *,
        kind: str = "update",
        at: When | None = None,
        importance: int | None = None,
        tags: Sequence[str] | None = None,
        expires_at: str | datetime | None = None,
        conversation_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        source: str = "system",
    ) -> Supersession:
        """Replace a memory the request may change with ``text``, keeping it as history
        (:meth:`RagStore.supersede`): the new memory is in the old one's scope, never another entity's."""
        refuse_field_keys(metadata, ("text", "importance", "tags", "conversation_id"))
        self._changeable(doc_id)
        return self.store.supersede(
            doc_id,
            text,
            kind=kind,
            at=at,
            importance=importance,
            tags=tags,
            expires_at=expires_at,
            conversation_id=conversation_id,
            metadata=metadata,
            source=source,
            entity=self.entity,
        )

    def memory_history(self, doc_id: str) -> list[Document]:
        """The supersession chain of a memory the request may read, oldest first (:meth:`RagStore.history`)."""
        self._memory(doc_id)
        return self.store.history(doc_id, entity=self.entity)

    def delete_memory(self, doc_id: str) -> None:
        self.delete_memories([doc_id])

    def delete_memories(self, doc_ids: Sequence[str]) -> list[str]:
        """Delete memories the request may change, all or none: every id is checked before one is deleted."""
        doc_ids = list(dict.fromkeys(doc_ids))
        if not doc_ids:
            raise ValidationError.of("ids", "ids is empty: give the id of at least one memory")
        docs = [self._memory(doc_id) for doc_id in doc_ids]
        shared = [d.id for d in docs if not may_change(str(d.metadata.get("scope", GLOBAL_SCOPE)), self.entity)]
        if shared:  # every global id named at once, so that one retry without them succeeds
            raise self._refused(shared)
        if not self.store.delete(doc_ids, type=DocType.MEMORY):  # deleted by another request meanwhile
            raise NotFound(f"no memory with id {doc_ids[0]!r}")
        return doc_ids

    # ---- conversations --------------------------------------------------------------------------
    def _conversation_scopes(self, conversation_id: str) -> tuple[set[str], str | None]:
        """The scopes of a conversation's turns (of its summaries when it has no turns), and the scope it
        started in; empty and None for an unknown conversation."""
        docs = self.store.conversation_turns(conversation_id)  # in order, from the store's cache
        if not docs:
            docs = self.store.conversation_summaries(conversation_id)
        scopes = [str(d.metadata.get("scope", GLOBAL_SCOPE)) for d in docs]
        return set(scopes), (scopes[0] if scopes else None)

    def _conversation(self, conversation_id: str) -> tuple[str, str]:
        """(the checked id, the scope it started in), or :class:`NotFound` when it is not the caller's."""
        conversation_id = valid_conversation_id(conversation_id)
        scopes, first = self._conversation_scopes(conversation_id)
        if first is None or not may_use_conversation(scopes, self.entity):
            raise _no_conversation(conversation_id)
        return conversation_id, first

    def build_context(self, conversation_id: str | None, user_message: str) -> Context:
        """:meth:`ChatMemory.build_context` for the acting entity. A conversation not yet recorded is an
        empty one (a chat backend asks for the context of a conversation's first message before recording
        it), and so is every conversation that is not the acting entity's (the rule of this module)."""
        if conversation_id is not None:
            conversation_id = valid_conversation_id(conversation_id)
            scopes, _ = self._conversation_scopes(conversation_id)
            if not may_use_conversation(scopes, self.entity):
                context = self.chat.build_context(None, user_message, entity=self.entity)
                context.conversation_id = conversation_id  # the id asked for, as for one not yet recorded
                return context
        return self.chat.build_context(conversation_id, user_message, entity=self.entity)

    def record_exchange(
        self,
        conversation_id: str | None,
        user_text: str,
        assistant_text: str,
        *,
        timestamp: When | None = None,
        metadata: Mapping[str, object] | None = None,
        user_name: str | None = None,
        assistant_name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Exchange:
        """:meth:`ChatMemory.record_exchange` into a new conversation, or one of the caller's: its turns stay
        in the scope the conversation started in."""
        if conversation_id is None:
            return self.chat.record_exchange(
                None,
                user_text,
                assistant_text,
                entity=self.entity,
                timestamp=timestamp,
                metadata=metadata,
                user_name=user_name,
                assistant_name=assistant_name,
                idempotency_key=idempotency_key,
            )
        conversation_id = valid_conversation_id(conversation_id)
        with _STRIPES[hash(conversation_id) % len(_STRIPES)]:
            scopes, first = self._conversation_scopes(conversation_id)
            if first is None:
                if self.entity is not None and tagged_for_another(conversation_id, self.entity):
                    raise _no_conversation(conversation_id)  # another entity's own id: not to be taken first
                entity = self.entity  # a new conversation, under an id the caller chose
            elif may_use_conversation(scopes, self.entity):
                entity = entity_of(first)
            else:
                raise _no_conversation(conversation_id)
            try:
                return self.chat.record_exchange(
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
            except ConversationOwned:  # another scope claimed this id first (another process, meanwhile)
                raise _no_conversation(conversation_id) from None

    def extract_memories(self, conversation_id: str, *, again: bool = False) -> FormationReport:
        """Form memories now from one of the caller's conversations (:meth:`ChatMemory.extract_memories`):
        its pending and failed windows, and with ``again`` the done ones too. The memories are in the
        conversation's scope, so a caller forms memories only of a conversation it may use."""
        conversation_id, _ = self._conversation(conversation_id)
        return self.chat.extract_memories(conversation_id, again=again)

    def list_conversations(self, *, limit: int | None = None, offset: int = 0) -> list[ConversationInfo]:
        """The conversations the request may use, most recent activity first (see :mod:`brain.app.browse`)."""
        return list_conversations(self.store, acting=self.entity, limit=limit, offset=offset)

    def conversation_turns(self, conversation_id: str, k: int | None = None) -> tuple[str, list[Document]]:
        """(the id, its turns in order; the last ``k`` when given)."""
        conversation_id, _ = self._conversation(conversation_id)
        docs = self.store.conversation_turns(conversation_id, entity=self.entity)
        return conversation_id, (docs[-k:] if k is not None else docs)

    def conversation_summaries(self, conversation_id: str) -> tuple[str, list[Document]]:
        """(the id, its summaries in order)."""
        conversation_id, first = self._conversation(conversation_id)
        docs = self.store.conversation_summaries(conversation_id)
        if self.entity is not None:  # a summary written in another scope (e.g. through /v1/docs) stays hidden
            docs = [d for d in docs if d.metadata.get("scope", GLOBAL_SCOPE) == first]
        return conversation_id, docs


__all__ = [
    "ADMIN",
    "Access",
    "Caller",
    "ENTITY_MAX_LENGTH",
    "ENTITY_PATTERN",
    "MEMORY_FIELD_KEYS",
    "may_change",
    "may_read",
    "may_use_conversation",
    "refuse_field_keys",
]
