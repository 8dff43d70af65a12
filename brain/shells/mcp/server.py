"""The MCP server: brain's memory as tools and resources for a model, one library call each.

Who may read and change which memory is :mod:`brain.access.policy`' rule, applied exactly as for the HTTP API.
The caller is the admin over stdio (the user started the process), and over HTTP whoever the bearer token
names (:mod:`brain.shells.mcp.http` authenticates before a message reaches a tool). A server pinned to one
entity (``create_server(brain, entity="alice")``) narrows that further: every tool acts for ``alice``,
an ``entity`` argument naming another is refused, and another entity's memories do not exist for it.

Errors brain reports (bad arguments, a refused entity, an unknown id, a store that cannot serve) come
back to the model as tool errors carrying brain's message, which names the argument and the rule.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from brain.model.errors import BrainError, Forbidden, ValidationError
from brain.model.schemas import GLOBAL_SCOPE, MAX_K, get_all_schemas, schema_info
from brain.model.version import __version__
from brain.ops import ADMIN, Caller, LocalOperations, Operations
from brain.ops.serving import Brain
from brain.ops.values import status_of
from brain.shells.mcp.paging import Page, decode_cursor

INSTRUCTIONS = """\
Long-term memory about the people you talk with. Call `recall` before answering a question that may \
depend on what you were told earlier; call `remember` when you learn a durable fact or preference \
(importance 5: essential, e.g. an allergy; 1: trivia), `supersede_memory` when a fact changes (the old \
one stays as history: `memory_history`, `recall` with `as_of`), `update_memory` to correct one and `forget` \
when one is withdrawn. Memories belong to an entity (a person) or are global; each result carries the id the \
other tools take. `search_knowledge` answers from the knowledge base; `get_context` gives the whole \
context brain would prompt a chat model with; `find_specialists` names the tool best suited to a request."""

EntityArg = Annotated[
    str | None,
    Field(
        description="The person (entity) the memory belongs to, e.g. 'alice'. Leave out for global memories, "
        "or when this server is bound to one entity."
    ),
]
TagsArg = Annotated[list[str] | None, Field(description="Short labels, e.g. ['diet', 'health'].")]
TagFilterArg = Annotated[list[str] | None, Field(description="Only memories with all of these tags.")]
ImportanceArg = Annotated[int, Field(description="1 (trivia) to 5 (essential).")]
ConversationArg = Annotated[
    str | None,
    Field(description="The conversation's id, as record_exchange returned it; leave out to start a new one."),
]


@contextmanager
def _tool_errors() -> Iterator[None]:
    # brain's errors are the model's to read and act on; anything else is a crash the SDK reports generically
    try:
        yield
    except BrainError as exc:
        raise ToolError(str(exc)) from exc


def request_caller(ctx: Context | None, pinned: str | None) -> Caller:
    """Who a message comes from: the token's caller over HTTP, the admin over stdio; narrowed to the
    server's pinned entity, which a token bound to another entity may not use."""
    request = getattr(ctx.request_context, "request", None) if ctx is not None else None
    caller = getattr(request, "scope", {}).get("brain.caller", ADMIN) if request is not None else ADMIN
    if pinned is None:
        return caller
    if caller.is_admin:
        return Caller(pinned, bound_by="server")
    if caller.entity != pinned:
        raise Forbidden(
            f"this {caller.bound_by} is bound to entity {caller.entity!r} but the server serves "
            f"entity {pinned!r}: use a token for {pinned!r}, or a server started without --entity"
        )
    return caller


def plain_logs_off_a_terminal() -> None:
    """Log one record per line when stderr is a file or a pipe. The SDK's server configures the root
    logger with rich, which wraps every message to what its console width (80 off a terminal) leaves
    after the time, level and source columns: about 35 columns in a log file. A root logger that is
    already configured, or a terminal, is left as it is."""
    root = logging.getLogger()
    if root.handlers or sys.stderr is None or sys.stderr.isatty():
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # what the SDK would have set


