-- The memories of one session in write order: a new memory's keyword keys include those of
-- the memory written just before it in the same session and scope (context keys).

CREATE INDEX memory_versions_session ON memory_versions (
    tenant_id, scope, owner, (provenance->>'session_id'), key
) WHERE provenance->>'session_id' IS NOT NULL;
