-- A reviewer's label beside the judge's verdict, one row per (reviewed run, reviewer): the
-- human labels `review pull` brought back from the MLflow review experiment (human_labels,
-- kind 'run'; the reviewer's latest label when a run was reviewed in several traces), with
-- the run's corpus, paradigm, generator and query type. judge_label is the verdict the trace
-- showed; agree = 1 when the two are the same label, correct_agree = 1 when they agree on
-- correct vs. not correct (all the oracle label uses). The judge's agreement figures (accuracy,
-- Cohen's kappa with its interval, confusion matrix, false-correct rate) are computed from these
-- rows by ragrouter.review.figures (`review pull`, reading.human_agreement).
CREATE VIEW v_human_label AS
SELECT h.run_id,
       h.query_id,
       c.name AS corpus,
       r.paradigm,
       r.generator,
       q.qtype,
       CAST(COALESCE(q.unanswerable, FALSE) AS INTEGER) AS unanswerable,
       h.judge,
       h.judge_label,
       h.label AS human_label,
       h.reviewer,
       h.comment,
       h.labelled_at,
       CAST(CASE WHEN h.label = h.judge_label THEN 1 ELSE 0 END AS INTEGER) AS agree,
       CAST(CASE WHEN (h.label = 'correct') = (h.judge_label = 'correct') THEN 1 ELSE 0 END AS INTEGER) AS correct_agree
FROM (
    SELECT hl.*,
           ROW_NUMBER() OVER (PARTITION BY hl.run_id, hl.reviewer ORDER BY hl.labelled_at DESC, hl.id DESC) AS rk
    FROM human_labels hl
    WHERE hl.kind = 'run' AND hl.run_id IS NOT NULL
) AS h
JOIN paradigm_runs r ON r.id = h.run_id
JOIN queries q ON q.id = h.query_id
JOIN corpora c ON c.id = q.corpus_id
WHERE h.rk <= 1
