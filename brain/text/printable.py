"""Text made safe to print: every character a terminal would not show as itself, escaped.

A stored text may hold anything a caller sent. Printed raw, a control character (NUL, ESC), a format
character (U+202E, which reverses what follows) or a line or paragraph separator makes a line show
something else than what is stored. The characters escaped are the ones no entity name may hold
(:data:`brain.model.schemas.UNPRINTABLE_CLASS`: Unicode Cc, Cf, Zl, Zp and lone surrogates), so one
rule says what is unprintable.
"""

from __future__ import annotations

import re
from functools import cache

#: the short escapes people and JSON read alike
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@cache
def _unprintable(keep: str) -> re.Pattern[str]:
    from brain.model.schemas.values import UNPRINTABLE_CLASS  # on first use: the CLI's import stays light

    kept = "".join(re.escape(c) for c in keep)
    return re.compile(f"(?![{kept}])[{UNPRINTABLE_CLASS}]" if kept else f"[{UNPRINTABLE_CLASS}]")


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code > 0xFFFF:  # as a UTF-16 pair, so the escape is valid inside a JSON string too
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with every unprintable character but those in ``keep`` written as an escape (``\\n``,
    ``\\t``, ``\\r``, else ``\\uXXXX``): the same text on a terminal, in a log and inside a JSON string.
    ``keep="\\n"`` keeps the line breaks of a layout; a text meant for one line keeps none."""
    return _unprintable(keep).sub(lambda m: _escape(m.group()), text)


__all__ = ["printable"]
