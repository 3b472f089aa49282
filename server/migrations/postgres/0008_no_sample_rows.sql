-- No row per sample. Every request was a row of `samples`, written with every upload and
-- read by nothing that could not read the run's record and its cells instead: exports
-- take the matching samples' indexes from the cells (`cells.indexes`) and their values
-- from the record, summaries read cells, and cells are made from records. The rows were
-- five sixths of PostgreSQL's own work per upload (README, Figures).
--
-- What is dropped by month is now `runs` and `cells`: both are partitioned on
-- received_at_ms (UTC months), `runs_2026_12` and `cells_2026_12`, with `runs_default`
-- and `cells_default` for rows outside every month (server/src/db/partitions.rs). A
-- partitioned table's keys must include the partition column, so `run_ids` keeps each
-- id unique. Cells stored before have no indexes yet: the collector makes every such
-- run's cells again from its record when it starts, before it serves.

DROP TABLE samples;

CREATE TABLE run_ids (
    run_id          TEXT PRIMARY KEY,
    received_at_ms  BIGINT NOT NULL,
    record_sha256   TEXT NOT NULL
);
INSERT INTO run_ids SELECT run_id, received_at_ms, record_sha256 FROM runs;

ALTER TABLE cells RENAME TO cells_before_partitioning;
ALTER TABLE cells_before_partitioning RENAME CONSTRAINT cells_pkey TO cells_before_partitioning_pkey;
DROP INDEX cells_received;
ALTER TABLE runs RENAME TO runs_before_partitioning;
ALTER TABLE runs_before_partitioning RENAME CONSTRAINT runs_pkey TO runs_before_partitioning_pkey;
DROP INDEX runs_received_at;

-- The record's storage settings (lz4, and EXTERNAL for the collector's own LZ4) go with
-- the columns, and every partition made with PARTITION OF inherits them.
CREATE TABLE runs (
    LIKE runs_before_partitioning INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION,
    PRIMARY KEY (run_id, received_at_ms)
) PARTITION BY RANGE (received_at_ms);
CREATE TABLE runs_default PARTITION OF runs DEFAULT;

-- A cell's samples by index, as ranges: "0-39,41". Deleting a run deletes its cells in
-- the same transaction (a partitioned table's foreign key would tie the months together).
CREATE TABLE cells (
    LIKE cells_before_partitioning INCLUDING DEFAULTS,
    indexes TEXT,
    PRIMARY KEY (run_id, cell, received_at_ms)
) PARTITION BY RANGE (received_at_ms);
CREATE TABLE cells_default PARTITION OF cells DEFAULT;

-- A partition of each for every month with runs, from three years back at most (older
-- rows stay in the default partitions), through two months ahead.
DO $$
DECLARE
    oldest BIGINT;
    month TIMESTAMP;
    last TIMESTAMP := date_trunc('month', now() AT TIME ZONE 'UTC') + INTERVAL '2 months';
    parent TEXT;
BEGIN
    SELECT MIN(received_at_ms) INTO oldest FROM runs_before_partitioning;
    month := GREATEST(
        date_trunc('month', COALESCE(to_timestamp(oldest / 1000.0), now()) AT TIME ZONE 'UTC'),
        date_trunc('month', now() AT TIME ZONE 'UTC') - INTERVAL '36 months'
    );
    WHILE month <= last LOOP
        FOREACH parent IN ARRAY ARRAY['runs', 'cells'] LOOP
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s)',
                parent || '_' || to_char(month, 'YYYY_MM'),
                parent,
                (extract(epoch FROM month AT TIME ZONE 'UTC') * 1000)::BIGINT,
                (extract(epoch FROM (month + INTERVAL '1 month') AT TIME ZONE 'UTC') * 1000)::BIGINT
            );
        END LOOP;
        month := month + INTERVAL '1 month';
    END LOOP;
END $$;

INSERT INTO runs SELECT * FROM runs_before_partitioning;
INSERT INTO cells SELECT *, NULL FROM cells_before_partitioning;
DROP TABLE cells_before_partitioning;
DROP TABLE runs_before_partitioning;

CREATE INDEX runs_received_at ON runs (received_at_ms);
CREATE INDEX cells_received ON cells (received_at_ms);
