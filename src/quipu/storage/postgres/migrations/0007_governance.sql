-- The governance plane (issue 22): legal holds (LIFE-4), snapshots (LIFE-8), the project
-- registry (SCOPE-6), and an index for tenant-wide reads (the review queue, LIFE-5/6, and
-- superadmin oversight, SCOPE-8). Every table leads with tenant_id: under Citus they are
-- distributed by it, colocated with memory_versions (migrate.DISTRIBUTED).

CREATE TABLE legal_holds (
    tenant_id      text NOT NULL,
    hold_id        text NOT NULL,
    kind           text NOT NULL,          -- memory, subject or tenant
    target         text NOT NULL,          -- a memory id, an end user id or the tenant id
    reason         text NOT NULL,
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL,
    released_by    text,
    released_at    timestamptz,
    release_reason text,
    PRIMARY KEY (tenant_id, hold_id)
);

CREATE INDEX legal_holds_active ON legal_holds (tenant_id, kind, target)
    WHERE released_at IS NULL;

CREATE TABLE snapshots (
    tenant_id   text NOT NULL,
    snapshot_id text NOT NULL,
    label       text,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL,
    members     json NOT NULL,             -- [[memory id, version], ...]
    PRIMARY KEY (tenant_id, snapshot_id)
);

CREATE TABLE projects (
    tenant_id  text NOT NULL,
    project_id text NOT NULL,
    name       text,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, project_id)
);

CREATE INDEX memory_versions_tenant_current
    ON memory_versions (tenant_id, recorded_at DESC, id DESC)
    WHERE is_current;

-- An erase drops the reasons of the audit lines about the erased families: find them by target
-- id without reading the tenant's whole log (btree_gin lets tenant_id lead the GIN index).
CREATE INDEX audit_log_targets ON audit_log USING gin (tenant_id, target_ids)
    WHERE reason IS NOT NULL;
