-- The per-scope consolidation lease (issue 24, CONSOL-4): one row per scope whose index was
-- ever built. holder/expires_at: who runs a consolidation now and until when (NULL when none);
-- token: the fencing token, up by one per grant; finished_at: when the last run released it
-- (the cooldown counts from there). Times are integer microseconds since the epoch (UTC).

CREATE TABLE consolidation_leases (
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    holder      TEXT,
    token       INTEGER NOT NULL,
    expires_at  INTEGER,
    finished_at INTEGER,
    PRIMARY KEY (tenant_id, scope, owner)
);
