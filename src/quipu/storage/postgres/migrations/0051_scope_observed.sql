-- Dated recall (issue 23 finding 1): a question naming a date searches the rows of one scope
-- observed inside that window. This index counts them first (an index-only scan of the window)
-- and, when the window is narrow, hands the exact vector scan only those rows, instead of
-- walking the scope's HNSW graph with a filter that rejects nearly everything.
CREATE INDEX memory_versions_scope_observed
    ON memory_versions (tenant_id, scope, owner, observed_at)
    WHERE is_current;
