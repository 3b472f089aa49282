-- Where runs came from, for two days at most, so an operator can purge one source's
-- runs (a flood of made-up uploads) without the collector ever keeping an address.
-- A run's source is a tag: HMAC-SHA256 of its uploader's /24 (IPv4) or /48 (IPv6) under
-- a key of its day (UTC). A day's key is random, made by whichever instance needs it
-- first, and forgotten after the next day: then no one, the operator included, can tell
-- which network a tag was, and the tags themselves go once two days old.
CREATE TABLE source_keys (
    day_ms BIGINT PRIMARY KEY,
    key BLOB NOT NULL
);
CREATE TABLE run_sources (
    run_id TEXT PRIMARY KEY,
    tag TEXT NOT NULL,
    received_at_ms BIGINT NOT NULL
);
CREATE INDEX run_sources_tag ON run_sources (tag);
CREATE INDEX run_sources_received_at ON run_sources (received_at_ms);
