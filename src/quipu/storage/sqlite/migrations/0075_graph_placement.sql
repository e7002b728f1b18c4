-- Placement by ontology (issue 26, GRAPH-2). Each row is one version of a tenant's placement
-- policy: which entity types' facts live in the tenant scope, the names known to be of each
-- type, and the isolated callers (a JSON body). A declaration appends a version; nothing is
-- edited, so the policy any decision used can be read back. tenant_id leads the key.

CREATE TABLE graph_placements (
    tenant_id   TEXT NOT NULL,
    version     INTEGER NOT NULL,
    body        TEXT NOT NULL,
    declared_by TEXT,
    declared_at INTEGER NOT NULL,
    reason      TEXT,
    PRIMARY KEY (tenant_id, version)
);
