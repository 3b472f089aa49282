-- A run now counts at most 120 requests of each phase in the crowd's figures (evenly
-- spread over the phase; exports keep every one). The cells of runs stored before, with
-- more than 120 requests, lose their indexes here, and the collector remakes them from
-- the records when it starts (as it did when cells first held indexes): only runs that
-- could have a phase over 120 are remade.
UPDATE cells SET indexes = NULL
WHERE run_id IN (SELECT run_id FROM runs WHERE sample_count > 120);
