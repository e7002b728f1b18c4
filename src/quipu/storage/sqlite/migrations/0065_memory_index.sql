-- The compiled memory index (issue 24, CONSOL-1/2): one row per version of a scope's index.
-- body is JSON: the active entries, the archive and the ids the rewrite expired (CONSOL-5).
-- index_sweep_marks: how far the consolidation sweep has looked at each tenant's writes.
-- Times are integer microseconds since the epoch (UTC).

CREATE TABLE memory_index_versions (
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    version     INTEGER NOT NULL,
    built_at    INTEGER NOT NULL,
    source_mark INTEGER,
    reason      TEXT,
    body        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, version)
);

CREATE TABLE index_sweep_marks (
    tenant_id TEXT NOT NULL,
    swept_to  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id)
);

-- The sweep finds a tenant's scopes written since its mark without reading the whole table.
CREATE INDEX memory_versions_tenant_recorded ON memory_versions (tenant_id, recorded_at);

-- Expiry reads when each index entry was last recalled (CONSOL-5).
CREATE INDEX usage_events_memory ON usage_events (tenant_id, memory_id, at);
