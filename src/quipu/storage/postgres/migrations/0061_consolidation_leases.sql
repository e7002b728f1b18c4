-- The per-scope consolidation lease (issue 24, CONSOL-4): one row per scope whose index was
-- ever built. holder/expires_at: who runs a consolidation now and until when (NULL when none);
-- token: the fencing token, up by one per grant; finished_at: when the last run released it
-- (the cooldown counts from there). Under Citus distributed by tenant_id, colocated with
-- memory_versions (migrate.DISTRIBUTED).

CREATE TABLE consolidation_leases (
    tenant_id   text NOT NULL,
    scope       text NOT NULL,
    owner       text NOT NULL,
    holder      text,
    token       bigint NOT NULL,
    expires_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (tenant_id, scope, owner)
);
