-- The cells' index on arrival takes the run id too, so what reads cells in arrival order
-- reads each run's together without sorting: a summary folds whole runs as they come
-- (server/src/db/cells.rs, summary_cells), and an export reads a page of runs at a time,
-- each page from where the last ended (server/src/db/export.rs), in a statement of its
-- own, so a stalled download holds no read transaction. Made on every month's partition.
CREATE INDEX cells_arrival ON cells (received_at_ms, run_id);
DROP INDEX cells_received;
