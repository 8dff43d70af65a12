"""A griffe extension for the docs site's Python reference: brain's docstrings cross-reference with Sphinx
roles (``:class:`~brain.app.core.Brain```), which Markdown would print as they are; each becomes inline code
of the name a reader sees (the last part with ``~``, the whole path without)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def _plain(match: re.Match) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRolesAsCode(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_plain, obj.docstring.value)
