-- Versioned, reversible entity merges (issue 26, GRAPH-1). Merging entity B into A keeps A's
-- state before the merge as an old version in graph_entity_versions (A's current state is the
-- row in graph_entities, one version later) and records in graph_merges B as it was and which
-- facts and mentions moved, so a revert can put them back. tenant_id leads every key.

CREATE TABLE graph_entity_versions (
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    version     INTEGER NOT NULL,
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    aliases     TEXT NOT NULL,             -- JSON list of names
    first_seen  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL,
    change      TEXT NOT NULL,             -- what ended this version: merge or revert
    merge_id    TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, entity_id, version)
);

CREATE TABLE graph_merges (
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    merge_id    TEXT NOT NULL,
    kept_id     TEXT NOT NULL,
    merged_id   TEXT NOT NULL,
    kept_before TEXT NOT NULL,             -- JSON: the kept entity before the merge
    merged      TEXT NOT NULL,             -- JSON: the merged entity as it was
    moved       TEXT NOT NULL,             -- JSON: fact ids and mentions that moved
    merged_at   INTEGER NOT NULL,
    merged_by   TEXT,
    reason      TEXT,
    reverted_at INTEGER,
    reverted_by TEXT,
    PRIMARY KEY (tenant_id, scope, owner, merge_id)
);

CREATE INDEX graph_merges_kept ON graph_merges (tenant_id, scope, owner, kept_id);
