"""API identities: which bearer token acts as whom.

``BRAIN_API_TOKEN`` is the admin token. ``BRAIN_API_TOKENS_FILE`` names a text file of further tokens,
one per line, ``<who> <token>``::

    # who     token
    alice     8Qy1v3n0b9Jw2m5Rt7Lk4Hs6
    bob       Zp3Xc8Vb1Nm6Qw4Er7Ty2Ui9
    admin     another-admin-token-0123456789

``<who>`` is ``admin`` or an entity name (the token is the line's last field, so a name may contain
spaces; an entity called ``admin`` cannot have a token). Blank lines and lines starting with ``#`` are
ignored. Every token is at least :data:`MIN_TOKEN_LENGTH` printable ASCII characters without spaces,
and appears once (in the file and as ``BRAIN_API_TOKEN``). A malformed file stops start-up with a
:class:`ConfigError` naming the line (never the token). The file is read once, at start-up.

With no token configured at all, every caller is the admin, which ``brain serve`` and the API allow
on loopback only.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.config.values import MIN_TOKEN_LENGTH, token_problem
from brain.model.errors import ConfigError, ValidationError
from brain.model.schemas import valid_name
from brain.ops import ADMIN, Caller

ADMIN_NAME = "admin"
_LINE = re.compile(r"(?P<who>.*\S)\s+(?P<token>\S+)")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listen_address(host: str, tokens: TokenTable | None) -> None:
    """Refuse to listen beyond this machine without a token: with none, every caller is the admin."""
    if not is_loopback(host) and tokens is None:
        raise ConfigError(
            f"refusing to listen on {host} without a token: set BRAIN_API_TOKEN (clients then send "
            f"'Authorization: Bearer <token>') or BRAIN_API_TOKENS_FILE, or bind 127.0.0.1"
        )


@dataclass(frozen=True)
class TokenTable:
    """The configured tokens and who each one acts as."""

    entries: tuple[tuple[bytes, Caller], ...]

    @classmethod
    def from_settings(cls, settings: Any) -> TokenTable | None:
        """The admin token and the tokens file's; None when no token is configured.
        Raises :class:`ConfigError` for a missing or malformed tokens file."""
        entries: list[tuple[bytes, Caller]] = []
        where: dict[bytes, str] = {}
        if settings.api_token is not None:
            token = settings.api_token.get_secret_value().encode()
            entries.append((token, ADMIN))
            where[token] = "BRAIN_API_TOKEN"
        if settings.api_tokens_file is not None:
            for place, token, caller in _read_tokens_file(Path(settings.api_tokens_file)):
                if token in where:
                    raise ConfigError(
                        f"BRAIN_API_TOKENS_FILE {place}: the token is already used by {where[token]}; "
                        f"every token must be different"
                    )
                where[token] = place
                entries.append((token, caller))
        return cls(tuple(entries)) if entries else None

    def identify(self, authorization: str | None) -> Caller | None:
        """The caller an ``Authorization`` header value stands for, or None. Compares with every token in
        constant time, so the time taken says nothing about which token came close."""
        scheme, _, given = (authorization or "").partition(" ")
        candidate = given.strip().encode()
        found: Caller | None = None
        for token, caller in self.entries:
            if hmac.compare_digest(candidate, token) and found is None:
                found = caller
        if scheme.lower() != "bearer" or not candidate:
            return None
        return found

    @property
    def entities(self) -> list[str]:
        return sorted({c.entity for _, c in self.entries if c.entity is not None})


def _read_tokens_file(path: Path) -> list[tuple[str, bytes, Caller]]:
    """[(``line N`` of the file, token, caller)] read from ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"BRAIN_API_TOKENS_FILE={str(path)!r} cannot be read: {exc}") from None
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        place = f"{path}, line {number}"
        match = _LINE.fullmatch(line)
        if not match:
            raise ConfigError(f"BRAIN_API_TOKENS_FILE {place}: expected '<admin or entity name> <token>'")
        who, token = match.group("who"), match.group("token")
        problem = token_problem(token)
        if problem:
            raise ConfigError(f"BRAIN_API_TOKENS_FILE {place}: {problem}")
        if who == ADMIN_NAME:
            caller = ADMIN
        else:
            try:
                caller = Caller(valid_name(who, "the name"))
            except ValidationError as exc:
                raise ConfigError(f"BRAIN_API_TOKENS_FILE {place}: {exc}") from None
            if caller.entity != who:
                # names were once case-sensitive: 'Bob' may have been another entity than 'bob', whose
                # memories this token would now reach; the operator says which person it is
                raise ConfigError(
                    f"BRAIN_API_TOKENS_FILE {place}: the name {who!r} is {caller.entity!r} in its "
                    f"canonical form (entity names are compared case-folded and NFKC-normalised); "
                    f"write {caller.entity!r} in the file once you have checked that the token is "
                    f"that entity's"
                )
        found.append((place, token.encode(), caller))
    if not found:
        raise ConfigError(
            f"BRAIN_API_TOKENS_FILE={str(path)!r} holds no tokens: add lines '<admin or entity name> "
            f"<token>', or unset BRAIN_API_TOKENS_FILE"
        )
    return found


__all__ = ["MIN_TOKEN_LENGTH", "TokenTable", "token_problem"]
