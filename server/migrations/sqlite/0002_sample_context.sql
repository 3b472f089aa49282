-- What issue 3's engine records per request: which target and scenario, the batch of a
-- concurrency phase, a cold request's idle time, the connection, and page visibility.
ALTER TABLE samples ADD COLUMN target INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples ADD COLUMN scenario TEXT;
ALTER TABLE samples ADD COLUMN batch INTEGER;
ALTER TABLE samples ADD COLUMN idle_ms INTEGER;
ALTER TABLE samples ADD COLUMN conn_reused INTEGER;
ALTER TABLE samples ADD COLUMN protocol TEXT;
ALTER TABLE samples ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
