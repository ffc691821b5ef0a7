-- Paper Table 2: LLM-as-a-judge accuracy (% correct) per corpus, generator, judge, paradigm
-- and query type, with the average tokens consumed per query; qtype = 'all' is the overall
-- row of each paradigm (weighted by queries, as in the paper's Avg. column).
CREATE VIEW v_accuracy_by_type AS
SELECT corpus, generator, judge, paradigm, qtype,
       CAST(COUNT(*) AS INTEGER) AS n,
       CAST(SUM(correct) AS INTEGER) AS n_correct,
       100.0 * CAST(SUM(correct) AS DOUBLE PRECISION) / CAST(COUNT(*) AS DOUBLE PRECISION) AS correct_pct,
       CAST(AVG(total_tokens) AS DOUBLE PRECISION) AS avg_tokens
FROM (
    SELECT corpus, generator, judge, paradigm, qtype, correct, total_tokens FROM v_run_judged
    UNION ALL
    SELECT corpus, generator, judge, paradigm, 'all' AS qtype, correct, total_tokens FROM v_run_judged
) AS t
GROUP BY corpus, generator, judge, paradigm, qtype
