-- How far to trust each judge: its verdicts on the calibration cases (candidate answers whose
-- label is known by construction; ragrouter/evaluation/calibration.py), per judge model, case
-- set (the construction version) and TRUE label. A case's verdict is the majority over the
-- judge's samples, ties broken toward the worse label as in v_judgment. judged_* count the
-- verdicts per label (a row of the confusion matrix), agreement = share of verdicts equal to
-- the true label, avg_sample_agreement = mean share of samples that gave the verdict.
-- The true label follows from the case kind (paradigm_runs.config_hash of a 'calibration'
-- run): gold/paraphrase/extra_clause/unanswerable_refusal -> correct, refusal/first_clause/
-- coarsened -> incomplete, other_gold/altered/unanswerable_answer -> incorrect (the registry
-- ragrouter.evaluation.calibration_cases.KINDS; a test keeps the two equal). Cohen's kappa per judge comes from these rows (ragrouter.report.calibration).
-- rk <= 1, not rk = 1: PostgreSQL estimates an equality on a window function's result at
-- 0.5 % of the rows and then nests loops over this view (v_run_judged took 11 s instead of 0.06 s
-- on 9,480 runs; benchmarks/README.md, issue 17). For ROW_NUMBER() the two are the same filter.
CREATE VIEW v_judge_calibration AS
SELECT judge,
       case_set,
       true_label,
       CAST(COUNT(*) AS INTEGER) AS n_cases,
       CAST(SUM(CASE WHEN label = 'correct' THEN 1 ELSE 0 END) AS INTEGER) AS judged_correct,
       CAST(SUM(CASE WHEN label = 'incorrect' THEN 1 ELSE 0 END) AS INTEGER) AS judged_incorrect,
       CAST(SUM(CASE WHEN label = 'incomplete' THEN 1 ELSE 0 END) AS INTEGER) AS judged_incomplete,
       CAST(SUM(CASE WHEN label = true_label THEN 1 ELSE 0 END) AS DOUBLE PRECISION)
           / CAST(COUNT(*) AS DOUBLE PRECISION) AS agreement,
       CAST(AVG(sample_agreement) AS DOUBLE PRECISION) AS avg_sample_agreement
FROM (
    SELECT m.run_id,
           m.judge,
           r.generator AS case_set,
           CASE r.config_hash
               WHEN 'gold' THEN 'correct'
               WHEN 'paraphrase' THEN 'correct'
               WHEN 'extra_clause' THEN 'correct'
               WHEN 'unanswerable_refusal' THEN 'correct'
               WHEN 'refusal' THEN 'incomplete'
               WHEN 'first_clause' THEN 'incomplete'
               WHEN 'coarsened' THEN 'incomplete'
               WHEN 'other_gold' THEN 'incorrect'
               WHEN 'altered' THEN 'incorrect'
               WHEN 'unanswerable_answer' THEN 'incorrect'
           END AS true_label,
           m.label,
           CAST(m.n_label AS DOUBLE PRECISION) / CAST(m.n_samples AS DOUBLE PRECISION) AS sample_agreement
    FROM (
        SELECT run_id, judge, label, n_label,
               SUM(n_label) OVER (PARTITION BY run_id, judge) AS n_samples,
               ROW_NUMBER() OVER (
                   PARTITION BY run_id, judge
                   ORDER BY n_label DESC,
                            CASE label WHEN 'incorrect' THEN 1 WHEN 'incomplete' THEN 2
                                       WHEN 'correct' THEN 3 ELSE 0 END,
                            label
               ) AS rk
        FROM (
            SELECT run_id, judge, label, COUNT(*) AS n_label
            FROM judgments
            WHERE is_calibration
            GROUP BY run_id, judge, label
        ) AS per_label
    ) AS m
    JOIN paradigm_runs r ON r.id = m.run_id
    WHERE m.rk <= 1 AND r.paradigm = 'calibration'
) AS cases
WHERE true_label IS NOT NULL
GROUP BY judge, case_set, true_label
