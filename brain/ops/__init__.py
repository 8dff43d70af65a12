"""The operation layer: what brain does, by noun, for one caller — the only door the shells use.

:func:`open_operations` gives :class:`~brain.ops.protocol.Operations` on the store itself or, while
``brain serve`` holds the data directory, through that server (:mod:`brain.ops.served`); :func:`open` gives a
Python caller the same, with the chat layer's and the store's calls a chat backend makes.
"""

from brain.access.policy import ADMIN, Caller
from brain.ops.local import LocalOperations
from brain.ops.opening import OpenBrain, ServedBrain, open, open_operations
from brain.ops.protocol import Operations
from brain.ops.served import ServedOperations

__all__ = [
    "ADMIN",
    "Caller",
    "LocalOperations",
    "OpenBrain",
    "Operations",
    "ServedBrain",
    "ServedOperations",
    "open",
    "open_operations",
]
