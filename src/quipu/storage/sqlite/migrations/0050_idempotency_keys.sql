-- Stored answers of HTTP writes sent with an Idempotency-Key (issue 27): one row per tenant,
-- credential and key; status NULL while the first request runs. Rows expire after the
-- idempotency window and are pruned, per tenant, when a key of that tenant is claimed.

CREATE TABLE idempotency_keys (
    tenant_id   TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    idem_key    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status      INTEGER,
    headers     TEXT NOT NULL DEFAULT '[]',
    body        BLOB NOT NULL DEFAULT x'',
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key_id, idem_key)
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (tenant_id, expires_at);
