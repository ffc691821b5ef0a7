-- Which hyperparameter configurations have been run, and which one do the tables use?
-- Per paradigm, generator and config hash: runs made, when, and how many of them are the
-- current run of their query (v_run_latest keeps the newest config per query).
SELECT r.paradigm,
       r.generator,
       r.config_hash,
       COUNT(*) AS runs,
       MIN(r.created_at) AS first_run,
       MAX(r.created_at) AS last_run,
       SUM(CASE WHEN l.run_id IS NULL THEN 0 ELSE 1 END) AS current_runs
FROM paradigm_runs r
LEFT JOIN v_run_latest l ON l.run_id = r.id
GROUP BY r.paradigm, r.generator, r.config_hash
ORDER BY r.paradigm, r.generator, last_run DESC, r.config_hash;
