-- Summaries read cells, not samples: each is one run's samples of one combination of the
-- dimensions summaries group and filter by, kept ready as counts and sketches of the
-- times (core/src/sketch.rs: histograms within 0.25% of every value). A run of 100
-- samples has a handful. Samples stay the source of truth: exports read them, and the
-- collector rebuilds the cells of any run that has none when it starts (runs stored
-- before this table existed).
CREATE TABLE cells (
    run_id          TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    cell            INTEGER NOT NULL,
    received_at_ms  INTEGER NOT NULL,
    target_demo     INTEGER NOT NULL,
    phase           TEXT NOT NULL,
    concurrency     INTEGER NOT NULL,
    scenario        TEXT,
    target_label    TEXT NOT NULL,
    target_version  TEXT,
    network         TEXT NOT NULL,
    effective_type  TEXT,
    browser         TEXT,
    os              TEXT,
    mobile          INTEGER,
    study           TEXT,
    -- Samples in the cell, and the failed ones by error class (JSON, NULL when none).
    samples         INTEGER NOT NULL,
    errors          TEXT,
    -- Sketches of the answered samples' TTFT and end-to-end times.
    ttft            BLOB NOT NULL,
    e2e             BLOB NOT NULL,
    PRIMARY KEY (run_id, cell)
);

CREATE INDEX cells_received ON cells (received_at_ms);
