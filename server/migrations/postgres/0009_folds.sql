-- Days' runs folded ahead, so a summary over months reads a few rows per day instead of
-- every run's cells (server/src/db/folds.rs, core/src/fold.rs). The cells stay the
-- source: folds are made from them, and made again whenever a day's runs change.
--
-- `days`: every UTC day with runs stored, by its first millisecond. `changes` goes up
-- in every transaction that stores or deletes a run received that day; `folded` is the
-- value it had when the day's folds were made (NULL: never). A day's folds are read only
-- while the two are equal: a run stored late, or deleted, sends its day back to its cells
-- until it is folded again. `varies`: the dimensions some run of the day has more than
-- one value of (phase 1, concurrency 2, scenario 4, target 8, target version 16, demo
-- target 32), as the folds were made; -1 when the day had too many combinations to fold
-- and is read from its cells.
CREATE TABLE days (
    day_ms   BIGINT PRIMARY KEY,
    changes  BIGINT NOT NULL,
    folded   BIGINT,
    varies   BIGINT
);

-- One row per day, per choice of which of the day's varying dimensions to merge
-- (`merged`, bits as `varies`; a merged dimension is NULL), per combination of the
-- other dimensions' values: the runs with samples there, folded. Each run is in one row
-- of a day for each choice, so a summary reads the rows that merge exactly the varying
-- dimensions it neither groups nor filters by.
CREATE TABLE folds (
    day_ms          BIGINT NOT NULL,
    merged          BIGINT NOT NULL,
    target_demo     BOOLEAN,
    phase           TEXT,
    concurrency     BIGINT,
    scenario        TEXT,
    target_label    TEXT,
    target_version  TEXT,
    network         TEXT NOT NULL,
    effective_type  TEXT,
    browser         TEXT,
    os              TEXT,
    mobile          BOOLEAN,
    study           TEXT,
    fold            BYTEA NOT NULL
);

CREATE INDEX folds_by_day ON folds (day_ms, merged);

-- The days of the runs stored before: folded once the collector is running.
INSERT INTO days (day_ms, changes)
SELECT DISTINCT (received_at_ms / 86400000) * 86400000, 1 FROM run_ids;
