-- The governance plane (issue 22): legal holds (LIFE-4), snapshots (LIFE-8), the project
-- registry (SCOPE-6), and indexes for tenant-wide reads (the review queue, LIFE-5/6, and
-- superadmin oversight, SCOPE-8).

CREATE TABLE legal_holds (
    tenant_id      TEXT NOT NULL,
    hold_id        TEXT NOT NULL,
    kind           TEXT NOT NULL,          -- memory, subject or tenant
    target         TEXT NOT NULL,          -- a memory id, an end user id or the tenant id
    reason         TEXT NOT NULL,
    created_by     TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    released_by    TEXT,
    released_at    INTEGER,
    release_reason TEXT,
    PRIMARY KEY (tenant_id, hold_id)
);

CREATE INDEX legal_holds_active ON legal_holds (tenant_id, kind, target)
    WHERE released_at IS NULL;

CREATE TABLE snapshots (
    tenant_id   TEXT NOT NULL,
    snapshot_id TEXT NOT NULL,
    label       TEXT,
    created_by  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    members     TEXT NOT NULL,             -- JSON [[memory id, version], ...]
    PRIMARY KEY (tenant_id, snapshot_id)
);

CREATE TABLE projects (
    tenant_id  TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name       TEXT,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, project_id)
);

CREATE INDEX memory_versions_tenant_current
    ON memory_versions (tenant_id, recorded_at DESC, id DESC)
    WHERE is_current = 1;

-- An erase drops the reasons of the audit lines about the erased families: only lines with a
-- reason are read (SQLite cannot index the ids inside the JSON array).
CREATE INDEX audit_log_reasons ON audit_log (tenant_id, seq) WHERE reason IS NOT NULL;
