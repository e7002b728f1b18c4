-- Session tier (SESSION-1..3), durable jobs (JOB-1, JOB-2), promotion watermarks (PROMO-2)
-- and the per-tenant model budget (PROMO-5).
--
-- Under Citus, session_turns, session_watermarks and model_budget are distributed by tenant_id.
-- jobs stays a plain table on the coordinator: it is a queue that workers of every tenant claim
-- from (SELECT ... FOR UPDATE SKIP LOCKED), looked up by job id alone.

CREATE TABLE session_turns (
    tenant_id  text NOT NULL,
    owner      text NOT NULL,
    session_id text NOT NULL,
    seq        integer NOT NULL,
    role       text NOT NULL,
    content    text NOT NULL,
    metadata   json NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, owner, session_id, seq)
);

CREATE INDEX session_turns_expiry ON session_turns (tenant_id, expires_at);

CREATE TABLE session_watermarks (
    tenant_id   text NOT NULL,
    owner       text NOT NULL,
    session_id  text NOT NULL,
    fingerprint text NOT NULL,
    last_seq    integer NOT NULL,
    status      text NOT NULL,
    at          timestamptz NOT NULL,
    details     json NOT NULL,
    PRIMARY KEY (tenant_id, owner, session_id)
);

CREATE TABLE jobs (
    job_id           text PRIMARY KEY,
    tenant_id        text NOT NULL,
    kind             text NOT NULL,
    idempotency_key  text NOT NULL,
    payload          json NOT NULL,
    status           text NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL,
    run_after        timestamptz NOT NULL,
    fencing_token    bigint NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    checkpoint       json NOT NULL,
    last_error       text,
    result           json NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz
);

-- At most one queued or running job per (tenant, kind, idempotency key) (PROMO-1).
CREATE UNIQUE INDEX jobs_active_key ON jobs (tenant_id, kind, idempotency_key)
    WHERE status IN ('queued', 'running');

CREATE INDEX jobs_claim ON jobs (status, run_after);

CREATE INDEX jobs_tenant ON jobs (tenant_id, created_at DESC);

CREATE TABLE model_budget (
    tenant_id    text NOT NULL,
    window_start timestamptz NOT NULL,
    used         integer NOT NULL,
    PRIMARY KEY (tenant_id, window_start)
);
