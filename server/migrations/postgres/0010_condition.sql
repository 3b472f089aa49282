-- A cold request's idle time and a fresh request's connection as verified (`condition`:
-- "idle 15 s", "new connection", "reused connection", "connection not verified"; NULL
-- for other requests), so the crowd's cells never pool a request after a minute's idle
-- with one after ten, or a request the browser proved new with one it coalesced
-- (firsttoken_core::summary::condition).
ALTER TABLE cells ADD COLUMN condition TEXT;
ALTER TABLE folds ADD COLUMN condition TEXT;

-- Cells made before pooled cold and fresh requests across conditions: the runs that have
-- such cells lose them here, and the collector makes them again from the runs' records
-- when it starts (cells.rs, rebuild_missing), before it serves.
DELETE FROM cells WHERE run_id IN (SELECT run_id FROM cells WHERE phase IN ('cold', 'fresh'));

-- The folds' bits moved (condition is 32, the demo target 64): every day is
-- folded again, and read from its cells until then.
DELETE FROM folds;
UPDATE days SET folded = NULL, varies = NULL;
