"""The mirror file's tables: engramai 2.1.0's own schema, with ``memory_embeddings`` per protocol v2.

The file must look to engramai like one of its own. ``engram.store.SQLiteStore`` runs
``CREATE ... IF NOT EXISTS`` for every table, index and trigger below when it opens a file, so
creating them first with the same names and columns makes its set-up a no-op, and its reads
(``SELECT m.* FROM memories m JOIN memories_fts f ...``, ``access_log``, ``hebbian_links``) and
writes work on our rows. Two differences are deliberate:

- ``memory_embeddings`` has the Embedding Protocol v2 shape (engramai 2.1.0 would create a v1 table
  with a JSON ``embedding`` keyed by ``memory_id`` alone); engramai's FTS-only recall never reads it.
- ``engram_meta`` also holds ``embedding_protocol_version = '2'`` next to engramai's
  ``schema_version = '1'``.
- ``memories_fts`` stems words (:data:`FTS_TOKENIZER`); engramai's has no stemmer. An index built
  without it (by engramai, or by an older brain) is rebuilt when the file is opened.
"""

from __future__ import annotations

import re

#: engramai's schema version (engram.migrate.SCHEMA_VERSION), written so it does not seed its own
ENGRAM_SCHEMA_VERSION = "1"

TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS engram_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS memories (
        id TEXT PRIMARY KEY,
        content TEXT NOT NULL,
        summary TEXT DEFAULT '',
        tokens TEXT DEFAULT '',
        memory_type TEXT NOT NULL,
        layer TEXT NOT NULL,
        created_at REAL NOT NULL,
        working_strength REAL NOT NULL DEFAULT 1.0,
        core_strength REAL NOT NULL DEFAULT 0.0,
        importance REAL NOT NULL DEFAULT 0.3,
        pinned INTEGER NOT NULL DEFAULT 0,
        consolidation_count INTEGER NOT NULL DEFAULT 0,
        last_consolidated REAL,
        source TEXT DEFAULT '',
        contradicts TEXT DEFAULT '',
        contradicted_by TEXT DEFAULT '',
        namespace TEXT NOT NULL DEFAULT 'default',
        metadata TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS access_log (
        memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        accessed_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS graph_links (
        memory_id TEXT REFERENCES memories(id) ON DELETE CASCADE,
        node_id TEXT NOT NULL,
        relation TEXT DEFAULT ''
    )""",
    """CREATE TABLE IF NOT EXISTS hebbian_links (
        source_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        target_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        strength REAL NOT NULL DEFAULT 1.0,
        coactivation_count INTEGER NOT NULL DEFAULT 0,
        namespace TEXT NOT NULL DEFAULT 'default',
        created_at REAL NOT NULL,
        direction TEXT DEFAULT 'bidirectional',
        temporal_forward INTEGER DEFAULT 0,
        temporal_backward INTEGER DEFAULT 0,
        PRIMARY KEY (source_id, target_id)
    )""",
    """CREATE TABLE IF NOT EXISTS entities (
        id          TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        entity_type TEXT NOT NULL,
        namespace   TEXT NOT NULL DEFAULT 'default',
        metadata    TEXT,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS entity_relations (
        id          TEXT PRIMARY KEY,
        source_id   TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        target_id   TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        relation    TEXT NOT NULL,
        confidence  REAL NOT NULL DEFAULT 1.0,
        source      TEXT DEFAULT '',
        namespace   TEXT NOT NULL DEFAULT 'default',
        created_at  REAL NOT NULL,
        metadata    TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS memory_entities (
        memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        entity_id TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        role      TEXT DEFAULT 'mentioned',
        PRIMARY KEY (memory_id, entity_id)
    )""",
    """CREATE TABLE IF NOT EXISTS engram_acl (
        agent_id   TEXT NOT NULL,
        namespace  TEXT NOT NULL,
        permission TEXT NOT NULL,
        granted_by TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, namespace)
    )""",
)

#: the Embedding Protocol v2 table and its index (also used by the v1 -> v2 migration)
EMBEDDINGS_V2: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS memory_embeddings (
        memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        embedding BLOB NOT NULL,
        dimensions INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (memory_id, model)
    )""",
    "CREATE INDEX IF NOT EXISTS idx_embeddings_model ON memory_embeddings(model)",
)

INDEXES: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS idx_access_log_mid ON access_log(memory_id)",
    "CREATE INDEX IF NOT EXISTS idx_graph_links_mid ON graph_links(memory_id)",
    "CREATE INDEX IF NOT EXISTS idx_graph_links_nid ON graph_links(node_id)",
    "CREATE INDEX IF NOT EXISTS idx_hebbian_source ON hebbian_links(source_id)",
    "CREATE INDEX IF NOT EXISTS idx_hebbian_target ON hebbian_links(target_id)",
    "CREATE INDEX IF NOT EXISTS idx_hebbian_namespace ON hebbian_links(namespace)",
    "CREATE INDEX IF NOT EXISTS idx_memories_type ON memories(memory_type)",
    "CREATE INDEX IF NOT EXISTS idx_memories_namespace ON memories(namespace)",
    "CREATE INDEX IF NOT EXISTS idx_memories_created ON memories(created_at)",
    "CREATE INDEX IF NOT EXISTS idx_entities_name ON entities(name)",
    "CREATE INDEX IF NOT EXISTS idx_entities_type ON entities(entity_type)",
    "CREATE INDEX IF NOT EXISTS idx_entities_namespace ON entities(namespace)",
    "CREATE INDEX IF NOT EXISTS idx_relations_source ON entity_relations(source_id)",
    "CREATE INDEX IF NOT EXISTS idx_relations_target ON entity_relations(target_id)",
    "CREATE INDEX IF NOT EXISTS idx_relations_type ON entity_relations(relation)",
)

#: the FTS5 tokenizer: Unicode word splitting (engramai's own choice) with the Porter stemmer on top, so
#: "peanut" finds "peanuts" and "running" finds "runs". engramai creates ``memories_fts`` only when
#: it is absent and queries it with ``MATCH``, which runs the query through the table's own tokenizer,
#: so it reads a stemmed index as well as its own.
FTS_TOKENIZER = "porter unicode61"

#: external-content FTS5 over ``memories.content`` and the triggers that keep it in step
FTS: tuple[str, ...] = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
    f"content, content=memories, content_rowid=rowid, tokenize='{FTS_TOKENIZER}')",
    """CREATE TRIGGER IF NOT EXISTS memories_fts_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, content) VALUES (new.rowid, new.content);
    END""",
    """CREATE TRIGGER IF NOT EXISTS memories_fts_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    END""",
    """CREATE TRIGGER IF NOT EXISTS memories_fts_au AFTER UPDATE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
        INSERT INTO memories_fts(rowid, content) VALUES (new.rowid, new.content);
    END""",
)

