-- The key/value plane (issue 28, KV-1): one row per version of a key in a scope partition.
-- A set or delete appends the next version and ends the current one (ended_at), so history and
-- as_of reads work as for memories. value is JSON text (NULL once erased).

CREATE TABLE kv_entries (
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    key         TEXT NOT NULL,
    version     INTEGER NOT NULL,
    value       TEXT,
    status      TEXT NOT NULL,             -- set, deleted or erased
    actor       TEXT,
    surface     TEXT NOT NULL,
    agent_id    TEXT,
    reason      TEXT,
    recorded_at INTEGER NOT NULL,
    ended_at    INTEGER,
    is_current  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, key, version)
);

CREATE INDEX kv_entries_current ON kv_entries (tenant_id, scope, owner, key)
    WHERE is_current = 1;
