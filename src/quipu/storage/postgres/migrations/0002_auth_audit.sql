-- Tenants, credentials and the audit log (SCOPE-1, SCOPE-2, SAFE-4).
--
-- Under Citus, tenants and credentials are reference tables: a credential is looked up by its
-- key id alone, before the tenant is known, so it cannot live on one tenant's shard. The
-- audit log is distributed by tenant_id like the memory tables.

CREATE TABLE tenants (
    tenant_id  text PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL
);

-- API keys and run tokens share one table: a run token is a credential whose parent_key_id
-- names the service key that minted it. Only a SHA-256 of the secret is stored.
CREATE TABLE credentials (
    tenant_id     text NOT NULL,
    key_id        text NOT NULL,
    kind          text NOT NULL,
    secret_hash   text NOT NULL,
    role          text NOT NULL,
    name          text,
    agent_id      text,
    user_id       text,
    grants        text[] NOT NULL DEFAULT '{}',
    parent_key_id text,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz,
    revoked_at    timestamptz,
    last_used_at  timestamptz,
    PRIMARY KEY (tenant_id, key_id)
);

CREATE UNIQUE INDEX credentials_key_id ON credentials (key_id);

CREATE SEQUENCE audit_seq;

CREATE TABLE audit_log (
    tenant_id  text NOT NULL,
    seq        bigint NOT NULL DEFAULT nextval('audit_seq'),
    at         timestamptz NOT NULL,
    actor_key  text NOT NULL,
    role       text,
    agent_id   text,
    user_id    text,
    surface    text NOT NULL,
    action     text NOT NULL,
    target_ids text[] NOT NULL,
    reason     text,
    details    json NOT NULL,
    PRIMARY KEY (tenant_id, seq)
);
