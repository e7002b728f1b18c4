-- Versioned, reversible entity merges (issue 26, GRAPH-1). Merging entity B into A keeps A's
-- state before the merge as an old version in graph_entity_versions (A's current state is the
-- row in graph_entities, one version later) and records in graph_merges B as it was and which
-- facts and mentions moved, so a revert can put them back. tenant_id leads every key; under
-- Citus both tables are distributed by tenant_id (migrate.DISTRIBUTED).

CREATE TABLE graph_entity_versions (
    tenant_id   text NOT NULL,
    scope       text NOT NULL,
    owner       text NOT NULL,
    entity_id   text NOT NULL,
    version     integer NOT NULL,
    name        text NOT NULL,
    type        text NOT NULL,
    aliases     text NOT NULL,             -- JSON list of names
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    change      text NOT NULL,             -- what ended this version: merge or revert
    merge_id    text NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, entity_id, version)
);

CREATE TABLE graph_merges (
    tenant_id   text NOT NULL,
    scope       text NOT NULL,
    owner       text NOT NULL,
    merge_id    text NOT NULL,
    kept_id     text NOT NULL,
    merged_id   text NOT NULL,
    kept_before text NOT NULL,             -- JSON: the kept entity before the merge
    merged      text NOT NULL,             -- JSON: the merged entity as it was
    moved       text NOT NULL,             -- JSON: fact ids and mentions that moved
    merged_at   timestamptz NOT NULL,
    merged_by   text,
    reason      text,
    reverted_at timestamptz,
    reverted_by text,
    PRIMARY KEY (tenant_id, scope, owner, merge_id)
);

CREATE INDEX graph_merges_kept ON graph_merges (tenant_id, scope, owner, kept_id);