#: a counter of changes that can alter recall (vectors written or removed, a row's metadata or namespace
#: changed, a row deleted), kept by triggers so that a cached matrix survives other writers' unrelated
#: commits, e.g. engram logging an access on every recall
CHANGES_KEY = "brain_vector_changes"
_BUMP = f"UPDATE engram_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = '{CHANGES_KEY}';"
CHANGE_TRIGGERS: tuple[str, ...] = (
    f"CREATE TRIGGER IF NOT EXISTS brain_vectors_ai AFTER INSERT ON memory_embeddings BEGIN {_BUMP} END",
    f"CREATE TRIGGER IF NOT EXISTS brain_vectors_au AFTER UPDATE ON memory_embeddings BEGIN {_BUMP} END",
    f"CREATE TRIGGER IF NOT EXISTS brain_vectors_ad AFTER DELETE ON memory_embeddings BEGIN {_BUMP} END",
    f"CREATE TRIGGER IF NOT EXISTS brain_memories_ad AFTER DELETE ON memories BEGIN {_BUMP} END",
    f"CREATE TRIGGER IF NOT EXISTS brain_memories_au AFTER UPDATE OF metadata, namespace ON memories BEGIN {_BUMP} END",
)

#: each of our rows' content hash (:mod:`brain.features.mirror.fingerprint`), written with the row; engramai
#: never reads it. Any change to a row's text, metadata or vectors that does not write a new hash (engram's
#: own writes, a backfill) drops it, so a hash is there only while it describes the row. Files written
#: before this table existed get it, empty, when opened: their rows are compared in full once.
CONTENT_HASHES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS brain_content_hashes (
        memory_id TEXT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        hash BLOB NOT NULL
    )""",
    """CREATE TRIGGER IF NOT EXISTS brain_hash_memories_ai AFTER INSERT ON memories BEGIN
        DELETE FROM brain_content_hashes WHERE memory_id = new.id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS brain_hash_memories_au AFTER UPDATE OF id, content, metadata ON memories BEGIN
        DELETE FROM brain_content_hashes WHERE memory_id IN (old.id, new.id);
    END""",
    """CREATE TRIGGER IF NOT EXISTS brain_hash_vectors_ai AFTER INSERT ON memory_embeddings BEGIN
        DELETE FROM brain_content_hashes WHERE memory_id = new.memory_id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS brain_hash_vectors_au AFTER UPDATE ON memory_embeddings BEGIN
        DELETE FROM brain_content_hashes WHERE memory_id IN (old.memory_id, new.memory_id);
    END""",
    """CREATE TRIGGER IF NOT EXISTS brain_hash_vectors_ad AFTER DELETE ON memory_embeddings BEGIN
        DELETE FROM brain_content_hashes WHERE memory_id = old.memory_id;
    END""",
)

#: columns engramai's migrations add to older files; added here too when a file lacks them
MEMORY_COLUMNS_ADDED = (
    ("contradicts", "TEXT DEFAULT ''"),
    ("contradicted_by", "TEXT DEFAULT ''"),
    ("metadata", "TEXT"),
    ("namespace", "TEXT NOT NULL DEFAULT 'default'"),
)
HEBBIAN_COLUMNS_ADDED = (
    ("direction", "TEXT DEFAULT 'bidirectional'"),
    ("temporal_forward", "INTEGER DEFAULT 0"),
    ("temporal_backward", "INTEGER DEFAULT 0"),
)


def fts_is_current(create_sql: str | None) -> bool:
    """True when ``memories_fts`` was created with :data:`FTS_TOKENIZER` (from its ``sqlite_master.sql``)."""
    if not create_sql:
        return False
    found = re.search(r"tokenize\s*=\s*['\"]([^'\"]*)['\"]", create_sql)
    return found is not None and " ".join(found.group(1).split()) == FTS_TOKENIZER
