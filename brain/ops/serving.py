"""What a server shell needs to start: the Brain it serves, opened and made ready once, and the lock it
announces itself in, so that the operations of other processes find it (:mod:`brain.ops.served`)."""

from brain.app.core import Brain
from brain.app.core import open as open_brain
from brain.app.startup import StartupReport, prepare_to_serve, startup
from brain.ops.local import LocalOperations
from brain.ops.protocol import Operations
from brain.store import Store
from brain.store.locking import announce


def prepare(ops: Operations) -> None:
    """Make operations on a store this process opened ready to serve (:func:`prepare_to_serve`: the persona
    loaded, the mirror caught up); a server's operations were made ready by that server."""
    if isinstance(ops, LocalOperations):
        prepare_to_serve(ops.brain)


__all__ = ["Brain", "StartupReport", "Store", "announce", "open_brain", "prepare", "prepare_to_serve", "startup"]
