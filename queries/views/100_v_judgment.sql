-- One LLM-as-a-judge label per (paradigm run, judge model): the majority label over that
-- judge's samples (judgments.sample_index). A tie is broken toward the WORSE label
-- (incorrect < incomplete < correct; an unknown label ranks below all three), so a split
-- verdict is never counted as correct. agreement = share of the samples that gave the
-- chosen label (1.0 for a single sample). Calibration judgments are left out.
-- The judge is a column, not a setting: downstream views group by it.
-- refusal = 1 when the judged answer is a refusal (judgments.refusal, decided by the judge's
-- rule without a model call; rows written before that column existed: the rule's fixed reason
-- 'the answer is a refusal (labelled without a judge call)' on a row without a ledger call).
-- rk <= 1, not rk = 1: PostgreSQL estimates an equality on a window function's result at
-- 0.5 % of the rows and then nests loops over this view (v_run_judged took 11 s instead of 0.06 s
-- on 9,480 runs; benchmarks/README.md, issue 17). For ROW_NUMBER() the two are the same filter.
CREATE VIEW v_judgment AS
SELECT run_id,
       judge,
       label,
       CAST(n_samples AS INTEGER) AS n_samples,
       CAST(n_label AS INTEGER) AS n_agree,
       CAST(n_label AS DOUBLE PRECISION) / CAST(n_samples AS DOUBLE PRECISION) AS agreement,
       CAST(refusal AS INTEGER) AS refusal
FROM (
    SELECT run_id, judge, label, n_label,
           SUM(n_label) OVER (PARTITION BY run_id, judge) AS n_samples,
           MAX(n_refusal) OVER (PARTITION BY run_id, judge) AS refusal,
           ROW_NUMBER() OVER (
               PARTITION BY run_id, judge
               ORDER BY n_label DESC,
                        CASE label WHEN 'incorrect' THEN 1 WHEN 'incomplete' THEN 2
                                   WHEN 'correct' THEN 3 ELSE 0 END,
                        label
           ) AS rk
    FROM (
        SELECT run_id, judge, label, COUNT(*) AS n_label,
               MAX(CASE WHEN refusal THEN 1
                        WHEN refusal IS NULL AND llm_call_id IS NULL
                             AND reason = 'the answer is a refusal (labelled without a judge call)' THEN 1
                        ELSE 0 END) AS n_refusal
        FROM judgments
        WHERE NOT is_calibration
        GROUP BY run_id, judge, label
    ) AS per_label
) AS ranked
WHERE rk <= 1
