-- Paper Table 13: share (%) of correct / incorrect / incomplete (no answer: refusals and
-- partial answers) labels per corpus, generator, judge, paradigm and query type
-- (qtype = 'all' pools the types), with the mean judge agreement over samples.
CREATE VIEW v_judgment_breakdown AS
SELECT corpus, generator, judge, paradigm, qtype,
       CAST(COUNT(*) AS INTEGER) AS n,
       100.0 * CAST(SUM(CASE WHEN label = 'correct' THEN 1 ELSE 0 END) AS DOUBLE PRECISION)
             / CAST(COUNT(*) AS DOUBLE PRECISION) AS correct_pct,
       100.0 * CAST(SUM(CASE WHEN label = 'incorrect' THEN 1 ELSE 0 END) AS DOUBLE PRECISION)
             / CAST(COUNT(*) AS DOUBLE PRECISION) AS incorrect_pct,
       100.0 * CAST(SUM(CASE WHEN label = 'incomplete' THEN 1 ELSE 0 END) AS DOUBLE PRECISION)
             / CAST(COUNT(*) AS DOUBLE PRECISION) AS incomplete_pct,
       CAST(AVG(agreement) AS DOUBLE PRECISION) AS avg_agreement
FROM (
    SELECT corpus, generator, judge, paradigm, qtype, label, agreement FROM v_run_judged
    UNION ALL
    SELECT corpus, generator, judge, paradigm, 'all' AS qtype, label, agreement FROM v_run_judged
) AS t
GROUP BY corpus, generator, judge, paradigm, qtype
