"""The Xaibo adapters at the module path agent configurations name (see :mod:`brain.shells.xaibo`)."""

from brain.shells.xaibo import *  # noqa: F403
from brain.shells.xaibo import __all__  # noqa: F401
