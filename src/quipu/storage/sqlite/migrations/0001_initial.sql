-- Quipu SQLite schema, version 1. Times are integer microseconds since the Unix epoch (UTC).
-- Vectors are float32 blobs on the version row, so loading a scope is one sequential read.
-- tenant_id and the scope owner lead every index, as on the PostgreSQL backend.

CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE memory_versions (
    key             INTEGER PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    scope           TEXT NOT NULL,
    owner           TEXT NOT NULL,
    id              TEXT NOT NULL,
    version         INTEGER NOT NULL,
    is_current      INTEGER NOT NULL,
    project         TEXT,
    text            TEXT NOT NULL,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    confidence      REAL NOT NULL,
    source          TEXT NOT NULL,
    trust           TEXT NOT NULL,
    tags            TEXT NOT NULL,
    metadata        TEXT NOT NULL,
    aliases         TEXT NOT NULL,
    provenance      TEXT NOT NULL,
    observed_at     INTEGER,
    valid_at        INTEGER NOT NULL,
    invalid_at      INTEGER,
    valid_to        INTEGER,
    recorded_at     INTEGER NOT NULL,
    content_hash    TEXT NOT NULL,
    embedding_key   TEXT,
    embedding_model TEXT,
    vector          BLOB,
    terms           TEXT NOT NULL DEFAULT '',   -- BM25 index keys (stems of text + aliases)
    relation        TEXT NOT NULL,
    actor           TEXT NOT NULL,
    reason          TEXT,
    related_id      TEXT,
    UNIQUE (tenant_id, id, version)
);

CREATE INDEX memory_versions_scope_current
    ON memory_versions (tenant_id, scope, owner, is_current, recorded_at DESC, id DESC);

CREATE INDEX memory_versions_dedupe
    ON memory_versions (tenant_id, scope, owner, content_hash)
    WHERE is_current = 1;

CREATE TABLE memory_aliases (
    tenant_id TEXT NOT NULL,
    scope     TEXT NOT NULL,
    owner     TEXT NOT NULL,
    folded    TEXT NOT NULL,
    key       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, folded, key)
) WITHOUT ROWID;

-- Content-hash embedding cache: unchanged text is never embedded twice within a tenant.
CREATE INDEX memory_versions_embedding
    ON memory_versions (tenant_id, embedding_key)
    WHERE embedding_key IS NOT NULL;

-- One row per scope owner: the live-row count for the race-free quota (MEM-5) and a
-- generation number that tells an in-process vector cache another process wrote here.
CREATE TABLE scope_state (
    tenant_id  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    owner      TEXT NOT NULL,
    live_count INTEGER NOT NULL DEFAULT 0,
    generation INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, scope, owner)
) WITHOUT ROWID;
