-- Each cell's answered samples' wait for the first token in layers (before sending, the
-- server, network and delivery: crowd/src/summary/layer.rs), of the samples whose wait
-- split whole, as three sketches; an empty value when none did. NULL: a cell made before
-- layers, remade from its run's record when the collector starts
-- (server/src/db/cells.rs, rebuild_missing). The folds, whose format now holds layers
-- too, go, to be made again from the cells by the fold job.
ALTER TABLE cells ADD COLUMN layers BYTEA;
DELETE FROM folds;
UPDATE days SET folded = NULL, varies = NULL;
