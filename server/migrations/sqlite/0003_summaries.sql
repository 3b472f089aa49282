-- The collector's summaries read one table: each sample row carries the keys summaries
-- group and filter by, copied from its run and from its own target. An upload's delete
-- token is kept only as its SHA-256.
ALTER TABLE runs ADD COLUMN delete_token_sha256 TEXT;
ALTER TABLE samples ADD COLUMN received_at_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples ADD COLUMN target_label TEXT NOT NULL DEFAULT '';
ALTER TABLE samples ADD COLUMN target_version TEXT;
ALTER TABLE samples ADD COLUMN target_demo INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples ADD COLUMN network TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE samples ADD COLUMN effective_type TEXT;
ALTER TABLE samples ADD COLUMN browser TEXT;
ALTER TABLE samples ADD COLUMN os TEXT;
ALTER TABLE samples ADD COLUMN mobile INTEGER;

-- Rows stored before this migration: a sample's own target comes from the stored record
-- (older records named only their main target, hence the fallback to the run's).
UPDATE samples SET
    received_at_ms = (SELECT r.received_at_ms FROM runs r WHERE r.run_id = samples.run_id),
    target_label = COALESCE(
        (SELECT json_extract(r.record, '$.targets[' || samples.target || '].label') FROM runs r WHERE r.run_id = samples.run_id),
        (SELECT r.target_label FROM runs r WHERE r.run_id = samples.run_id)),
    target_version = COALESCE(
        (SELECT json_extract(r.record, '$.targets[' || samples.target || '].version') FROM runs r WHERE r.run_id = samples.run_id),
        (SELECT r.target_version FROM runs r WHERE r.run_id = samples.run_id)),
    target_demo = COALESCE(
        (SELECT json_extract(r.record, '$.targets[' || samples.target || '].demo') FROM runs r WHERE r.run_id = samples.run_id),
        (SELECT r.demo FROM runs r WHERE r.run_id = samples.run_id)),
    network = (SELECT r.network FROM runs r WHERE r.run_id = samples.run_id),
    effective_type = (SELECT r.effective_type FROM runs r WHERE r.run_id = samples.run_id),
    browser = (SELECT r.browser FROM runs r WHERE r.run_id = samples.run_id),
    os = (SELECT r.os FROM runs r WHERE r.run_id = samples.run_id),
    mobile = (SELECT r.mobile FROM runs r WHERE r.run_id = samples.run_id);

-- The summaries' usual filters and groupings.
CREATE INDEX samples_received ON samples (received_at_ms);
CREATE INDEX samples_target ON samples (target_label, target_version, phase);
CREATE INDEX samples_phase ON samples (phase, received_at_ms);
CREATE INDEX samples_network ON samples (network, phase);
CREATE INDEX samples_client ON samples (browser, os, mobile);
