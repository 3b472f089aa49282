-- Which share link a run came from (its study id), on the run and on each of its samples,
-- so the Results page can show one link's runs alone. Runs stored before have none.
ALTER TABLE runs ADD COLUMN study TEXT;
ALTER TABLE samples ADD COLUMN study TEXT;
CREATE INDEX samples_study ON samples (study, phase);
