-- samples in monthly partitions on received_at_ms (UTC months): dropping a month of old
-- data drops a table instead of deleting its rows one by one (server/src/db/partitions.rs).
-- The primary key includes the partition column, as PostgreSQL requires. Rows outside
-- every monthly partition go to samples_default, never refused; the collector makes this
-- month's and the next two months' partitions when it starts and every hour, moving any
-- rows of theirs out of the default partition.

ALTER TABLE samples RENAME TO samples_before_partitioning;
ALTER TABLE samples_before_partitioning RENAME CONSTRAINT samples_pkey TO samples_before_partitioning_pkey;
DROP INDEX samples_received, samples_target, samples_phase, samples_network, samples_client, samples_study;

CREATE TABLE samples (
    LIKE samples_before_partitioning INCLUDING DEFAULTS,
    PRIMARY KEY (run_id, idx, received_at_ms),
    FOREIGN KEY (run_id) REFERENCES runs (run_id) ON DELETE CASCADE
) PARTITION BY RANGE (received_at_ms);

CREATE TABLE samples_default PARTITION OF samples DEFAULT;

-- A partition for every month with samples, from three years back at most (older rows
-- stay in the default partition), through two months ahead.
DO $$
DECLARE
    oldest BIGINT;
    month TIMESTAMP;
    last TIMESTAMP := date_trunc('month', now() AT TIME ZONE 'UTC') + INTERVAL '2 months';
BEGIN
    SELECT MIN(received_at_ms) INTO oldest FROM samples_before_partitioning;
    month := GREATEST(
        date_trunc('month', COALESCE(to_timestamp(oldest / 1000.0), now()) AT TIME ZONE 'UTC'),
        date_trunc('month', now() AT TIME ZONE 'UTC') - INTERVAL '36 months'
    );
    WHILE month <= last LOOP
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF samples FOR VALUES FROM (%s) TO (%s)',
            'samples_' || to_char(month, 'YYYY_MM'),
            (extract(epoch FROM month AT TIME ZONE 'UTC') * 1000)::BIGINT,
            (extract(epoch FROM (month + INTERVAL '1 month') AT TIME ZONE 'UTC') * 1000)::BIGINT
        );
        month := month + INTERVAL '1 month';
    END LOOP;
END $$;

INSERT INTO samples SELECT * FROM samples_before_partitioning;
DROP TABLE samples_before_partitioning;

CREATE INDEX samples_received ON samples (received_at_ms);
CREATE INDEX samples_target ON samples (target_label, target_version, phase);
CREATE INDEX samples_phase ON samples (phase, received_at_ms);
CREATE INDEX samples_network ON samples (network, phase);
CREATE INDEX samples_client ON samples (browser, os, mobile);
CREATE INDEX samples_study ON samples (study, phase);
