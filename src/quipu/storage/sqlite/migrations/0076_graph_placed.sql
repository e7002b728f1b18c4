-- Which memories placement by ontology moved to the tenant scope (issue 26, GRAPH-2): one row
-- per placed memory, written in the placement's own transaction. A revision of a placed memory
-- passes the placement checks again (graph/placement.py); `origin` is the scope the writer
-- wrote to (agent, user, agent_user), `policy_version` the policy that placed it. Ids and
-- times only, no text. tenant_id leads the key.

CREATE TABLE graph_placed (
    tenant_id      TEXT NOT NULL,
    memory_id      TEXT NOT NULL,
    origin         TEXT NOT NULL,
    policy_version INTEGER NOT NULL,
    placed_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, memory_id)
);
