-- The storage limit (--max-storage-bytes) counts live data, so a purge frees it: a
-- table's size on disk shrinks only when whole months are dropped (deleted rows' space
-- is reused, never given back), so a store filled with junk stayed full after the
-- operator purged it. The live bytes of runs and cells are counted here, by triggers in
-- the transactions that insert, change and delete them (every instance alike): each
-- statement adds one row of the bytes it added or took away, and the collector folds
-- the rows into the first now and then (server/src/db/mod.rs, storage_bytes). A dropped
-- month's bytes are taken away by the statement that drops it (db/partitions.rs).
--
-- A row's bytes: its record or sketches, its list of sample indexes and its errors, as
-- stored, and a fixed amount for its other columns, its header, its index entries and
-- its record's TOAST chunks: 1,050 bytes a run and 260 a cell, what they took on disk
-- beyond those when 2,000 runs of 100 requests with random ids filled empty tables
-- (PostgreSQL 15, 2026-12-07: counted 8.43 MB, on disk 8.42 MB). Under the load
-- benchmark's varied runs the tables took about an eighth more than counted.
CREATE FUNCTION stored_run_bytes(record TEXT, record_lz4 BYTEA) RETURNS BIGINT
    LANGUAGE SQL IMMUTABLE PARALLEL SAFE
    AS $$ SELECT COALESCE(octet_length(record), 0) + COALESCE(octet_length(record_lz4), 0) + 1050 $$;

CREATE FUNCTION stored_cell_bytes(ttft BYTEA, e2e BYTEA, indexes TEXT, errors TEXT) RETURNS BIGINT
    LANGUAGE SQL IMMUTABLE PARALLEL SAFE
    AS $$ SELECT octet_length(ttft) + octet_length(e2e) + COALESCE(octet_length(indexes), 0)
        + COALESCE(octet_length(errors), 0) + 260 $$;

CREATE TABLE stored_bytes (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    bytes BIGINT NOT NULL
);

CREATE FUNCTION count_stored_runs() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO stored_bytes (bytes)
            SELECT SUM(stored_run_bytes(record, record_lz4)) FROM added HAVING COUNT(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO stored_bytes (bytes)
            SELECT -SUM(stored_run_bytes(record, record_lz4)) FROM gone HAVING COUNT(*) > 0;
    ELSE
        INSERT INTO stored_bytes (bytes)
            SELECT (SELECT COALESCE(SUM(stored_run_bytes(record, record_lz4)), 0) FROM added)
                 - (SELECT COALESCE(SUM(stored_run_bytes(record, record_lz4)), 0) FROM gone);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION count_stored_cells() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO stored_bytes (bytes)
            SELECT SUM(stored_cell_bytes(ttft, e2e, indexes, errors)) FROM added
            HAVING COUNT(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO stored_bytes (bytes)
            SELECT -SUM(stored_cell_bytes(ttft, e2e, indexes, errors)) FROM gone
            HAVING COUNT(*) > 0;
    ELSE
        INSERT INTO stored_bytes (bytes)
            SELECT (SELECT COALESCE(SUM(stored_cell_bytes(ttft, e2e, indexes, errors)), 0) FROM added)
                 - (SELECT COALESCE(SUM(stored_cell_bytes(ttft, e2e, indexes, errors)), 0) FROM gone);
    END IF;
    RETURN NULL;
END $$;

-- The triggers first: each takes a lock that keeps other instances' writes out until
-- this migration commits, so the count below misses none of them.
CREATE TRIGGER runs_added AFTER INSERT ON runs REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION count_stored_runs();
CREATE TRIGGER runs_gone AFTER DELETE ON runs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION count_stored_runs();
CREATE TRIGGER runs_changed AFTER UPDATE ON runs REFERENCING OLD TABLE AS gone NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION count_stored_runs();
CREATE TRIGGER cells_added AFTER INSERT ON cells REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION count_stored_cells();
CREATE TRIGGER cells_gone AFTER DELETE ON cells REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION count_stored_cells();
CREATE TRIGGER cells_changed AFTER UPDATE ON cells REFERENCING OLD TABLE AS gone NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION count_stored_cells();

INSERT INTO stored_bytes (bytes)
    SELECT (SELECT COALESCE(SUM(stored_run_bytes(record, record_lz4)), 0) FROM runs)
         + (SELECT COALESCE(SUM(stored_cell_bytes(ttft, e2e, indexes, errors)), 0) FROM cells);
