"""``brain.embeddings``: the embedders at the path the README teaches; they live in
:mod:`brain.providers.embeddings`."""

from brain.providers.embeddings import *  # noqa: F403
from brain.providers.embeddings import __all__  # noqa: F401
