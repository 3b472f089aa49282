-- One row per uploaded run. `record` is the validated run exactly as the collector
-- re-serialized it; the columns beside it are what summaries group and filter by.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY NOT NULL,
    received_at_ms  INTEGER NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    schema_version  INTEGER NOT NULL,
    app_version     TEXT NOT NULL,
    target_label    TEXT NOT NULL,
    target_origin   TEXT NOT NULL,
    target_version  TEXT,
    dialect         TEXT NOT NULL,
    demo            INTEGER NOT NULL,
    network         TEXT NOT NULL,
    effective_type  TEXT,
    browser         TEXT,
    browser_major   INTEGER,
    os              TEXT,
    mobile          INTEGER,
    sample_count    INTEGER NOT NULL,
    -- SHA-256 of `record`: a repeated upload with the same id must carry the same record.
    record_sha256   TEXT NOT NULL,
    record          TEXT NOT NULL
) STRICT;

-- One row per request, for percentiles without parsing JSON.
CREATE TABLE samples (
    run_id          TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    idx             INTEGER NOT NULL,
    phase           TEXT NOT NULL,
    concurrency     INTEGER NOT NULL,
    start_ms        REAL NOT NULL,
    status          INTEGER NOT NULL,
    error           TEXT,
    headers_ms      REAL,
    ttfb_ms         REAL,
    ttft_ms         REAL,
    ttft_any_ms     REAL,
    last_token_ms   REAL,
    e2e_ms          REAL,
    output_chunks   INTEGER NOT NULL,
    input_tokens    INTEGER,
    output_tokens   INTEGER,
    PRIMARY KEY (run_id, idx)
) STRICT;

CREATE INDEX runs_received_at ON runs (received_at_ms);
