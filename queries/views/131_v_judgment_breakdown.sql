-- Paper Table 13: share (%) of correct / incorrect / incomplete (no answer: refusals and
-- partial answers) labels per corpus, generator, judge, paradigm and query type
-- (qtype = 'all' pools the types), with the mean judge agreement over samples.
-- is_total = 1 on those pooled rows, 0 on a real type: aggregate over is_total = 0 (or read the
-- is_total = 1 rows) so that no judged run is counted twice.
-- n = judged runs; ci_low / ci_high = 95 % Wilson interval of correct_pct (in %, as in
-- v_accuracy_by_type); n_correct / n_incorrect / n_incomplete = the counts behind the shares.
CREATE VIEW v_judgment_breakdown AS
SELECT corpus, generator, judge, paradigm, qtype, n,
       n_correct, n_incorrect, n_incomplete,
       100.0 * p AS correct_pct,
       100.0 * CAST(n_incorrect AS DOUBLE PRECISION) / CAST(n AS DOUBLE PRECISION) AS incorrect_pct,
       100.0 * CAST(n_incomplete AS DOUBLE PRECISION) / CAST(n AS DOUBLE PRECISION) AS incomplete_pct,
       100.0 * (p + z * z / (2.0 * n) - z * SQRT(p * (1.0 - p) / n + z * z / (4.0 * n * n)))
             / (1.0 + z * z / n) AS ci_low,
       100.0 * (p + z * z / (2.0 * n) + z * SQRT(p * (1.0 - p) / n + z * z / (4.0 * n * n)))
             / (1.0 + z * z / n) AS ci_high,
       avg_agreement,
       CASE WHEN qtype = 'all' THEN 1 ELSE 0 END AS is_total
FROM (
    SELECT corpus, generator, judge, paradigm, qtype,
           CAST(COUNT(*) AS INTEGER) AS n,
           CAST(SUM(CASE WHEN label = 'correct' THEN 1 ELSE 0 END) AS INTEGER) AS n_correct,
           CAST(SUM(CASE WHEN label = 'incorrect' THEN 1 ELSE 0 END) AS INTEGER) AS n_incorrect,
           CAST(SUM(CASE WHEN label = 'incomplete' THEN 1 ELSE 0 END) AS INTEGER) AS n_incomplete,
           CAST(SUM(CASE WHEN label = 'correct' THEN 1 ELSE 0 END) AS DOUBLE PRECISION)
               / CAST(COUNT(*) AS DOUBLE PRECISION) AS p,
           CAST(1.959963984540054 AS DOUBLE PRECISION) AS z,
           CAST(AVG(agreement) AS DOUBLE PRECISION) AS avg_agreement
    FROM (
        SELECT corpus, generator, judge, paradigm, qtype, label, agreement FROM v_run_judged
        UNION ALL
        SELECT corpus, generator, judge, paradigm, 'all' AS qtype, label, agreement FROM v_run_judged
    ) AS t
    GROUP BY corpus, generator, judge, paradigm, qtype
) AS g
