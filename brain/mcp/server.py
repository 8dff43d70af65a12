"""The MCP server: brain's memory as tools for a model, one :class:`~brain.access.Access` call per tool.

Who may read and change which memory is :mod:`brain.access`' rule, applied exactly as for the HTTP API:
a server started for one entity (``create_server(brain, entity="alice")``) is a caller bound to that
entity, so an ``entity`` argument naming another is refused and another entity's memories do not exist
for it; a server without one acts as the admin, for the entity a call names (none: global memories).

Errors brain reports (bad arguments, a refused entity, an unknown id, a store that cannot serve) come
back to the model as tool errors carrying brain's message, which names the argument and the rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from brain import __version__
from brain.access import ADMIN, Access, Caller
from brain.core import Brain
from brain.errors import BrainError, ValidationError
from brain.schemas import MAX_K

INSTRUCTIONS = """\
Long-term memory about the people you talk with. Call `recall` before answering a question that may \
depend on what you were told earlier; call `remember` when you learn a durable fact or preference \
(importance 5: essential, e.g. an allergy; 1: trivia). Memories belong to an entity (a person) or are \
global; each result carries the id that `forget` takes."""

EntityArg = Annotated[str | None, Field(
    description="The person (entity) the memory belongs to, e.g. 'alice'. Leave out for global memories, "
                "or when this server is bound to one entity.")]
TagsArg = Annotated[list[str] | None, Field(description="Short labels, e.g. ['diet', 'health'].")]


@contextmanager
def _tool_errors() -> Iterator[None]:
    # brain's errors are the model's to read and act on; anything else is a crash the SDK reports generically
    try:
        yield
    except BrainError as exc:
        raise ToolError(str(exc)) from exc


def create_server(brain: Brain, *, entity: str | None = None) -> MCPServer:
    """An MCP server over ``brain``'s memories; with ``entity``, every tool acts in that entity's scope only."""
    caller = Caller(entity, bound_by="server") if entity is not None else ADMIN
    if entity is not None:
        caller.acting_as(entity)  # a malformed name stops here, before the server starts

    def access(requested: str | None) -> Access:
        return Access(brain.store, brain.chat, caller, requested)

    server = MCPServer("brain", version=__version__, instructions=INSTRUCTIONS)

    @server.tool()
    def remember(
        text: Annotated[str, Field(description="The fact to keep, as one self-contained sentence.")],
        importance: Annotated[int, Field(description="1 (trivia) to 5 (essential).")] = 3,
        tags: TagsArg = None,
        entity: EntityArg = None,
    ) -> dict[str, Any]:
        """Store a memory. The same text for the same entity updates the stored memory instead of adding one.
        Returns the stored memory with its id."""
        with _tool_errors():
            return access(entity).create_memory(text, importance=importance, tags=tags, source="chat").to_dict()

    @server.tool()
    def recall(
        query: Annotated[str, Field(description="What you want to know, in plain words.")],
        k: Annotated[int | None, Field(description=f"How many memories at most, 1 to {MAX_K} "
                                                   "(default: the server's setting).")] = None,
        entity: EntityArg = None,
        tags: Annotated[list[str] | None, Field(description="Only memories with all of these tags.")] = None,
    ) -> dict[str, Any]:
        """The memories most relevant to ``query``, best first: the entity's own and global ones. Each result
        has its id and score = similarity_part + importance_part + recency_part."""
        with _tool_errors():
            acting = access(entity)
            hits = acting.search_memories(query, k, tags=tags)
            return {"query": query, "entity": acting.entity, "results": [h.to_dict() for h in hits]}

    @server.tool()
    def forget(
        id: Annotated[str | None, Field(description="The id of the memory to delete.")] = None,
        ids: Annotated[list[str] | None, Field(description="Several ids, deleted all or none.")] = None,
        entity: EntityArg = None,
    ) -> dict[str, Any]:
        """Delete memories by id (give `id` or `ids`). Only memories of the entity acted for can be deleted."""
        with _tool_errors():
            return {"deleted": access(entity).delete_memories(_one_or_many(id, ids))}

    @server.tool()
    def list_memories(
        entity: EntityArg = None,
        tags: Annotated[list[str] | None, Field(description="Only memories with all of these tags.")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K, description=f"Page size, 1 to {MAX_K}.")] = 100,
        offset: Annotated[int, Field(ge=0, description="How many to skip (the next page: offset + limit).")] = 0,
    ) -> dict[str, Any]:
        """The memories you may read (the entity's own and global ones), in storage order, one page at a time."""
        with _tool_errors():
            docs = access(entity).list_memories(tags=tags, limit=limit, offset=offset)
            return {"memories": [d.to_dict() for d in docs], "limit": limit, "offset": offset}

    return server


def _one_or_many(one: str | None, many: list[str] | None) -> list[str]:
    if (one is None) == (many is None):
        raise ValidationError.of("id", "give either id (one memory) or ids (several), not both and not neither")
    return [one] if one is not None else list(many or ())
