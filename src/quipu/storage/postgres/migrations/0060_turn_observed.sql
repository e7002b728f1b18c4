-- A session turn keeps the time it was said (issue 24): `observed_at` is the caller's time of
-- the turn (imported history keeps its dates); NULL on turns appended before this migration,
-- which read as their `created_at`.
ALTER TABLE session_turns ADD COLUMN observed_at timestamptz;
