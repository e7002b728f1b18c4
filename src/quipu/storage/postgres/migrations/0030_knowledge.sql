-- The knowledge plane (issue 25): versioned tenant articles (KNOW-1), their per-tenant write
-- generation (the search snapshot's key), the merged-recall ledger and the references clients
-- report (RECALL-9), recall usage events and each memory's recall signal and graduation stamp
-- (RECALL-6, GRAD-1). Times are integer microseconds since the epoch (UTC), as on SQLite.
-- Every table leads with tenant_id: under Citus they are distributed by it (migrate.DISTRIBUTED).

CREATE TABLE knowledge_versions (
    tenant_id     text NOT NULL,
    id            text NOT NULL,
    version       integer NOT NULL,
    owner         text NOT NULL,
    title         text NOT NULL,
    title_key     text NOT NULL,           -- folded title: unique per tenant among live articles
    body          text NOT NULL,
    category      text,
    tags          text NOT NULL,           -- JSON list
    project       text,
    visibility    text NOT NULL,           -- tenant or owner
    status        text NOT NULL,           -- draft, published or erased
    source        text NOT NULL,           -- explicit or graduated
    related_id    text,
    memory_id     text,
    content_hash  text NOT NULL,
    vector        bytea,                    -- float32, the store's pinned model
    recorded_at   bigint NOT NULL,
    actor         text NOT NULL,
    relation      text NOT NULL,
    reason        text,
    is_current    boolean NOT NULL,
    PRIMARY KEY (tenant_id, id, version)
);

CREATE UNIQUE INDEX knowledge_live_title ON knowledge_versions (tenant_id, title_key)
    WHERE is_current AND status <> 'erased';
CREATE INDEX knowledge_live_hash ON knowledge_versions (tenant_id, content_hash)
    WHERE is_current;
CREATE INDEX knowledge_current ON knowledge_versions (tenant_id, is_current);

CREATE TABLE knowledge_state (
    tenant_id  text NOT NULL PRIMARY KEY,
    generation bigint NOT NULL
);

CREATE TABLE recall_ledger (
    tenant_id  text NOT NULL,
    recall_id  text NOT NULL,
    subject    text NOT NULL,
    items      text NOT NULL,              -- JSON list of surfaced ids
    created_at bigint NOT NULL,
    PRIMARY KEY (tenant_id, recall_id)
);

CREATE TABLE recall_references (
    tenant_id text NOT NULL,
    recall_id text NOT NULL,
    item_id   text NOT NULL,
    subject   text NOT NULL,
    at        bigint NOT NULL,
    PRIMARY KEY (tenant_id, recall_id, item_id)
);

CREATE TABLE usage_events (
    tenant_id text NOT NULL,
    event_id  text NOT NULL,
    memory_id text NOT NULL,
    recall_id text NOT NULL,
    score     double precision NOT NULL,
    relevant  boolean NOT NULL,
    at        bigint NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);

CREATE TABLE memory_usage (
    tenant_id      text NOT NULL,
    memory_id      text NOT NULL,
    recall_count   bigint NOT NULL,
    last_bumped_at bigint,
    graduated_at   bigint,
    article_id     text,
    re_scoped      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, memory_id)
);

CREATE INDEX memory_usage_hot ON memory_usage (tenant_id, recall_count)
    WHERE graduated_at IS NULL;
