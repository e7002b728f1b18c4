-- The key/value plane (issue 28, KV-1): one row per version of a key in a scope partition.
-- A set or delete appends the next version and ends the current one (ended_at), so history and
-- as_of reads work as for memories. value is JSON (NULL once erased). Keys compare in byte order
-- (COLLATE "C") so a prefix is a key range. Under Citus it is distributed by tenant_id,
-- colocated with memory_versions (migrate.DISTRIBUTED).

CREATE TABLE kv_entries (
    tenant_id   text NOT NULL,
    scope       text NOT NULL,
    owner       text NOT NULL,
    key         text COLLATE "C" NOT NULL,
    version     integer NOT NULL,
    value       text,                      -- JSON as the caller sent it (key order kept)
    status      text NOT NULL,             -- set, deleted or erased
    actor       text,
    surface     text NOT NULL,
    agent_id    text,
    reason      text,
    recorded_at timestamptz NOT NULL,
    ended_at    timestamptz,
    is_current  boolean NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, key, version)
);

CREATE INDEX kv_entries_current ON kv_entries (tenant_id, scope, owner, key) WHERE is_current;
