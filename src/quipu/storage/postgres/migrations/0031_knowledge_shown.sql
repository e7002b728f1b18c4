-- Articles a merged recall already showed a session (issue 25, RECALL-9 diversity): durable and
-- shared by every worker and process over the store, keyed by the server-derived subject ahead
-- of the client's session token so no other tenant or agent can suppress a caller's rows.
-- Rows older than the history's time to live are ignored on read and deleted by the prune job;
-- an article's erase and a subject erasure (user_id) delete theirs (LIFE-4).

CREATE TABLE knowledge_shown (
    tenant_id  text NOT NULL,
    subject    text NOT NULL,           -- agent id, else key id, of the caller
    session_id text NOT NULL,           -- the caller's opaque token, at most 200 bytes
    article_id text NOT NULL,
    user_id    text,                    -- the end user the caller acted for, if any
    shown_at   bigint NOT NULL,           -- microseconds since the epoch (UTC)
    PRIMARY KEY (tenant_id, subject, session_id, article_id)
);

CREATE INDEX knowledge_shown_age ON knowledge_shown (tenant_id, shown_at);
CREATE INDEX knowledge_shown_article ON knowledge_shown (tenant_id, article_id);
CREATE INDEX knowledge_shown_user ON knowledge_shown (tenant_id, user_id);
