-- Per-key token buckets shared by every server process on this store (MEM-5).

CREATE TABLE rate_buckets (
    key_id     TEXT PRIMARY KEY,
    tokens     REAL NOT NULL,
    updated_at INTEGER NOT NULL
);
