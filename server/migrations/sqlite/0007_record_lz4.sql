-- Run records compressed by the collector (server/src/db/record.rs): a run stored from
-- now on has its record's JSON in LZ4 in record_lz4, and '' in record (never a record,
-- as the empty string is not JSON). A run stored before keeps its JSON in record, with
-- record_lz4 NULL. A record is about 870 bytes of JSON per sample and LZ4 keeps a tenth
-- to a fifth of it (README, Figures).
ALTER TABLE runs ADD COLUMN record_lz4 BLOB;
