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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from brain.model.errors import Forbidden, NotFound, Problem, ValidationError, joined
from brain.model.ids import tagged_for_another
from brain.model.results import Document
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


def no_conversation(conversation_id: str) -> NotFound:
    """The answer for a conversation that is not the caller's: the same as for none at all."""
    return NotFound(
        f"no conversation {conversation_id!r} (a new one starts with an exchange sent without conversation_id)"
    )


# conversation ids hashed onto these locks: checking who owns a conversation and appending to it is one step
_STRIPES = [threading.Lock() for _ in range(64)]


def conversation_lock(conversation_id: str) -> threading.Lock:
    """The lock under which a conversation's owner is checked and an exchange appended to it."""
    return _STRIPES[hash(conversation_id) % len(_STRIPES)]


class Access:
    """The rules of this module for one call: ``entity`` is the entity it acts for (the one the call names,
    as ``caller`` may; None: unrestricted), and each check reads what it needs of ``store``. The operations
    (:mod:`brain.ops.local`) apply them before they call the library."""

    def __init__(self, store: Store, caller: Caller = ADMIN, entity: str | None = None):
        self.store = store
        self.caller = caller
        self.entity = caller.acting_as(entity)

    def require_unrestricted(self, what: str) -> None:
        if self.entity is not None:
            who = (
                f"a {self.caller.bound_by} bound to entity {self.entity!r}"
                if not self.caller.is_admin
                else f"a request acting for entity {self.entity!r}"
            )
            raise Forbidden(f"{what} needs the admin token without an entity; {who} may not")

    # ---- memories -------------------------------------------------------------------------------
    def readable_scopes(self) -> list[str] | None:
        """The scopes a listing acting for the entity reads, sorted (None: every scope)."""
        readable = readable_scopes(self.entity)
        return None if readable is None else sorted(readable)

    def memory(self, doc_id: str) -> Document:
        """The memory ``doc_id`` if the call may read it, else :class:`NotFound` (as for none at all)."""
        docs = self.store.get([doc_id], type=DocType.MEMORY)
        if not docs or not may_read(str(docs[0].metadata.get("scope", GLOBAL_SCOPE)), self.entity):
            raise NotFound(f"no memory with id {doc_id!r}")
        return docs[0]

    def changeable(self, doc_id: str) -> Document:
        """The memory ``doc_id`` if the call may change it: :class:`NotFound` or :class:`Forbidden` else."""
        doc = self.memory(doc_id)
        if not may_change(str(doc.metadata.get("scope", GLOBAL_SCOPE)), self.entity):
            raise self.refused([doc_id])
        return doc

    def deletable(self, doc_ids: Sequence[str]) -> list[str]:
        """``doc_ids`` (each once) if the call may delete every one of them; checked before one is deleted."""
        doc_ids = list(dict.fromkeys(doc_ids))
        if not doc_ids:
            raise ValidationError.of("ids", "ids is empty: give the id of at least one memory")
        docs = [self.memory(doc_id) for doc_id in doc_ids]
        shared = [d.id for d in docs if not may_change(str(d.metadata.get("scope", GLOBAL_SCOPE)), self.entity)]
        if shared:  # every global id named at once, so that one retry without them succeeds
            raise self.refused(shared)
        return doc_ids

    def refused(self, doc_ids: Sequence[str]) -> Forbidden:
        who = "a request acting for" if self.caller.is_admin else f"a {self.caller.bound_by} bound to"
        return Forbidden(global_refusal(doc_ids, str(self.entity), who))

    def new_memory_scope(self, scope: str | None) -> str:
        """The scope a new memory goes to: the acting entity's (a ``scope`` naming another is refused), or,
        unrestricted, ``scope`` (default global)."""
        if scope is not None:
            try:
                scope = check_scope(scope)
            except ValueError as exc:
                raise ValidationError.of("scope", str(exc)) from None
        if self.entity is None:
            return scope or GLOBAL_SCOPE
        own = entity_scope(self.entity)
        if scope is not None and scope != own:
            if not self.caller.is_admin:
                raise Forbidden(
                    f"a {self.caller.bound_by} bound to entity {self.entity!r} creates memories in scope {own!r} "
                    f"only, not {scope!r}"
                )
            message = f"scope {scope!r} disagrees with entity {self.entity!r} (whose scope is {own!r}); send one"
            raise ValidationError.of("scope", message)
        return own

    # ---- conversations --------------------------------------------------------------------------
    def conversation_scopes(self, conversation_id: str) -> tuple[set[str], str | None]:
        """The scopes of a conversation's turns (of its summaries when it has no turns), and the scope it
        started in; empty and None for an unknown conversation."""
        docs = self.store.conversation_turns(conversation_id)  # in order, from the store's cache
        if not docs:
            docs = self.store.conversation_summaries(conversation_id)
        scopes = [str(d.metadata.get("scope", GLOBAL_SCOPE)) for d in docs]
        return set(scopes), (scopes[0] if scopes else None)

    def may_use(self, conversation_id: str) -> bool:
        """Whether the conversation (an id already checked) is one the call may read: an unknown one is not."""
        scopes, _ = self.conversation_scopes(conversation_id)
        return may_use_conversation(scopes, self.entity)

    def conversation(self, conversation_id: str) -> tuple[str, str]:
        """(the checked id, the scope it started in), or :class:`NotFound` when it is not the caller's."""
        conversation_id = valid_conversation_id(conversation_id)
        scopes, first = self.conversation_scopes(conversation_id)
        if first is None or not may_use_conversation(scopes, self.entity):
            raise no_conversation(conversation_id)
        return conversation_id, first

    def exchange_entity(self, conversation_id: str) -> str | None:
        """The entity an exchange appended to ``conversation_id`` (checked) is recorded for: the scope the
        conversation started in, or, for one not yet recorded, the acting entity (an id another entity's own
        ids are tagged with is refused). :class:`NotFound` when it is not the caller's. Call it holding
        :func:`conversation_lock`."""
        scopes, first = self.conversation_scopes(conversation_id)
        if first is None:
            if self.entity is not None and tagged_for_another(conversation_id, self.entity):
                raise no_conversation(conversation_id)  # another entity's own id: not to be taken first
            return self.entity  # a new conversation, under an id the caller chose
        if may_use_conversation(scopes, self.entity):
            return entity_of(first)
        raise no_conversation(conversation_id)


__all__ = [
    "ADMIN",
    "Access",
    "Caller",
    "conversation_lock",
    "no_conversation",
    "ENTITY_MAX_LENGTH",
    "ENTITY_PATTERN",
    "MEMORY_FIELD_KEYS",
    "may_change",
    "may_read",
    "may_use_conversation",
    "refuse_field_keys",
]
