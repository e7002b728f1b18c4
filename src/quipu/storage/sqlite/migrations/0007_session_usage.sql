-- What the session tier holds, per session and per subject (issue 20, #8): the turns and bytes
-- an append checks against the bounds inside its own transaction, released when pruning
-- deletes turns. A session row also names the subject that last wrote it, which a sweep
-- promotion acts as (issue 20, #6 and #15) instead of one shared identity.

CREATE TABLE sessions (
    tenant_id  TEXT NOT NULL,
    owner      TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turns      INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    key_id     TEXT NOT NULL,
    role       TEXT NOT NULL,
    agent_id   TEXT,
    user_id    TEXT,
    PRIMARY KEY (tenant_id, owner, session_id)
);

CREATE TABLE session_owners (
    tenant_id TEXT NOT NULL,
    owner     TEXT NOT NULL,
    turns     INTEGER NOT NULL,
    bytes     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, owner)
);

-- Sessions written before this migration: the subject read from the owner as the sweep did
-- until now (agent, then user after the first separator), under the sweep's own key id.
INSERT INTO sessions (tenant_id, owner, session_id, turns, bytes, key_id, role, agent_id, user_id)
SELECT tenant_id, owner, session_id, COUNT(*),
       SUM(length(CAST(content AS BLOB)) + length(CAST(metadata AS BLOB))),
       'promotion-sweep', 'agent',
       CASE WHEN instr(owner, char(31)) > 0 THEN substr(owner, 1, instr(owner, char(31)) - 1)
            ELSE owner END,
       NULLIF(CASE WHEN instr(owner, char(31)) > 0 THEN substr(owner, instr(owner, char(31)) + 1)
                   ELSE '' END, '')
FROM session_turns
GROUP BY tenant_id, owner, session_id;

INSERT INTO session_owners (tenant_id, owner, turns, bytes)
SELECT tenant_id, owner, SUM(turns), SUM(bytes) FROM sessions GROUP BY tenant_id, owner;
