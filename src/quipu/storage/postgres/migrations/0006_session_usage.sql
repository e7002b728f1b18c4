-- What the session tier holds, per session and per subject (issue 20, #8): the turns and bytes
-- an append checks against the bounds inside its own transaction, released when pruning
-- deletes turns. A session row also names the subject that last wrote it, which a sweep
-- promotion acts as (issue 20, #6 and #15) instead of one shared identity.
--
-- Under Citus both are distributed by tenant_id, colocated with session_turns.

CREATE TABLE sessions (
    tenant_id  text NOT NULL,
    owner      text NOT NULL,
    session_id text NOT NULL,
    turns      integer NOT NULL,
    bytes      bigint NOT NULL,
    key_id     text NOT NULL,
    role       text NOT NULL,
    agent_id   text,
    user_id    text,
    PRIMARY KEY (tenant_id, owner, session_id)
);

CREATE TABLE session_owners (
    tenant_id text NOT NULL,
    owner     text NOT NULL,
    turns     integer NOT NULL,
    bytes     bigint NOT NULL,
    PRIMARY KEY (tenant_id, owner)
);

-- Sessions written before this migration: the subject read from the owner as the sweep did
-- until now (agent, then user after the first separator), under the sweep's own key id.
INSERT INTO sessions (tenant_id, owner, session_id, turns, bytes, key_id, role, agent_id, user_id)
SELECT tenant_id, owner, session_id, COUNT(*),
       SUM(octet_length(content) + octet_length(metadata::text)),
       'promotion-sweep', 'agent',
       CASE WHEN strpos(owner, chr(31)) > 0 THEN left(owner, strpos(owner, chr(31)) - 1)
            ELSE owner END,
       NULLIF(CASE WHEN strpos(owner, chr(31)) > 0 THEN substr(owner, strpos(owner, chr(31)) + 1)
                   ELSE '' END, '')
FROM session_turns
GROUP BY tenant_id, owner, session_id;

INSERT INTO session_owners (tenant_id, owner, turns, bytes)
SELECT tenant_id, owner, SUM(turns), SUM(bytes) FROM sessions GROUP BY tenant_id, owner;
