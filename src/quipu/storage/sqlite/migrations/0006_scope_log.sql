-- What each generation of a scope changed: the version row it added and the one it retired.
-- Another process whose in-memory index of the scope is a few generations behind replays
-- these instead of reloading the whole scope. Only recent generations are kept; a process
-- further behind (or after a bulk import, which logs nothing) reloads the scope as before.
CREATE TABLE scope_log (
    tenant_id  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    owner      TEXT NOT NULL,
    generation INTEGER NOT NULL,
    added      INTEGER NOT NULL,
    retired    INTEGER,
    PRIMARY KEY (tenant_id, scope, owner, generation)
) WITHOUT ROWID;
