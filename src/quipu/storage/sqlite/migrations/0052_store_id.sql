-- A random id for this store, carried by its scope index files (issue 23): a file made for
-- another database at the same path is never taken for this one's.
INSERT OR IGNORE INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));
