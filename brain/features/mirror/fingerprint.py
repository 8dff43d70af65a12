"""A mirrored row's content hash: what lets a catch-up find the rows that differ without decoding them.

The hash covers everything a mirrored document is made of and a write can change, so that any
write Chroma took and the mirror missed shows up as a different hash:

- the text (an in-place update of a memory);
- the metadata as callers see it (:func:`brain.model.schemas.from_chroma`), as canonical JSON, minus
  ``last_used`` (access tracking updates it in Chroma alone, see :func:`without_use`);
- the configured model's vector, as its little-endian float32 bytes (the mirror's own BLOB format).
  A vector can change while the text stays (a write that brings its own vector, e.g. a restore or a
  re-embedding), so text and metadata alone are not enough.

The mirror stores the hash of what it was given with each row (``brain_content_hashes``); triggers
drop it whenever anything else changes the row or its vectors (engram itself, a backfill), so a
stored hash never vouches for content it was not computed from. A missing or different hash only
sends the row to the exact comparison (:func:`brain.features.mirror.sync.catch_up`), so the hash can
only cause extra work, never hide a difference (short of a 128-bit collision).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import numpy as np

from brain.model.schemas import from_chroma

#: bytes of the BLAKE2b digest: 128 bits, far beyond any store's number of rows
DIGEST_SIZE = 16
_FLOAT32_LE = np.dtype("<f4")


def without_use(meta: Mapping[str, object]) -> dict[str, object]:
    """Metadata minus ``last_used``: access tracking updates it in Chroma alone (a mirror write per
    retrieval would double its cost), so it is not a difference worth a repair."""
    return {k: v for k, v in meta.items() if k != "last_used"}


def content_hash(text: str, metadata: Mapping[str, object], vector: object | None) -> bytes:
    """The hash of one document's text, metadata and vector (None: no vector); see the module docstring."""
    digest = hashlib.blake2b(digest_size=DIGEST_SIZE)
    encoded = text.encode("utf-8")
    digest.update(len(encoded).to_bytes(8, "little"))
    digest.update(encoded)
    meta = json.dumps(
        without_use(from_chroma(dict(metadata))),
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        allow_nan=False,
        default=str,
    )
    encoded = meta.encode("utf-8")
    digest.update(len(encoded).to_bytes(8, "little"))
    digest.update(encoded)
    if vector is not None:
        digest.update(np.asarray(vector).astype(_FLOAT32_LE, copy=False).tobytes())
    return digest.digest()
