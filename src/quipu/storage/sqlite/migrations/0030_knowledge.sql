-- The knowledge plane (issue 25): versioned tenant articles (KNOW-1), their per-tenant write
-- generation (the search snapshot's key), the merged-recall ledger and the references clients
-- report (RECALL-9), recall usage events and each memory's recall signal and graduation stamp
-- (RECALL-6, GRAD-1). Times are integer microseconds since the epoch (UTC).

CREATE TABLE knowledge_versions (
    tenant_id     TEXT NOT NULL,
    id            TEXT NOT NULL,
    version       INTEGER NOT NULL,
    owner         TEXT NOT NULL,
    title         TEXT NOT NULL,
    title_key     TEXT NOT NULL,           -- folded title: unique per tenant among live articles
    body          TEXT NOT NULL,
    category      TEXT,
    tags          TEXT NOT NULL,           -- JSON list
    project       TEXT,
    visibility    TEXT NOT NULL,           -- tenant or owner
    status        TEXT NOT NULL,           -- draft, published or erased
    source        TEXT NOT NULL,           -- explicit or graduated
    related_id    TEXT,
    memory_id     TEXT,
    content_hash  TEXT NOT NULL,
    vector        BLOB,                    -- float32, the store's pinned model
    recorded_at   INTEGER NOT NULL,
    actor         TEXT NOT NULL,
    relation      TEXT NOT NULL,
    reason        TEXT,
    is_current    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, id, version)
);

CREATE UNIQUE INDEX knowledge_live_title ON knowledge_versions (tenant_id, title_key)
    WHERE is_current = 1 AND status <> 'erased';
CREATE INDEX knowledge_live_hash ON knowledge_versions (tenant_id, content_hash)
    WHERE is_current = 1;
CREATE INDEX knowledge_current ON knowledge_versions (tenant_id, is_current);

CREATE TABLE knowledge_state (
    tenant_id  TEXT NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL
);

CREATE TABLE recall_ledger (
    tenant_id  TEXT NOT NULL,
    recall_id  TEXT NOT NULL,
    subject    TEXT NOT NULL,
    items      TEXT NOT NULL,              -- JSON list of surfaced ids
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, recall_id)
);

CREATE TABLE recall_references (
    tenant_id TEXT NOT NULL,
    recall_id TEXT NOT NULL,
    item_id   TEXT NOT NULL,
    subject   TEXT NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, recall_id, item_id)
);

CREATE TABLE usage_events (
    tenant_id TEXT NOT NULL,
    event_id  TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    recall_id TEXT NOT NULL,
    score     REAL NOT NULL,
    relevant  INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);

CREATE TABLE memory_usage (
    tenant_id      TEXT NOT NULL,
    memory_id      TEXT NOT NULL,
    recall_count   INTEGER NOT NULL,
    last_bumped_at INTEGER,
    graduated_at   INTEGER,
    article_id     TEXT,
    re_scoped      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, memory_id)
);

CREATE INDEX memory_usage_hot ON memory_usage (tenant_id, recall_count)
    WHERE graduated_at IS NULL;
