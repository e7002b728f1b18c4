-- Quipu PostgreSQL schema, version 1.
--
-- Every tenant table carries tenant_id as its first column and leads every primary key and
-- btree/GIN index with it: it is the Citus distribution column (docs/scale-out.md). No foreign
-- keys, so no constraint can ever join two tenants. Reference tables (replicated, not
-- distributed under Citus): store_meta, tenant_keys.
--
-- The vector index depends on the pinned embedding dimension, so it is not created here but
-- when the store's embedding pin is first recorded (PostgresStore.pin_embedding).

CREATE EXTENSION IF NOT EXISTS vector;

CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE TABLE store_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- A small integer per tenant. A version's storage key is number * 2^40 + a global sequence, so
-- the tenant (and with it the shard) of any key is known without a lookup by key alone.
CREATE SEQUENCE tenant_number_seq;

CREATE TABLE tenant_keys (
    tenant_id  text PRIMARY KEY,
    number     bigint NOT NULL DEFAULT nextval('tenant_number_seq'),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (number)
);

CREATE SEQUENCE memory_key_seq;

CREATE TABLE memory_versions (
    tenant_id       text NOT NULL,
    key             bigint NOT NULL,
    scope           text NOT NULL,
    owner           text NOT NULL,
    id              text NOT NULL,
    version         integer NOT NULL,
    is_current      boolean NOT NULL,
    project         text,
    text            text NOT NULL,
    kind            text NOT NULL,
    status          text NOT NULL,
    confidence      double precision NOT NULL,
    source          text NOT NULL,
    trust           text NOT NULL,
    tags            text[] NOT NULL,
    metadata        json NOT NULL,          -- json, not jsonb: kept byte for byte (lossless)
    aliases         text[] NOT NULL,
    provenance      json NOT NULL,
    observed_at     timestamptz,
    valid_at        timestamptz NOT NULL,
    invalid_at      timestamptz,
    valid_to        timestamptz,            -- end of validity for as_of (core.versions.valid_to)
    recorded_at     timestamptz NOT NULL,
    content_hash    text NOT NULL,
    embedding_key   text,
    embedding_model text,
    vector          vector,
    terms           tsvector NOT NULL,      -- BM25 keys (quipu.retrieval.bm25.tokenize), positions kept
    term_count      integer NOT NULL,       -- document length for BM25
    relation        text NOT NULL,
    actor           text NOT NULL,
    reason          text,
    related_id      text,
    PRIMARY KEY (tenant_id, key),
    UNIQUE (tenant_id, id, version)
);

-- Keep rows whole: a version with a 384-d vector is ~2.2 kB, just over the default 2 kB TOAST
-- threshold, which would move its text, terms or vector out of line and cost one TOAST lookup
-- per row on every scan. Only rows that cannot fit a page are toasted; the vector goes out of
-- line last (MAIN).
ALTER TABLE memory_versions SET (toast_tuple_target = 8160);

ALTER TABLE memory_versions ALTER COLUMN vector SET STORAGE MAIN;

CREATE INDEX memory_versions_scope_current
    ON memory_versions (tenant_id, scope, owner, is_current, recorded_at DESC, id DESC);

CREATE INDEX memory_versions_dedupe
    ON memory_versions (tenant_id, scope, owner, content_hash)
    WHERE is_current;

-- Content-hash embedding cache: unchanged text is never embedded twice within a tenant.
CREATE INDEX memory_versions_embedding
    ON memory_versions (tenant_id, embedding_key)
    WHERE embedding_key IS NOT NULL;

-- The backfill queue: current versions stored without a vector.
CREATE INDEX memory_versions_unembedded
    ON memory_versions (tenant_id, key)
    WHERE embedding_key IS NULL AND is_current;

-- Full text: tenant, scope and owner lead the GIN index too (btree_gin).
CREATE INDEX memory_versions_terms
    ON memory_versions USING gin (tenant_id, scope, owner, terms);

CREATE TABLE memory_aliases (
    tenant_id text NOT NULL,
    scope     text NOT NULL,
    owner     text NOT NULL,
    folded    text NOT NULL,
    key       bigint NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, folded, key)
);

-- One row per scope owner. Writers lock it (SELECT ... FOR UPDATE), which serialises the
-- live-row quota and the exact-duplicate check across every process (MEM-5, MEM-6). It also
-- holds the scope's size (which kNN path to take) and its BM25 statistics.
CREATE TABLE scope_state (
    tenant_id     text NOT NULL,
    scope         text NOT NULL,
    owner         text NOT NULL,
    live_count    bigint NOT NULL DEFAULT 0,
    current_count bigint NOT NULL DEFAULT 0,
    version_count bigint NOT NULL DEFAULT 0,
    term_total    bigint NOT NULL DEFAULT 0,
    terms_tracked boolean NOT NULL DEFAULT false,  -- scope_terms kept for this scope
    PRIMARY KEY (tenant_id, scope, owner)
);

-- BM25 document frequency per scope and term, over every version in the scope (as the SQLite
-- backend counts it), kept only for large scopes (scope_state.terms_tracked; small scopes count
-- at query time, which is cheap there and keeps their writes cheap). Lets a text search know
-- each query term's weight without counting matches, and prune rows that cannot reach the
-- top k (quipu.storage.postgres.search).
CREATE TABLE scope_terms (
    tenant_id text NOT NULL,
    scope     text NOT NULL,
    owner     text NOT NULL,
    lexeme    text NOT NULL,
    df        bigint NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, lexeme)
);
