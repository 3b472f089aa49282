-- Each run's record (about 85 KB of JSON for 100 requests) is compressed when stored
-- (TOAST). PostgreSQL's default method, pglz, spends about a tenth of the database's CPU
-- per upload more than lz4 does (README, Figures). Rows stored before keep pglz; both
-- read back the same. A PostgreSQL built without lz4 keeps pglz for every row.
DO $$
BEGIN
    ALTER TABLE runs ALTER COLUMN record SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: run records stay compressed with pglz';
END $$;
