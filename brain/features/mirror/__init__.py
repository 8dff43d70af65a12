"""The Engram-compatible SQLite mirror of the store.

Every mirrored document (memories always; other types as configured) is a row of one SQLite file that
the Engram memory system (``engramai``) opens as its own, with vectors stored per the Engram Embedding
Protocol v2. The mirror lets an Engram instance read and recall our memories, and lets a lost Chroma
store be rebuilt without calling the embedder again.

- :mod:`brain.features.mirror.protocol`: the v2 BLOB format, its validation codes, v1 -> v2 migration, coverage
- :mod:`brain.features.mirror.schema`: the tables (engramai's, with the v2 ``memory_embeddings``)
- :mod:`brain.features.mirror.mapping`: our document <-> engram row (types, layers, importance, namespaces)
- :mod:`brain.features.mirror.store`: :class:`EngramMirror`, the file itself (writes, recall, backfill)
- :mod:`brain.features.mirror.integrity`: a damaged file (:class:`MirrorCorrupt`), the store's
  :class:`MirrorHealth`, moving a file aside
- :mod:`brain.features.mirror.fingerprint`: a row's content hash, what the catch-up compares
- :mod:`brain.features.mirror.sync`: the catch-up with the store (content, not counts), verification, restore

Disaster recovery (the store from the mirror and the files, the mirror from the store) is an operation over
the whole store: :mod:`brain.app.restore`.
"""

from brain.features.mirror.integrity import MirrorHealth
from brain.features.mirror.protocol import (
    BLOB_LENGTH_INVALID,
    DIMENSION_MISMATCH,
    ERROR_CODES,
    LEGACY_MODEL,
    MODEL_NAME_INVALID,
    NON_FINITE_VALUE,
    PROTOCOL_VERSION,
    BackfillReport,
    Coverage,
    MigrationReport,
    check_model_name,
    decode_embedding,
    encode_embedding,
)
from brain.features.mirror.store import EngramMirror, KeywordHit, MirrorDocument
from brain.features.mirror.sync import (
    RestoreReport,
    SyncReport,
    VerifyReport,
    catch_up,
    restore_from_mirror,
    sync_mirror,
    verify_mirror,
)
from brain.model.errors import REBUILD_COMMAND, EmbeddingProtocolError, MirrorCorrupt

__all__ = [
    "BLOB_LENGTH_INVALID",
    "DIMENSION_MISMATCH",
    "ERROR_CODES",
    "LEGACY_MODEL",
    "MODEL_NAME_INVALID",
    "NON_FINITE_VALUE",
    "PROTOCOL_VERSION",
    "REBUILD_COMMAND",
    "BackfillReport",
    "Coverage",
    "EmbeddingProtocolError",
    "EngramMirror",
    "KeywordHit",
    "MigrationReport",
    "MirrorCorrupt",
    "MirrorHealth",
    "MirrorDocument",
    "RestoreReport",
    "SyncReport",
    "VerifyReport",
    "catch_up",
    "check_model_name",
    "decode_embedding",
    "encode_embedding",
    "restore_from_mirror",
    "sync_mirror",
    "verify_mirror",
]
