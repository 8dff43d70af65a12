"""Cursor paging for MCP lists: the cursor is opaque to the model (MCP's convention), so a page is
asked for by the ``next_cursor`` of the one before, never by arithmetic on offsets."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brain.model.errors import ValidationError

_BAD_CURSOR = "cursor is not one this server gave: pass next_cursor from the previous page, or leave it out"


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int:
    """The offset a cursor stands for (0 for none); :class:`ValidationError` naming ``cursor`` otherwise."""
    if cursor is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        offset = json.loads(raw)["offset"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise ValidationError.of("cursor", _BAD_CURSOR) from None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValidationError.of("cursor", _BAD_CURSOR)
    return offset


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None

    @classmethod
    def of(cls, fetched: Sequence[Any], offset: int, limit: int) -> Page:
        """A page from ``limit + 1`` fetched items: the extra one only says whether another page follows."""
        more = len(fetched) > limit
        return cls(list(fetched[:limit]), encode_cursor(offset + limit) if more else None)
