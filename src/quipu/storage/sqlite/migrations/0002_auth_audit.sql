-- Tenants, credentials and the audit log (SCOPE-1, SCOPE-2, SAFE-4).

CREATE TABLE tenants (
    tenant_id  TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- API keys and run tokens share one table: a run token is a credential whose parent_key_id
-- names the service key that minted it. Only a SHA-256 of the secret is stored.
CREATE TABLE credentials (
    tenant_id     TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    kind          TEXT NOT NULL,          -- 'key' or 'run_token'
    secret_hash   TEXT NOT NULL,
    role          TEXT NOT NULL,
    name          TEXT,
    agent_id      TEXT,
    user_id       TEXT,
    grants        TEXT NOT NULL DEFAULT '[]',
    parent_key_id TEXT,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    revoked_at    INTEGER,
    last_used_at  INTEGER,
    PRIMARY KEY (tenant_id, key_id)
);

CREATE UNIQUE INDEX credentials_key_id ON credentials (key_id);

CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    at         INTEGER NOT NULL,
    actor_key  TEXT NOT NULL,
    role       TEXT,
    agent_id   TEXT,
    user_id    TEXT,
    surface    TEXT NOT NULL,
    action     TEXT NOT NULL,
    target_ids TEXT NOT NULL,
    reason     TEXT,
    details    TEXT NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq DESC);
