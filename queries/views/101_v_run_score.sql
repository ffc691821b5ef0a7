-- The quality metrics of one paradigm run in one row (NULL = not scored / not applicable):
-- semantic F1, coverage, faithfulness (hard/soft) and the standard QA metrics exact_match and
-- token_f1 (SQuAD v1.1 normalisation, scorer 'squad-v1.1'; ragrouter.evaluation.metrics).
-- When several scorers (encoders) scored the same (run, metric), the alphabetically first
-- scorer's value is used, so a run never mixes encoders within one metric.
-- rk <= 1, not rk = 1: PostgreSQL estimates an equality on a window function's result at
-- 0.5 % of the rows and then nests loops over this view (v_run_judged took 11 s instead of 0.06 s
-- on 9,480 runs; benchmarks/README.md, issue 17). For ROW_NUMBER() the two are the same filter.
CREATE VIEW v_run_score AS
SELECT run_id,
       MAX(CASE WHEN metric = 'semantic_f1' THEN value END) AS semantic_f1,
       MAX(CASE WHEN metric = 'coverage' THEN value END) AS coverage,
       MAX(CASE WHEN metric = 'faith_hard' THEN value END) AS faith_hard,
       MAX(CASE WHEN metric = 'faith_soft' THEN value END) AS faith_soft,
       MAX(CASE WHEN metric = 'exact_match' THEN value END) AS exact_match,
       MAX(CASE WHEN metric = 'token_f1' THEN value END) AS token_f1
FROM (
    SELECT run_id, metric, value,
           ROW_NUMBER() OVER (PARTITION BY run_id, metric ORDER BY scorer) AS rk
    FROM answer_scores
) AS ranked
WHERE rk <= 1
GROUP BY run_id
