-- Stored answers of HTTP writes sent with an Idempotency-Key (issue 27): one row per tenant,
-- credential and key; status NULL while the first request runs. Rows expire after the
-- idempotency window and are pruned, per tenant, when a key of that tenant is claimed.
-- Under Citus the table is distributed by tenant_id like the other tenant tables.

CREATE TABLE idempotency_keys (
    tenant_id   text NOT NULL,
    key_id      text NOT NULL,
    idem_key    text NOT NULL,
    fingerprint text NOT NULL,
    status      integer,
    headers     jsonb NOT NULL DEFAULT '[]',
    body        bytea NOT NULL DEFAULT ''::bytea,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key_id, idem_key)
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (tenant_id, expires_at);
