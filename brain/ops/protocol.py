"""What brain does, by noun, as one typed interface that every shell calls.

:class:`Operations` is satisfied by two implementations: :class:`brain.ops.local.LocalOperations`, which
works on a store this process opened, and :class:`brain.ops.served.ServedOperations`, which sends each
call to the ``brain serve`` that holds the data directory. Each operation is written once, as a method of its
noun's class in :mod:`brain.ops.local`, and the served client is derived from those classes
(:mod:`brain.ops.calls`), so the nouns here are typed as those classes. A shell (the CLI, the HTTP routes, the MCP
tools, the Xaibo modules) holds an :class:`Operations` and never reaches beneath it, so whatever it can do
on its own store it can also do beside a running server.

The caller (the admin, or one bound entity: :class:`brain.access.policy.Caller`) is fixed when the
operations are opened. ``entity`` on a call names the entity the call acts for; a bound caller naming
another is :class:`~brain.model.errors.Forbidden`, the admin naming none acts unrestricted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from brain.ops.arguments import JsonReport, Metadata, When

if TYPE_CHECKING:
    from brain.access.policy import Caller
    from brain.ops.local import (
        LocalConversations,
        LocalDocuments,
        LocalEntities,
        LocalKnowledge,
        LocalMaintenance,
        LocalMemories,
        LocalSpecialists,
    )


@runtime_checkable
class Operations(Protocol):
    """Every operation of brain, by noun, for one caller. Close it when done."""

    @property
    def memories(self) -> LocalMemories: ...

    @property
    def conversations(self) -> LocalConversations: ...

    @property
    def knowledge(self) -> LocalKnowledge: ...

    @property
    def documents(self) -> LocalDocuments: ...

    @property
    def entities(self) -> LocalEntities: ...

    @property
    def maintenance(self) -> LocalMaintenance: ...

    @property
    def specialists(self) -> LocalSpecialists: ...

    def bound_to(self, caller: Caller) -> Operations:
        """The same operations, on the same store or server, for another caller."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Operations: ...

    def __exit__(self, *exc_info: object) -> None: ...


__all__ = ["JsonReport", "Metadata", "Operations", "When"]
