-- The console's entities list (issue 29): a scope's entities, most recently seen first, a page
-- at a time. Without this index every page checked every entity of the scope before sorting
-- (482 ms p95 for 2,061 entities on SQLite); with it a page walks the index in order and stops
-- at its limit. tenant_id leads the key (Citus-compatible).

CREATE INDEX graph_entities_seen ON graph_entities (tenant_id, scope, owner, last_seen, entity_id);
