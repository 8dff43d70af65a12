"""``brain.errors``: the named errors (the :class:`BrainError` tree) at the path callers catch them from; they
live in :mod:`brain.model.errors`."""

from brain.model.errors import *  # noqa: F403
