-- No row per sample. Every request was a row of `samples`, written with every upload and
-- read by nothing that could not read the run's record and its cells instead: exports
-- take the matching samples' indexes from the cells (`cells.indexes`) and their values
-- from the record, summaries read cells, and cells are made from records. The rows were
-- over two fifths of what storing an upload cost SQLite (README, Figures).
--
-- Cells stored before have no indexes yet: the collector makes every such run's cells
-- again from its record when it starts, before it serves.
ALTER TABLE cells ADD COLUMN indexes TEXT;
DROP TABLE samples;

-- Every stored run's id, once, with the digest of its record: what makes a repeated
-- upload a no-op and tells the same record from a different one under the same id. On
-- PostgreSQL, where `runs` is partitioned by month and its key must include the month,
-- this is what keeps an id unique; SQLite keeps the same table so both share one writer.
CREATE TABLE run_ids (
    run_id          TEXT PRIMARY KEY,
    received_at_ms  INTEGER NOT NULL,
    record_sha256   TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO run_ids SELECT run_id, received_at_ms, record_sha256 FROM runs;