def create_server(target: Operations | Brain, *, entity: str | None = None) -> MCPServer:
    """An MCP server over ``target``'s operations (a Brain: its store's); with ``entity``, every tool acts in that
    entity's scope only."""
    if entity is not None:
        entity = ADMIN.acting_as(entity)  # canonical; a malformed name stops here, before the server starts
    plain_logs_off_a_terminal()  # before the SDK's server, whose set-up does nothing once a handler exists
    # a Brain is tested first: probing it for the Operations protocol would build its specialist registry
    base: Operations = LocalOperations(target) if isinstance(target, Brain) else target

    def ops(ctx: Context | None) -> Operations:
        """The operations of the message's caller."""
        return base.bound_to(request_caller(ctx, entity))

    def acting(ctx: Context, requested: str | None) -> str | None:
        return request_caller(ctx, entity).acting_as(requested)

    server = MCPServer("brain", version=__version__, instructions=INSTRUCTIONS)

    # ---- memories ----------------------------------------------------------------------------------
    @server.tool()
    def remember(
        ctx: Context,
        text: Annotated[str, Field(description="The fact to keep, as one self-contained sentence.")],
        importance: ImportanceArg = 3,
        tags: TagsArg = None,
        entity: EntityArg = None,
        expires_at: Annotated[
            str | None,
            Field(
                description="ISO 8601 time at which the memory stops being recalled, e.g. for 'the exam is tomorrow'."
            ),
        ] = None,
    ) -> dict[str, object]:
        """Store a memory. The same text for the same entity updates the stored memory instead of adding one.
        Returns the stored memory with its id."""
        with _tool_errors():
            return (
                ops(ctx)
                .memories.add(
                    text, importance=importance, tags=tags, entity=entity, source="chat", expires_at=expires_at
                )
                .to_dict()
            )

    @server.tool()
    def recall(
        ctx: Context,
        query: Annotated[str, Field(description="What you want to know, in plain words.")],
        k: Annotated[
            int | None, Field(description=f"How many memories at most, 1 to {MAX_K} (default: the server's setting).")
        ] = None,
        entity: EntityArg = None,
        tags: TagFilterArg = None,
        as_of: Annotated[
            str | None,
            Field(description="ISO 8601 time: recall what was held true then, memories superseded since included."),
        ] = None,
    ) -> dict[str, object]:
        """The memories relevant to ``query``, best first, in the order the chat context shows them (none when
        nothing is relevant enough): the entity's own and global ones (without an entity, global ones only).
        Each result has its id, its scope ('global': shared by every entity) and
        score = similarity_part + lexical_part + importance_part + recency_part."""
        with _tool_errors():
            hits = ops(ctx).memories.search(query, k=k, entity=entity, tags=tags, as_of=as_of)
            return {"query": query, "entity": acting(ctx, entity), "results": [_scoped(h.to_dict()) for h in hits]}

    @server.tool()
    def update_memory(
        ctx: Context,
        id: Annotated[str, Field(description="The id of the memory to change.")],
        text: Annotated[str | None, Field(description="The corrected fact (replaces the text).")] = None,
        importance: Annotated[int | None, Field(description="1 (trivia) to 5 (essential).")] = None,
        tags: Annotated[list[str] | None, Field(description="The new labels (replace the old ones).")] = None,
        entity: EntityArg = None,
    ) -> dict[str, object]:
        """Correct a memory in place: give at least one of text, importance, tags. Returns the memory."""
        with _tool_errors():
            if text is None and importance is None and tags is None:
                raise ValidationError.of("text", "nothing to change: give text, importance or tags")
            return ops(ctx).memories.update(id, text, entity=entity, importance=importance, tags=tags).to_dict()

    @server.tool()
    def supersede_memory(
        ctx: Context,
        id: Annotated[str, Field(description="The id of the memory that no longer holds.")],
        text: Annotated[str, Field(description="What holds now, as one self-contained sentence.")],
        kind: Annotated[
            Literal["update", "contradict"],
            Field(description="update: the fact changed (moved to Berlin); contradict: the old memory was wrong."),
        ] = "update",
        at: Annotated[str | None, Field(description="ISO 8601 time of the change; now when left out.")] = None,
        entity: EntityArg = None,
    ) -> dict[str, object]:
        """Replace a memory with a new one, keeping the old one as history (never deleted: recall with as_of
        still finds it for a time before the change). The new memory is the same entity's. Returns both."""
        with _tool_errors():
            return ops(ctx).memories.supersede(id, text, entity=entity, kind=kind, at=at, source="chat").to_dict()

    @server.tool()
    def memory_history(
        ctx: Context,
        id: Annotated[str, Field(description="The id of any memory of the history.")],
        entity: EntityArg = None,
    ) -> dict[str, object]:
        """The history of a memory, oldest first: every memory that replaced another, each with valid_from and
        valid_until; the current one has no superseded_by."""
        with _tool_errors():
            return {"id": id, "history": [_scoped(d.to_dict()) for d in ops(ctx).memories.history(id, entity=entity)]}

    @server.tool()
    def forget(
        ctx: Context,
        id: Annotated[str | None, Field(description="The id of the memory to delete.")] = None,
        ids: Annotated[list[str] | None, Field(description="Several ids, deleted all or none.")] = None,
        entity: EntityArg = None,
    ) -> dict[str, object]:
        """Delete memories by id (give `id` or `ids`). With an entity, only that entity's own memories are
        deleted: a global one (scope 'global', shared by every entity, as list_memories and recall mark them)
        is refused and nothing is deleted. Without an entity, any memory, global ones included."""
        with _tool_errors():
            return {"deleted": ops(ctx).memories.delete(_one_or_many(id, ids), entity=entity)}

    @server.tool()
    def list_memories(
        ctx: Context,
        entity: EntityArg = None,
        tags: TagFilterArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K, description=f"Page size, 1 to {MAX_K}.")] = 100,
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous page; leave out for the first page.")
        ] = None,
        history: Annotated[
            bool, Field(description="Also the memories no longer current (superseded, retracted, archived).")
        ] = False,
    ) -> dict[str, object]:
        """The memories for an entity: its own and the global ones, each with its scope ('global': shared by
        every entity, not the entity's own; `forget` with the entity refuses those) and its status. Without an
        entity, every memory you may read. The current ones unless `history`. One page at a time, in storage
        order; a page with more after it has `next_cursor`."""
        with _tool_errors():
            offset = decode_cursor(cursor)
            docs = ops(ctx).memories.list(entity=entity, tags=tags, limit=limit + 1, offset=offset, history=history)
            page = Page.of(docs, offset, limit)
            return {
                "entity": acting(ctx, entity),
                "memories": [_scoped(d.to_dict()) for d in page.items],
                "next_cursor": page.next_cursor,
            }

    @server.tool()
    def count_memories(
        ctx: Context,
        entity: EntityArg = None,
        tags: TagFilterArg = None,
        history: Annotated[
            bool, Field(description="Also the memories no longer current (superseded, retracted, archived).")
        ] = False,
    ) -> dict[str, object]:
        """How many memories list_memories would list for an entity (its own and the global ones) or, without
        one, every memory you may read: all its pages together."""
        with _tool_errors():
            count = ops(ctx).memories.count(entity=entity, tags=tags, history=history)
            return {"entity": acting(ctx, entity), "count": count}

    # ---- knowledge, chat and specialists ---------------------------------------------------------------
    @server.tool()
    def search_knowledge(
        ctx: Context,
        query: Annotated[str, Field(description="The question, in plain words.")],
        k: Annotated[
            int | None, Field(description=f"How many entries at most, 1 to {MAX_K} (default: the server's setting).")
        ] = None,
        topic: Annotated[str | None, Field(description="Only entries of this topic.")] = None,
        entity: EntityArg = None,
    ) -> dict[str, object]:
        """The knowledge-base (FAQ) entries closest in meaning to ``query``, best first: global ones and the
        entity's own."""
        with _tool_errors():
            hits = ops(ctx).knowledge.search(query, k=k, topic=topic, entity=entity)
            return {"query": query, "results": [h.to_dict() for h in hits]}

    @server.tool()
    def get_context(
        ctx: Context,
        user_message: Annotated[str, Field(description="The user's new message.")],
        conversation_id: Annotated[str | None, Field(description="The conversation it belongs to, if any.")] = None,
        entity: EntityArg = None,
    ) -> dict[str, object]:
        """The context brain gives a chat model for ``user_message``: persona, memories, knowledge, summaries
        and turns, within the budget, and the rendered ``prompt``; ``dropped`` says what did not fit."""
        with _tool_errors():
            return ops(ctx).conversations.context(conversation_id, user_message, entity=entity).to_dict()

    @server.tool()
    def record_exchange(
        ctx: Context,
        user_text: Annotated[str, Field(description="What the user said.")],
        assistant_text: Annotated[str, Field(description="What the assistant answered.")],
        conversation_id: ConversationArg = None,
        entity: EntityArg = None,
        user_name: Annotated[
            str | None,
            Field(description="Who the user is, as the turns should name them (default: the entity's name)."),
        ] = None,
        assistant_name: Annotated[
            str | None, Field(description="The assistant's name (default: the persona's).")
        ] = None,
        idempotency_key: Annotated[
            str | None,
            Field(
                description=(
                    "Makes a retry safe: the same exchange sent again with this key returns the first answer and "
                    "stores nothing (1 to 255 printable ASCII characters, e.g. a UUID)."
                )
            ),
        ] = None,
    ) -> dict[str, object]:
        """Append one user/assistant exchange to a conversation (a new one without ``conversation_id``).
        Returns the conversation's id and the turns' ids and positions."""
        with _tool_errors():
            return (
                ops(ctx)
                .conversations.record(
                    conversation_id,
                    user_text,
                    assistant_text,
                    entity=entity,
                    user_name=user_name,
                    assistant_name=assistant_name,
                    idempotency_key=idempotency_key,
                )
                .to_dict()
            )

    @server.tool()
    def extract_memories(
        ctx: Context,
        conversation_id: Annotated[str, Field(description="The conversation's id, as record_exchange returned it.")],
        again: Annotated[bool, Field(description="Also re-run the parts whose memories were formed already.")] = False,
        entity: EntityArg = None,
    ) -> dict[str, object]:
        """Form memories from a conversation now (brain also does it by itself after every few exchanges when
        memory formation is on): each part whose formation is pending or failed goes to the formation model.
        Returns the batches run, the memories added, merged, updated and contradicted, and the tokens spent."""
        with _tool_errors():
            return ops(ctx).conversations.extract(conversation_id, again=again, entity=entity).to_dict()

    @server.tool()
    def find_specialists(
        request: Annotated[str, Field(description="What the user asks for, in their words.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many specialists at most, 1 to 50.")] = 3,
    ) -> dict[str, object]:
        """The specialists (tools) best suited to ``request``, best first by confidence (how likely each is
        the right one), each with its band (strong, good, possible, weak) and the score the confidence is
        learned from: ask the user to clarify when the best is weak."""
        with _tool_errors():
            return {
                "request": request,
                "results": [m.to_dict() for m in base.specialists.find(request, k=k)],
            }

    # ---- resources ---------------------------------------------------------------------------------
    @server.resource(
        "brain://persona",
        name="persona",
        mime_type="text/markdown",
        description="The assistant's current persona, section by section.",
    )
    def persona() -> str:
        # a static resource gets no request context: the persona as the pinned entity sees it, else the
        # global one (never a section of another scope)
        sections = base.bound_to(request_caller(None, entity)).knowledge.persona(entity=entity)["sections"]
        return "\n\n".join(
            f"## {s['heading']}\n\n{s['text']}" if s.get("heading") else str(s["text"]) for s in sections
        )

    @server.resource(
        "brain://schema/{doc_type}",
        name="schema",
        mime_type="application/json",
        description="The metadata schema of one document type: " + ", ".join(get_all_schemas()) + ".",
    )
    def schema(doc_type: str) -> str:
        try:
            return json.dumps(schema_info(doc_type), indent=2)
        except BrainError as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource(
        "brain://conversations/{conversation_id}",
        name="conversation",
        mime_type="application/json",
        description="A conversation's turns in order (of the entity this server serves, if bound).",
    )
    def conversation(conversation_id: str, ctx: Context) -> str:
        try:
            turns = ops(ctx).conversations.turns(conversation_id)
        except BrainError as exc:
            raise ResourceError(str(exc)) from exc
        return json.dumps({"conversation_id": conversation_id, "turns": [t.to_dict() for t in turns]})

    return server


def _scoped(item: dict[str, Any]) -> dict[str, Any]:
    """A memory as a tool returns it: its scope beside its id, where a model reading a list sees it."""
    return {
        "id": item["id"],
        "scope": item["metadata"].get("scope", GLOBAL_SCOPE),
        "status": status_of(item["metadata"]),
        **item,
    }


def _one_or_many(one: str | None, many: list[str] | None) -> list[str]:
    if (one is None) == (many is None):
        raise ValidationError.of("id", "give either id (one memory) or ids (several), not both and not neither")
    return [one] if one is not None else list(many or ())


__all__ = ["INSTRUCTIONS", "create_server", "request_caller"]
