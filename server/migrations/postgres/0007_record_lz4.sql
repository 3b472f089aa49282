-- Run records compressed by the collector (server/src/db/record.rs): a run stored from
-- now on has its record's JSON in LZ4 in record_lz4, and '' in record (never a record,
-- as the empty string is not JSON). A run stored before keeps its JSON in record, with
-- record_lz4 NULL. The collector's instances compress, instead of PostgreSQL's backend
-- (0006_record_lz4.sql), and send a tenth to a fifth of the bytes.
ALTER TABLE runs ADD COLUMN record_lz4 BYTEA;
-- Already compressed: kept out of line as it is, without PostgreSQL trying again.
ALTER TABLE runs ALTER COLUMN record_lz4 SET STORAGE EXTERNAL;
