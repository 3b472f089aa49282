-- Summaries read cells, not samples: each is one run's samples of one combination of the
-- dimensions summaries group and filter by, kept ready as counts and sketches of the
-- times (core/src/sketch.rs: histograms within 0.25% of every value). A run of 100
-- samples has a handful. Samples stay the source of truth: exports read them, and the
-- collector rebuilds the cells of any run that has none when it starts (runs stored
-- before this table existed).
CREATE TABLE cells (
    run_id          TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    cell            BIGINT NOT NULL,
    received_at_ms  BIGINT NOT NULL,
    target_demo     BOOLEAN NOT NULL,
    phase           TEXT NOT NULL,
    concurrency     BIGINT NOT NULL,
    scenario        TEXT,
    target_label    TEXT NOT NULL,
    target_version  TEXT,
    network         TEXT NOT NULL,
    effective_type  TEXT,
    browser         TEXT,
    os              TEXT,
    mobile          BOOLEAN,
    study           TEXT,
    -- Samples in the cell, and the failed ones by error class (JSON, NULL when none).
    samples         BIGINT NOT NULL,
    errors          TEXT,
    -- Sketches of the answered samples' TTFT and end-to-end times.
    ttft            BYTEA NOT NULL,
    e2e             BYTEA NOT NULL,
    PRIMARY KEY (run_id, cell)
);

CREATE INDEX cells_received ON cells (received_at_ms);
