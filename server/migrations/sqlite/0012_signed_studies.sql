-- Share links the operator made are told from links anyone made: the collector signs
-- its operator's studies (HMAC-SHA256) with a key it makes at first start and keeps here
-- (one row, so every instance on one database signs alike; it never leaves the
-- database). Each study it signed is kept by id: --signed-studies-only accepts runs of
-- these alone, and the page says when a link was signed.
CREATE TABLE signing_key (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    key BLOB NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE TABLE signed_studies (
    study_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    signed_at_ms BIGINT NOT NULL
);
