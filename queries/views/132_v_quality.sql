-- Paper Table 15: mean semantic F1, coverage, faithfulness (hard/soft) and, beside them, the
-- standard QA metrics exact_match and token_f1 (SQuAD v1.1 normalisation; not in the paper) over the current
-- runs of accepted queries per corpus, generator and paradigm (NULL scores, e.g. faithfulness
-- of LLM-only, are skipped; a mean over no score is NULL, shown as '-'), and the LLM-judge
-- correct % per judge (judge is NULL when no run of the group was judged yet).
CREATE VIEW v_quality AS
SELECT b.corpus, b.generator, b.paradigm, jd.judge,
       b.n_runs,
       b.n_scored,
       b.semantic_f1, b.coverage, b.faith_hard, b.faith_soft,
       b.exact_match, b.token_f1,
       jd.n_judged,
       jd.correct_pct
FROM (
    SELECT l.corpus, l.generator, l.paradigm,
           CAST(COUNT(*) AS INTEGER) AS n_runs,
           CAST(COUNT(s.semantic_f1) AS INTEGER) AS n_scored,
           CAST(AVG(s.semantic_f1) AS DOUBLE PRECISION) AS semantic_f1,
           CAST(AVG(s.coverage) AS DOUBLE PRECISION) AS coverage,
           CAST(AVG(s.faith_hard) AS DOUBLE PRECISION) AS faith_hard,
           CAST(AVG(s.faith_soft) AS DOUBLE PRECISION) AS faith_soft,
           CAST(AVG(s.exact_match) AS DOUBLE PRECISION) AS exact_match,
           CAST(AVG(s.token_f1) AS DOUBLE PRECISION) AS token_f1
    FROM v_run_latest l
    LEFT JOIN v_run_score s ON s.run_id = l.run_id
    WHERE l.query_status = 'accepted'
    GROUP BY l.corpus, l.generator, l.paradigm
) AS b
LEFT JOIN (
    SELECT corpus, generator, paradigm, judge,
           CAST(COUNT(*) AS INTEGER) AS n_judged,
           100.0 * CAST(SUM(correct) AS DOUBLE PRECISION) / CAST(COUNT(*) AS DOUBLE PRECISION) AS correct_pct
    FROM v_run_judged
    GROUP BY corpus, generator, paradigm, judge
) AS jd ON jd.corpus = b.corpus AND jd.generator = b.generator AND jd.paradigm = b.paradigm
