-- The collector's tables on PostgreSQL: the same shape as the SQLite migrations reach,
-- written once. Several collector instances may share them; every write is one
-- transaction, and a run's id is its primary key, so a repeated upload is a no-op.

CREATE TABLE runs (
    run_id              TEXT PRIMARY KEY,
    received_at_ms      BIGINT NOT NULL,
    started_at_ms       BIGINT NOT NULL,
    schema_version      BIGINT NOT NULL,
    app_version         TEXT NOT NULL,
    target_label        TEXT NOT NULL,
    target_origin       TEXT NOT NULL,
    target_version      TEXT,
    dialect             TEXT NOT NULL,
    demo                BOOLEAN NOT NULL,
    network             TEXT NOT NULL,
    effective_type      TEXT,
    browser             TEXT,
    browser_major       BIGINT,
    os                  TEXT,
    mobile              BOOLEAN,
    sample_count        BIGINT NOT NULL,
    -- SHA-256 of `record`: a repeated upload with the same id must carry the same record.
    record_sha256       TEXT NOT NULL,
    record              TEXT NOT NULL,
    delete_token_sha256 TEXT
);

CREATE INDEX runs_received_at ON runs (received_at_ms);

-- One row per request, with the keys summaries group and filter by.
CREATE TABLE samples (
    run_id          TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    idx             BIGINT NOT NULL,
    received_at_ms  BIGINT NOT NULL,
    phase           TEXT NOT NULL,
    concurrency     BIGINT NOT NULL,
    batch           BIGINT,
    idle_ms         BIGINT,
    scenario        TEXT,
    target          BIGINT NOT NULL,
    target_label    TEXT NOT NULL,
    target_version  TEXT,
    target_demo     BOOLEAN NOT NULL,
    network         TEXT NOT NULL,
    effective_type  TEXT,
    browser         TEXT,
    os              TEXT,
    mobile          BOOLEAN,
    start_ms        DOUBLE PRECISION NOT NULL,
    status          BIGINT NOT NULL,
    error           TEXT,
    headers_ms      DOUBLE PRECISION,
    ttfb_ms         DOUBLE PRECISION,
    ttft_ms         DOUBLE PRECISION,
    ttft_any_ms     DOUBLE PRECISION,
    last_token_ms   DOUBLE PRECISION,
    e2e_ms          DOUBLE PRECISION,
    output_chunks   BIGINT NOT NULL,
    input_tokens    BIGINT,
    output_tokens   BIGINT,
    conn_reused     BOOLEAN,
    protocol        TEXT,
    hidden          BOOLEAN NOT NULL,
    PRIMARY KEY (run_id, idx)
);

CREATE INDEX samples_received ON samples (received_at_ms);
CREATE INDEX samples_target ON samples (target_label, target_version, phase);
CREATE INDEX samples_phase ON samples (phase, received_at_ms);
CREATE INDEX samples_network ON samples (network, phase);
CREATE INDEX samples_client ON samples (browser, os, mobile);
