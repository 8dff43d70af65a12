"""The operations on a store this process opened: each one a call into the library under the caller's rules.

What a caller may read and change is :mod:`brain.access.policy`'s to decide (one :class:`Access` per call, acting
for the entity the call names); what the admin alone may do (documents of any type, the store as a whole) is
refused here for a bound caller before anything runs.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from brain.access.policy import ADMIN, Access, Caller, conversation_lock, no_conversation, refuse_field_keys
from brain.model.errors import ConversationOwned, NotFound, ValidationError
from brain.model.results import Document, Hit, MemoryHit, Supersession
from brain.model.schemas import GLOBAL_SCOPE, DocType, entity_of, valid_conversation_id
from brain.ops.arguments import JsonReport, Metadata, When
from brain.ops.calls import operation
from brain.store.memory_listing import count_memories, list_memories

if TYPE_CHECKING:
    from brain.app.browse import ConversationInfo
    from brain.app.core import Brain
    from brain.app.forget import ForgetReport
    from brain.features.chat import Context, Exchange
    from brain.features.chat.formation import FormationReport
    from brain.features.consolidate import ConsolidationReport
    from brain.features.mirror.protocol import BackfillReport
    from brain.features.mirror.sync import SyncReport, VerifyReport
    from brain.features.pam.reports import ExportReport, ImportReport
    from brain.features.persona import PersonaLoad
    from brain.features.specialists import Specialist, SpecialistMatch


class _Part:
    """One noun of the operations: the Brain and the caller they share."""

    def __init__(self, ops: LocalOperations):
        self._ops = ops
        self._brain = ops.brain

    def _access(self, entity: str | None) -> Access:
        return Access(self._brain.store, self._ops.caller, entity)

    def _admin(self, what: str) -> None:
        self._ops.caller.require_admin(what)


class LocalMemories(_Part):
    @operation
    def add(
        self,
        text: str,
        *,
        entity: str | None = None,
        scope: str | None = None,
        importance: int = 3,
        tags: Sequence[str] | None = None,
        conversation_id: str | None = None,
        timestamp: When | None = None,
        metadata: Metadata | None = None,
        expires_at: str | datetime | None = None,
        source: str = "system",
    ) -> Document:
        """Store a memory in the acting entity's scope (unrestricted: ``scope``, default global)."""
        refuse_field_keys(metadata, ("text", "importance", "tags", "entity", "scope", "conversation_id", "timestamp"))
        scope = self._access(entity).new_memory_scope(scope)
        doc_id = self._brain.chat.remember(
            text,
            importance=importance,
            tags=tags,
            entity=entity_of(scope),
            conversation_id=conversation_id,
            timestamp=timestamp,
            source=source,
            metadata=metadata,
            expires_at=expires_at,
        )
        return self._brain.store.get_one(doc_id)

    @operation
    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        entity: str | None = None,
        tags: Sequence[str] | None = None,
        as_of: When | None = None,
    ) -> builtins.list[MemoryHit]:
        """Ranked memories: global ones and, acting as an entity, its own; with ``as_of``, those held true
        then (see :meth:`RagStore.retrieve_memories`)."""
        acting = self._access(entity).entity
        return self._brain.store.retrieve_memories(query, k, entity=acting, tags=tags or None, as_of=as_of)

    @operation
    def get(self, memory_id: str, *, entity: str | None = None) -> Document:
        return self._access(entity).memory(memory_id)

    @operation
    def list(
        self,
        *,
        entity: str | None = None,
        scope: str | None = None,
        tags: Sequence[str] | None = None,
        importance: Sequence[int] = (),
        status: Sequence[str] = (),
        order: str = "stored",
        limit: int | None = None,
        offset: int | None = None,
        history: bool = False,
    ) -> builtins.list[Document]:
        return list_memories(
            self._brain.store,
            scopes=self._listed_scopes(entity, scope),
            tags=tags or (),
            importance=importance,
            status=status,
            order=order,
            limit=limit,
            offset=offset,
            history=history,
        )

    @operation
    def count(
        self,
        *,
        entity: str | None = None,
        scope: str | None = None,
        tags: Sequence[str] | None = None,
        importance: Sequence[int] = (),
        status: Sequence[str] = (),
        history: bool = False,
    ) -> int:
        """How many memories :meth:`list` would list with these filters, every page together."""
        return count_memories(
            self._brain.store,
            scopes=self._listed_scopes(entity, scope),
            tags=tags or (),
            importance=importance,
            status=status,
            history=history,
        )

    def _listed_scopes(self, entity: str | None, scope: str | None) -> builtins.list[str] | None:
        """The scopes a listing acting for ``entity`` reads (None: every scope), narrowed to ``scope``."""
        access = self._access(entity)
        scopes = access.readable_scopes()
        if scope is None:
            return scopes
        if scopes is not None and scope not in scopes:
            raise ValidationError.of(
                "scope", f"scope {scope!r} is not one entity {access.entity!r} reads; give one of {scopes}"
            )
        return [scope]

    @operation
    def update(
        self,
        memory_id: str,
        text: str | None = None,
        *,
        entity: str | None = None,
        importance: int | None = None,
        tags: Sequence[str] | None = None,
        metadata: Metadata | None = None,
        replace_metadata: bool = False,
        status: str | None = None,
    ) -> Document:
        """Change one memory the caller may change (see :meth:`RagStore.update_memory`); ``status`` retires it
        (``retracted``, ...) or brings it back (``active``)."""
        refuse_field_keys(metadata, ("text", "importance", "tags"))
        if status is not None:
            if metadata and "status" in metadata and metadata["status"] != status:
                raise ValidationError.of(
                    "status", f"status {status!r} disagrees with metadata.status {metadata['status']!r}; send one"
                )
            metadata = {**(metadata or {}), "status": status}
        self._access(entity).changeable(memory_id)
        return self._brain.store.update_memory(
            memory_id, text, importance=importance, tags=tags, metadata=metadata, replace_metadata=replace_metadata
        )

    @operation
    def supersede(
        self,
        memory_id: str,
        text: str,
        *,
        entity: str | None = None,
        kind: str = "update",
        at: When | None = None,
        importance: int | None = None,
        tags: Sequence[str] | None = None,
        expires_at: str | datetime | None = None,
        conversation_id: str | None = None,
        metadata: Metadata | None = None,
        source: str = "system",
    ) -> Supersession:
        """Replace a memory the caller may change with ``text``, keeping it as history (:meth:`RagStore.supersede`):
        the new memory is in the old one's scope, never another entity's."""
        refuse_field_keys(metadata, ("text", "importance", "tags", "conversation_id"))
        access = self._access(entity)
        access.changeable(memory_id)
        return self._brain.store.supersede(
            memory_id,
            text,
            kind=kind,
            at=at,
            importance=importance,
            tags=tags,
            expires_at=expires_at,
            conversation_id=conversation_id,
            metadata=metadata,
            source=source,
            entity=access.entity,
        )

    @operation
    def history(self, memory_id: str, *, entity: str | None = None) -> builtins.list[Document]:
        """The supersession chain of a memory the caller may read, oldest first (:meth:`RagStore.history`)."""
        access = self._access(entity)
        access.memory(memory_id)
        return self._brain.store.history(memory_id, entity=access.entity)

    @operation
    def delete(self, memory_ids: Sequence[str], *, entity: str | None = None) -> builtins.list[str]:
        """Delete memories the caller may change, all or none: every id is checked before one is deleted."""
        ids = self._access(entity).deletable(memory_ids)
        if not self._brain.store.delete(ids, type=DocType.MEMORY):  # deleted by another request meanwhile
            raise NotFound(f"no memory with id {ids[0]!r}")
        return ids


