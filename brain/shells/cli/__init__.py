"""The ``brain`` command: a thin shell over the library.

Every command parses its options, calls one library function and prints the result, as text
for people or, with ``--json`` (on the group or on the command), as exactly one JSON document
on stdout. Exit codes: 0 success, 1 a reported failure (any :class:`~brain.model.errors.BrainError`,
an ingest report with errors, an unknown memory id), 2 a usage error (an option or argument
missing, of the wrong type or out of range: ``--k 0``, ``--importance 9``, a malformed
``--scope`` or ``--entity``, an unknown document type), 130 an ``ingest`` stopped with Ctrl-C.
Each command calls the operations of :mod:`brain.ops` (on the store, or through the ``brain serve`` that holds
it), closed when it ends. Read-only commands open the store with ``create=False``: where there is none they say so
and exit 1 instead of creating one. Errors
are one line on stderr starting with ``error:`` and leave stdout empty, except that ``ingest``
and ``memory rm`` print their report before failing; ``brain --debug ...`` shows the traceback
of a failure instead.

Modules: :mod:`~brain.shells.cli.shell` (the error contract, state, parameter types, printing),
:mod:`~brain.shells.cli.group` (the ``brain`` group and ``main``), and the commands by area:
``store_commands`` (init, persona, stats, paths, schema), ``knowledge_commands`` (ingest, search,
turns), ``memory_commands`` (memory, consolidate), ``forget_command`` (forget), ``index_commands`` (index snapshot),
``mirror_commands`` (mirror, restore), ``pam_commands`` (export, import), ``reindex_command`` (reindex),
``specialists_commands``, ``serve_command`` (serve), ``mcp_command`` (mcp).
"""

from __future__ import annotations

# imported for their commands, which register themselves on the group
from brain.shells.cli import (  # noqa: F401
    forget_command,
    index_commands,
    knowledge_commands,
    mcp_command,
    memory_commands,
    mirror_commands,
    pam_commands,
    reindex_command,
    serve_command,
    specialists_commands,
    store_commands,
)
from brain.shells.cli.group import cli, main
from brain.shells.cli.shell import CommandFailed, Interrupted, State

__all__ = ["CommandFailed", "Interrupted", "State", "cli", "main"]
