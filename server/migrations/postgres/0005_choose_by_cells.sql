-- Exports and purges choose runs by their cells, which carry every column a filter
-- names (a cell's samples share them), and then a run's samples by its id, which starts
-- the samples' primary key. Summaries read cells already. So no query needs the samples'
-- indexes on those columns any more, and every upload paid for six of them on each of its
-- sample rows: without them, storing a 100-sample run took a tenth less CPU on SQLite and
-- a fifth less of PostgreSQL's own, and a sample takes a tenth less room (README, Figures).
DROP INDEX IF EXISTS samples_received;
DROP INDEX IF EXISTS samples_target;
DROP INDEX IF EXISTS samples_phase;
DROP INDEX IF EXISTS samples_network;
DROP INDEX IF EXISTS samples_client;
DROP INDEX IF EXISTS samples_study;
