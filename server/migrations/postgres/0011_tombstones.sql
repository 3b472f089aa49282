-- A run deleted with its token leaves its id behind as a tombstone (`deleted_at_ms`):
-- the same record uploaded again (a stale tab's retry, an outsider who fetched it) is
-- refused with 410, never stored again. An age purge removes tombstones with the rest.
ALTER TABLE run_ids ADD COLUMN deleted_at_ms BIGINT;
