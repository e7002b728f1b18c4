-- The documents plane (issue 28, DOC-1): a document's record, its verbatim chunks (a refused
-- chunk keeps only its offsets and why), and one corpus row per scope partition pinning the
-- embedding model and dimension of its chunk vectors; generation counts the corpus's changes
-- (a search's in-process index reloads when it moved).

CREATE TABLE documents (
    tenant_id       TEXT NOT NULL,
    scope           TEXT NOT NULL,
    owner           TEXT NOT NULL,
    document_id     TEXT NOT NULL,
    title           TEXT NOT NULL,
    media_type      TEXT NOT NULL,
    metadata        TEXT NOT NULL,          -- JSON object
    chars           INTEGER NOT NULL,
    chunks          INTEGER NOT NULL,
    status          TEXT NOT NULL,          -- active or deleted
    version         INTEGER NOT NULL,
    actor           TEXT NOT NULL,
    surface         TEXT NOT NULL,
    agent_id        TEXT,
    reason          TEXT,
    recorded_at     INTEGER NOT NULL,
    embedding_model TEXT NOT NULL,
    withheld        TEXT NOT NULL,          -- JSON list of the chunks not served
    PRIMARY KEY (tenant_id, scope, owner, document_id)
);

CREATE TABLE doc_chunks (
    key         INTEGER PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    document_id TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    start_at    INTEGER NOT NULL,
    end_at      INTEGER NOT NULL,
    text        TEXT NOT NULL,
    status      TEXT NOT NULL,              -- active, quarantined or refused
    reason      TEXT,
    vector      BLOB                        -- float32, unit length; NULL unless active
);

CREATE UNIQUE INDEX doc_chunks_seq ON doc_chunks (tenant_id, scope, owner, document_id, seq);

CREATE TABLE doc_corpora (
    tenant_id  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    owner      TEXT NOT NULL,
    model_id   TEXT NOT NULL,
    dimension  INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner)
);
