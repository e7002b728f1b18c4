-- Session tier (SESSION-1..3), durable jobs (JOB-1, JOB-2), promotion watermarks (PROMO-2)
-- and the per-tenant model budget (PROMO-5).

CREATE TABLE session_turns (
    tenant_id  TEXT NOT NULL,
    owner      TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    role       TEXT NOT NULL,
    content    TEXT NOT NULL,
    metadata   TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, owner, session_id, seq)
);

CREATE INDEX session_turns_expiry ON session_turns (expires_at);

CREATE TABLE session_watermarks (
    tenant_id   TEXT NOT NULL,
    owner       TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    last_seq    INTEGER NOT NULL,
    status      TEXT NOT NULL,
    at          INTEGER NOT NULL,
    details     TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, owner, session_id)
);

CREATE TABLE jobs (
    job_id           TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL,
    kind             TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    run_after        INTEGER NOT NULL,
    fencing_token    INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    checkpoint       TEXT NOT NULL DEFAULT '{}',
    last_error       TEXT,
    result           TEXT NOT NULL DEFAULT '{}',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER
);

-- At most one queued or running job per (tenant, kind, idempotency key) (PROMO-1).
CREATE UNIQUE INDEX jobs_active_key ON jobs (tenant_id, kind, idempotency_key)
    WHERE status IN ('queued', 'running');
CREATE INDEX jobs_claim ON jobs (status, run_after);
CREATE INDEX jobs_tenant ON jobs (tenant_id, created_at DESC);

CREATE TABLE model_budget (
    tenant_id    TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    used         INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, window_start)
);
