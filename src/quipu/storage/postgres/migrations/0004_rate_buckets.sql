-- Per-key token buckets shared by every server process on this store (MEM-5).
--
-- Under Citus this stays a plain table on the coordinator, like jobs: it is keyed by the
-- credential, updated on every write request, and never joined with tenant data.

CREATE TABLE rate_buckets (
    key_id     text PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at timestamptz NOT NULL
);
