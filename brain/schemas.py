"""``brain.schemas``: the reference's path to the document models and their validation (they live in
:mod:`brain.model.schemas`)."""

from brain.model.schemas import *  # noqa: F403
from brain.model.schemas import __all__  # noqa: F401
