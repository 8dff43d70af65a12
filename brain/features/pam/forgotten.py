"""The entities forgotten in a data directory, so that an import of an export made before does not bring
them back (:func:`brain.features.pam.import_pam` skips their documents unless told otherwise).

``forgotten.json`` in the data directory holds a random key and, per forgotten entity, the keyed hash
(HMAC-SHA256) of its name under that key, never the name: a forget leaves no name behind, and the file
can only confirm a name one already has (as an import must). It is written by
:func:`brain.app.forget.forget_entity` before the first delete, so that an interrupted forget is already
honoured, and an entry goes when the operator imports that entity's documents on purpose
(``include_forgotten``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from pathlib import Path

from brain.model.errors import StoreUnavailable
from brain.store.disk import write_json_durably

#: the record of forgotten entities, in the data directory
FORGOTTEN_FILE = "forgotten.json"
#: bytes the record may take when read: 64 hex digits and punctuation per entity, for a million of them
_MAX_BYTES = 80 << 20


class Forgotten:
    """The forgotten entities of the data directory ``data_dir``."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / FORGOTTEN_FILE

    def _read(self) -> tuple[bytes, set[str]]:
        """The key and the digests recorded; a new key and none when there is no record yet."""
        try:
            with open(self.path, "rb") as stream:
                raw = stream.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return secrets.token_bytes(32), set()
        except OSError as exc:
            raise self._damaged(f"it cannot be read ({exc.strerror or exc})") from None
        if len(raw) > _MAX_BYTES:
            raise self._damaged(f"it is over {_MAX_BYTES >> 20} MiB")
        try:
            data = json.loads(raw)
            key = bytes.fromhex(data["key"])
            digests = {str(d) for d in data["entities"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise self._damaged(f"it is not a record brain wrote ({exc})") from None
        return key, digests

    def _damaged(self, why: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"cannot use {self.path}, the record of the entities forgotten here: {why}. Nothing was imported; "
            "restore the file from a backup, or delete it if no forgotten person's documents may come back "
            "through this import"
        )

    @staticmethod
    def _digest(key: bytes, name: str) -> str:
        return hmac.new(key, name.encode("utf-8"), hashlib.sha256).hexdigest()

    def contains(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` that were forgotten here."""
        wanted = set(names)
        if not wanted or not self.path.exists():
            return set()
        key, digests = self._read()
        return {name for name in wanted if self._digest(key, name) in digests}

    def record(self, name: str) -> None:
        """Record ``name`` as forgotten (durably, before the caller goes on)."""
        key, digests = self._read()
        digest = self._digest(key, name)
        if digest not in digests:
            self._write(key, digests | {digest})

    def release(self, names: Iterable[str]) -> None:
        """``names`` are no longer forgotten: their documents were imported on the operator's word."""
        if not self.path.exists():
            return
        key, digests = self._read()
        kept = digests - {self._digest(key, name) for name in names}
        if kept != digests:
            self._write(key, kept)

    def _write(self, key: bytes, digests: set[str]) -> None:
        """Replace the record atomically (:func:`~brain.store.disk.write_json_durably`)."""
        try:
            write_json_durably(self.path, {"key": key.hex(), "entities": sorted(digests)})
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot write {self.path}, the record of the entities forgotten here ({exc}); free space or fix "
                "the permissions and run the command again"
            ) from exc


__all__ = ["FORGOTTEN_FILE", "Forgotten"]
