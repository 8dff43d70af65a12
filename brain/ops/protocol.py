"""What brain does, by noun, as one typed interface that every shell calls.

:class:`Operations` is satisfied by two implementations: :class:`brain.ops.local.LocalOperations`, which
works on a store this process opened, and :class:`brain.ops.served.ServedOperations`, which sends each
call to the ``brain serve`` that holds the data directory. A shell (the CLI, the HTTP routes, the MCP
tools, the Xaibo modules) holds an :class:`Operations` and never reaches beneath it, so whatever it can do
on its own store it can also do beside a running server.

The caller (the admin, or one bound entity: :class:`brain.access.policy.Caller`) is fixed when the
operations are opened. ``entity`` on a call names the entity the call acts for; a bound caller naming
another is :class:`~brain.model.errors.Forbidden`, the admin naming none acts unrestricted.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from brain.model.results import Document, Hit, MemoryHit, Supersession

if TYPE_CHECKING:
    from brain.access.policy import Caller
    from brain.app.browse import ConversationInfo
    from brain.app.forget import ForgetReport
    from brain.features.chat import Context, Exchange
    from brain.features.chat.formation import FormationReport
    from brain.features.consolidate import ConsolidationReport
    from brain.features.mirror.protocol import BackfillReport
    from brain.features.mirror.sync import SyncReport, VerifyReport
    from brain.features.pam.reports import ExportReport, ImportReport
    from brain.features.persona import PersonaLoad
    from brain.features.specialists import Specialist, SpecialistMatch

#: a point in time as the library takes it: ISO 8601 text, epoch seconds or a datetime
When = str | float | datetime
#: free-form metadata a caller sends with a memory or an exchange
Metadata = Mapping[str, object]
#: a report as JSON reads it (health, the store's figures, the persona's sections): nested values of any JSON type
JsonReport = dict[str, Any]


class MemoryOperations(Protocol):
    """Long-term memories: global ones and, per entity, its own (scope ``entity:<name>``)."""

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
    ) -> Document: ...

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        entity: str | None = None,
        tags: Sequence[str] | None = None,
        as_of: When | None = None,
    ) -> builtins.list[MemoryHit]: ...

    def get(self, memory_id: str, *, entity: str | None = None) -> Document: ...

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
    ) -> builtins.list[Document]: ...

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
    ) -> Document: ...

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
    ) -> Supersession: ...

    def history(self, memory_id: str, *, entity: str | None = None) -> builtins.list[Document]: ...

    def delete(self, memory_ids: Sequence[str], *, entity: str | None = None) -> builtins.list[str]: ...


class ConversationOperations(Protocol):
    """Conversations: the context of a message, the exchanges, their turns and summaries, and the memories
    formed from them."""

    def context(self, conversation_id: str | None, message: str, *, entity: str | None = None) -> Context: ...

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
    ) -> Exchange: ...

    def turns(
        self, conversation_id: str, *, k: int | None = None, entity: str | None = None
    ) -> builtins.list[Document]: ...

    def summaries(self, conversation_id: str, *, entity: str | None = None) -> builtins.list[Document]: ...

    def list(
        self, *, entity: str | None = None, limit: int | None = None, offset: int = 0
    ) -> builtins.list[ConversationInfo]: ...

    def extract(
        self, conversation_id: str | None = None, *, again: bool = False, entity: str | None = None
    ) -> FormationReport: ...


class KnowledgeOperations(Protocol):
    """The knowledge base and the persona."""

    def search(
        self, query: str, *, k: int | None = None, topic: str | None = None, entity: str | None = None
    ) -> builtins.list[Hit]: ...

    def persona(self, *, entity: str | None = None) -> JsonReport: ...

    def by_file(self, *, entity: str | None = None) -> builtins.list[JsonReport]: ...

    def persona_block(self, *, max_chars: int | None = None) -> str: ...

    def load_persona(self, path: Path) -> PersonaLoad: ...


class DocumentOperations(Protocol):
    """Documents of any type, for the operator (the admin only)."""

    def write(self, docs: Sequence[Mapping[str, object]]) -> builtins.list[str]: ...

    def get(
        self,
        ids: Sequence[str] | None = None,
        *,
        type: str | None = None,
        where: Mapping[str, object] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        entity: str | None = None,
    ) -> builtins.list[Document]: ...

    def search(
        self,
        query: str,
        *,
        type: str | None = None,
        k: int | None = None,
        entity: str | None = None,
        as_of: When | None = None,
    ) -> builtins.list[Hit | MemoryHit]: ...


class EntityOperations(Protocol):
    """People as a whole."""

    def forget(self, entity: str) -> ForgetReport: ...

    def forget_preview(self, entity: str) -> dict[str, int]: ...


class MaintenanceOperations(Protocol):
    """The store as a whole, for the operator (the admin only)."""

    def export(
        self,
        out_dir: Path,
        *,
        entity: str | None = None,
        embeddings: bool = True,
        conversations: bool = True,
        owner_id: str | None = None,
        force: bool = False,
    ) -> ExportReport: ...

    def import_pam(self, path: Path, *, include_forgotten: bool = False) -> ImportReport: ...

    def consolidate(self, *, dry_run: bool = False, threshold: float | None = None) -> ConsolidationReport: ...

    def verify_mirror(self) -> VerifyReport: ...

    def sync_mirror(self, *, force: bool = False) -> SyncReport: ...

    def backfill_mirror(self) -> BackfillReport: ...

    def stats(self) -> JsonReport: ...

    def health(self, *, detail: bool = False, verify: bool = False) -> JsonReport: ...


class SpecialistOperations(Protocol):
    """The specialist registry: who handles what kind of request."""

    def list(self) -> builtins.list[Specialist]: ...

    def find(self, request: str, *, k: int = 3) -> builtins.list[SpecialistMatch]: ...


@runtime_checkable
class Operations(Protocol):
    """Every operation of brain, by noun, for one caller. Close it when done."""

    @property
    def memories(self) -> MemoryOperations: ...

    @property
    def conversations(self) -> ConversationOperations: ...

    @property
    def knowledge(self) -> KnowledgeOperations: ...

    @property
    def documents(self) -> DocumentOperations: ...

    @property
    def entities(self) -> EntityOperations: ...

    @property
    def maintenance(self) -> MaintenanceOperations: ...

    @property
    def specialists(self) -> SpecialistOperations: ...

    def bound_to(self, caller: Caller) -> Operations:
        """The same operations, on the same store or server, for another caller."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Operations: ...

    def __exit__(self, *exc_info: object) -> None: ...


__all__ = [
    "ConversationOperations",
    "DocumentOperations",
    "EntityOperations",
    "KnowledgeOperations",
    "MaintenanceOperations",
    "MemoryOperations",
    "JsonReport",
    "Metadata",
    "Operations",
    "SpecialistOperations",
    "When",
]
