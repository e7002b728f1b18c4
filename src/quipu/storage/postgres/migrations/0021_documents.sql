-- The documents plane (issue 28, DOC-1): a document's record, its verbatim chunks (a refused
-- chunk keeps only its offsets and why), and one corpus row per scope partition pinning the
-- embedding model and dimension of its chunk vectors; generation counts the corpus's changes
-- (a search's in-process index reloads when it moved). Every key leads with tenant_id: under
-- Citus the tables are distributed by it, colocated with memory_versions.

CREATE TABLE documents (
    tenant_id       text NOT NULL,
    scope           text NOT NULL,
    owner           text NOT NULL,
    document_id     text NOT NULL,
    title           text NOT NULL,
    media_type      text NOT NULL,
    metadata        text NOT NULL,          -- JSON object
    chars           integer NOT NULL,
    chunks          integer NOT NULL,
    status          text NOT NULL,          -- active or deleted
    version         integer NOT NULL,
    actor           text NOT NULL,
    surface         text NOT NULL,
    agent_id        text,
    reason          text,
    recorded_at     timestamptz NOT NULL,
    embedding_model text NOT NULL,
    withheld        text NOT NULL,          -- JSON list of the chunks not served
    PRIMARY KEY (tenant_id, scope, owner, document_id)
);

CREATE TABLE doc_chunks (
    tenant_id   text NOT NULL,
    key         bigserial,
    scope       text NOT NULL,
    owner       text NOT NULL,
    document_id text NOT NULL,
    seq         integer NOT NULL,
    start_at    integer NOT NULL,
    end_at      integer NOT NULL,
    text        text NOT NULL,
    status      text NOT NULL,              -- active, quarantined or refused
    reason      text,
    vector      bytea,                      -- float32, unit length; NULL unless active
    PRIMARY KEY (tenant_id, key)
);

CREATE UNIQUE INDEX doc_chunks_seq ON doc_chunks (tenant_id, scope, owner, document_id, seq);

CREATE TABLE doc_corpora (
    tenant_id  text NOT NULL,
    scope      text NOT NULL,
    owner      text NOT NULL,
    model_id   text NOT NULL,
    dimension  integer NOT NULL,
    generation bigint NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner)
);