class LocalConversations(_Part):
    @operation
    def context(self, conversation_id: str | None, message: str, *, entity: str | None = None) -> Context:
        """:meth:`ChatMemory.build_context` for the acting entity. A conversation not yet recorded is an empty one
        (a chat backend asks for the context of a conversation's first message before recording it), and so is
        every conversation that is not the acting entity's."""
        access = self._access(entity)
        chat = self._brain.chat
        if conversation_id is not None:
            conversation_id = valid_conversation_id(conversation_id)
            if not access.may_use(conversation_id):
                context = chat.build_context(None, message, entity=access.entity)
                context.conversation_id = conversation_id  # the id asked for, as for one not yet recorded
                return context
        return chat.build_context(conversation_id, message, entity=access.entity)

    @operation
    def record(
        self,
        conversation_id: str | None,
        user_text: str,
        assistant_text: str,
        *,
        entity: str | None = None,
        timestamp: When | None = None,
        metadata: Metadata | None = None,
        user_name: str | None = None,
        assistant_name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Exchange:
        """:meth:`ChatMemory.record_exchange` into a new conversation, or one of the caller's: its turns stay in the
        scope the conversation started in."""
        access = self._access(entity)

        def record(conversation: str | None, recorded_for: str | None) -> Exchange:
            return self._brain.chat.record_exchange(
                conversation,
                user_text,
                assistant_text,
                entity=recorded_for,
                timestamp=timestamp,
                metadata=metadata,
                user_name=user_name,
                assistant_name=assistant_name,
                idempotency_key=idempotency_key,
            )

        if conversation_id is None:
            return record(None, access.entity)
        conversation_id = valid_conversation_id(conversation_id)
        with conversation_lock(conversation_id):
            recorded_for = access.exchange_entity(conversation_id)
            try:
                return record(conversation_id, recorded_for)
            except ConversationOwned:  # another scope claimed this id first (another process, meanwhile)
                raise no_conversation(conversation_id) from None

    @operation
    def turns(
        self, conversation_id: str, *, k: int | None = None, entity: str | None = None
    ) -> builtins.list[Document]:
        """Its turns in order; the last ``k`` when given."""
        access = self._access(entity)
        conversation_id, _ = access.conversation(conversation_id)
        docs = self._brain.store.conversation_turns(conversation_id, entity=access.entity)
        return docs[-k:] if k is not None else docs

    @operation
    def summaries(self, conversation_id: str, *, entity: str | None = None) -> builtins.list[Document]:
        access = self._access(entity)
        conversation_id, first = access.conversation(conversation_id)
        docs = self._brain.store.conversation_summaries(conversation_id)
        if access.entity is not None:  # a summary written in another scope (e.g. through /v1/docs) stays hidden
            docs = [d for d in docs if d.metadata.get("scope", GLOBAL_SCOPE) == first]
        return docs

    @operation
    def list(
        self, *, entity: str | None = None, limit: int | None = None, offset: int = 0
    ) -> builtins.list[ConversationInfo]:
        """The conversations the caller may use, most recent activity first (see :mod:`brain.app.browse`)."""
        from brain.app.browse import list_conversations

        return list_conversations(self._brain.store, acting=self._access(entity).entity, limit=limit, offset=offset)

    @operation(slow=True)
    def extract(
        self, conversation_id: str | None = None, *, again: bool = False, entity: str | None = None
    ) -> FormationReport:
        if conversation_id is not None:  # the memories are in its scope: only of a conversation the caller may use
            conversation_id, _ = self._access(entity).conversation(conversation_id)
            return self._brain.chat.extract_memories(conversation_id, again=again)
        self._admin("forming memories of every conversation")
        return self._brain.chat.extract_memories(None, again=again)


class LocalKnowledge(_Part):
    @operation
    def search(
        self, query: str, *, k: int | None = None, topic: str | None = None, entity: str | None = None
    ) -> builtins.list[Hit]:
        acting = self._access(entity).entity
        return self._brain.store.retrieve_faq(query, k, topic, entity=acting)

    @operation
    def persona(self, *, entity: str | None = None) -> JsonReport:
        from brain.app.browse import persona_sections

        return persona_sections(self._brain.store, acting=self._access(entity).entity)

    @operation
    def by_file(self, *, entity: str | None = None) -> builtins.list[JsonReport]:
        from brain.app.browse import knowledge_by_file

        return knowledge_by_file(self._brain.store, acting=self._access(entity).entity)

    @operation
    def persona_block(self, *, max_chars: int | None = None) -> str:
        from brain.features.persona import persona_block

        return persona_block(self._brain.store, max_chars=max_chars)

    def load_persona(self, path: Path) -> PersonaLoad:
        from brain.features.persona import load_persona

        self._admin("loading the persona")
        return load_persona(self._brain.store, path)

    @operation(slow=True)
    def load_persona_text(self, markdown: str, source: str) -> PersonaLoad:
        """:meth:`load_persona` of a file's text read elsewhere (a client beside the server)."""
        from brain.features.persona import load_persona_text

        self._admin("loading the persona")
        return load_persona_text(self._brain.store, markdown, source)


class LocalDocuments(_Part):
    @operation
    def write(self, docs: Sequence[Mapping[str, object]]) -> builtins.list[str]:
        self._admin("writing documents of any type")
        return self._brain.store.upsert_docs(list(docs))

    @operation
    def get(
        self,
        ids: Sequence[str] | None = None,
        *,
        type: str | None = None,
        where: Mapping[str, object] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        entity: str | None = None,
    ) -> builtins.list[Document]:
        self._admin("reading documents of any type")
        return self._brain.store.get(
            list(ids) if ids else None,
            where=dict(where) if where else None,
            type=type,
            limit=limit,
            offset=offset,
            entity=entity,
        )

    @operation
    def search(
        self,
        query: str,
        *,
        type: str | None = None,
        k: int | None = None,
        entity: str | None = None,
        as_of: When | None = None,
    ) -> builtins.list[Hit | MemoryHit]:
        self._admin("searching documents of any type")
        acting = self._access(entity).entity
        return [*self._brain.search(query, type=type, k=k, entity=acting, as_of=as_of)]


class LocalEntities(_Part):
    @operation(slow=True)
    def forget(self, entity: str) -> ForgetReport:
        acting = self._access(entity).entity  # the admin, or a caller bound to that very entity
        assert acting is not None  # an entity was named
        return self._brain.forget_entity(acting)

    @operation
    def forget_preview(self, entity: str) -> dict[str, int]:
        from brain.app.forget import forget_preview

        acting = self._access(entity).entity
        assert acting is not None
        return forget_preview(self._brain.store, acting)


class LocalMaintenance(_Part):
    def _exporting(self, entity: str | None) -> str | None:
        """Whose export the caller may make: its own entity's, or every entity's for the admin alone."""
        acting = self._access(entity).entity
        if acting is None:
            self._admin("an export of every entity")
        return acting

    def export(
        self,
        out_dir: Path,
        *,
        entity: str | None = None,
        embeddings: bool = True,
        conversations: bool = True,
        owner_id: str | None = None,
        force: bool = False,
    ) -> ExportReport:
        from brain.features.pam import export_pam

        acting = self._exporting(entity)
        return export_pam(
            self._brain.store,
            out_dir,
            embeddings=embeddings,
            conversations=conversations,
            owner_id=owner_id,
            force=force,
            entity=acting,
        )

    def export_archive(
        self,
        *,
        entity: str | None = None,
        embeddings: bool = True,
        conversations: bool = True,
        owner_id: str | None = None,
    ) -> bytes:
        """An export as one tar, to be written elsewhere (:func:`brain.features.pam.transfer.read_export_archive`)."""
        from brain.features.pam.export import build_export
        from brain.features.pam.transfer import export_archive

        acting = self._exporting(entity)
        built = build_export(
            self._brain.store, embeddings=embeddings, conversations=conversations, owner_id=owner_id, entity=acting
        )
        return export_archive(built)

    def import_archive(self, data: bytes | Path, *, include_forgotten: bool = False) -> ImportReport:
        """Import the files of an archive of :func:`brain.features.pam.transfer.import_archive` (its bytes, or
        the file holding them)."""
        from tempfile import TemporaryDirectory

        from brain.features.pam.transfer import unpack_import

        self._admin("an import")
        with TemporaryDirectory(prefix="brain-import-") as folder:
            return self.import_pam(unpack_import(data, Path(folder)), include_forgotten=include_forgotten)

    def import_pam(self, path: Path, *, include_forgotten: bool = False) -> ImportReport:
        from brain.features.pam import import_pam

        self._admin("an import")
        return import_pam(self._brain.store, path, include_forgotten=include_forgotten)

    @operation(slow=True)
    def consolidate(self, *, dry_run: bool = False, threshold: float | None = None) -> ConsolidationReport:
        self._admin("consolidating memories")
        return self._brain.consolidate(dry_run=dry_run, threshold=threshold)

    @operation(slow=True)
    def verify_mirror(self) -> VerifyReport:
        self._admin("verifying the mirror")
        return self._brain.verify_mirror()

    @operation(slow=True)
    def sync_mirror(self, *, force: bool = False) -> SyncReport:
        self._admin("syncing the mirror")
        return self._brain.sync_mirror(force=force)

    @operation(slow=True)
    def backfill_mirror(self) -> BackfillReport:
        self._admin("backfilling the mirror")
        return self._brain.backfill_mirror(progress=False)

    @operation
    def stats(self) -> JsonReport:
        self._admin("the store's figures")
        return self._brain.stats()

    @operation
    def health(self, *, detail: bool = False, verify: bool = False) -> JsonReport:
        # the detail and a mirror verify (which reads the store whole) are the admin's alone
        admin = self._ops.caller.is_admin
        return self._brain.health(detail=detail and admin, verify=verify and admin)


class LocalSpecialists(_Part):
    @operation
    def list(self) -> builtins.list[Specialist]:
        return self._brain.specialists.list_specialists()

    @operation
    def find(self, request: str, *, k: int = 3) -> builtins.list[SpecialistMatch]:
        return self._brain.specialists.find_specialists(request, k)


#: each noun's class, by the name it has on :class:`LocalOperations` and in a served call's path
NOUNS: dict[str, type[_Part]] = {
    "memories": LocalMemories,
    "conversations": LocalConversations,
    "knowledge": LocalKnowledge,
    "documents": LocalDocuments,
    "entities": LocalEntities,
    "maintenance": LocalMaintenance,
    "specialists": LocalSpecialists,
}


class LocalOperations:
    """:class:`~brain.ops.protocol.Operations` on ``brain`` (opened by this process) for ``caller``."""

    def __init__(self, brain: Brain, caller: Caller = ADMIN, *, owns_brain: bool = False):
        self.brain = brain
        self.caller = caller
        self._owns_brain = owns_brain
        self.memories = LocalMemories(self)
        self.conversations = LocalConversations(self)
        self.knowledge = LocalKnowledge(self)
        self.documents = LocalDocuments(self)
        self.entities = LocalEntities(self)
        self.maintenance = LocalMaintenance(self)
        self.specialists = LocalSpecialists(self)

    def bound_to(self, caller: Caller) -> LocalOperations:
        """The same operations for another caller (a request's), on the same Brain."""
        return LocalOperations(self.brain, caller)

    def close(self) -> None:
        if self._owns_brain:
            self.brain.close()

    def __enter__(self) -> LocalOperations:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ["NOUNS", "LocalOperations"]
