"""Portable AI Memory (PAM) 1.0: export the store's memories and conversations, and import them back
or from another PAM producer.

``export_pam(store, out_dir)`` writes ``memory-store.json``, ``embeddings.json`` (unless
``embeddings=False``) and one ``conversations/<file>.json`` per conversation (unless
``conversations=False``); ``import_pam(store, path)`` reads such an export, validated whole before
anything is written. What maps to what, and the import rules, are in docs/pam.md.

Modules: ``spec`` (PAM's names and deterministic operations), ``keys`` (brain metadata keys carrying
PAM-only fields), ``problems`` (problems by file and JSON path; schema checks), ``memory_mapping``,
``conversation_mapping``, ``embedding_mapping`` (brain <-> PAM, both directions, per kind), ``read``
(files and their validation), ``export``, ``importer``, ``reports``.
"""

from brain.features.pam.conversation_mapping import (
    ConversationItems,
    conversation_to_pam,
    foreign_conversation_id,
    pam_to_conversation,
)
from brain.features.pam.export import default_owner_id, export_pam
from brain.features.pam.importer import import_pam
from brain.features.pam.memory_mapping import memory_to_pam, pam_to_memory
from brain.features.pam.read import ConversationFile, PamFiles, read_pam
from brain.features.pam.reports import ExportReport, ImportReport
from brain.features.pam.spec import (
    CONVERSATIONS_DIR,
    EMBEDDINGS_FILE,
    MAX_NESTING,
    MEMORY_STORE_FILE,
    SCHEMA_VERSION,
    content_hash,
    integrity_checksum,
    normalize_content,
    pam_tag,
    pam_tags,
)

__all__ = [
    "CONVERSATIONS_DIR",
    "EMBEDDINGS_FILE",
    "MAX_NESTING",
    "MEMORY_STORE_FILE",
    "SCHEMA_VERSION",
    "ConversationFile",
    "ConversationItems",
    "ExportReport",
    "ImportReport",
    "PamFiles",
    "content_hash",
    "conversation_to_pam",
    "default_owner_id",
    "export_pam",
    "foreign_conversation_id",
    "import_pam",
    "integrity_checksum",
    "memory_to_pam",
    "normalize_content",
    "pam_tag",
    "pam_tags",
    "pam_to_conversation",
    "pam_to_memory",
    "read_pam",
]
