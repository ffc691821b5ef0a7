-- Paper Table 2: LLM-as-a-judge accuracy (% correct) per corpus, generator, judge, paradigm
-- and query type, with the average tokens consumed per query. Only real query types: the
-- overall row of each paradigm (the paper's Avg. column, weighted by queries) is its own view,
-- v_accuracy_overall, so aggregating this one counts no run twice.
-- n = judged runs, n_correct = of them correct; ci_low / ci_high = the 95 % Wilson score interval
-- of correct_pct, in % (z = 1.959963984540054; equal to statsmodels proportion_confint(method=
-- 'wilson'), tested). avg_tokens = total with the amortised graph construction (paper eq. 20,
-- v_run_latest); avg_inference_tokens = per-query retrieval + generation only; avg_build_tokens =
-- the construction share. n_empty_context = runs whose retrieval put nothing into the context.
CREATE VIEW v_accuracy_by_type AS
SELECT corpus, generator, judge, paradigm, qtype, n, n_correct, correct_pct,
       100.0 * (p + z * z / (2.0 * n) - z * SQRT(p * (1.0 - p) / n + z * z / (4.0 * n * n)))
             / (1.0 + z * z / n) AS ci_low,
       100.0 * (p + z * z / (2.0 * n) + z * SQRT(p * (1.0 - p) / n + z * z / (4.0 * n * n)))
             / (1.0 + z * z / n) AS ci_high,
       avg_tokens, avg_inference_tokens, avg_build_tokens, n_empty_context
FROM (
    SELECT corpus, generator, judge, paradigm, qtype,
           CAST(COUNT(*) AS INTEGER) AS n,
           CAST(SUM(correct) AS INTEGER) AS n_correct,
           100.0 * CAST(SUM(correct) AS DOUBLE PRECISION) / CAST(COUNT(*) AS DOUBLE PRECISION) AS correct_pct,
           CAST(SUM(correct) AS DOUBLE PRECISION) / CAST(COUNT(*) AS DOUBLE PRECISION) AS p,
           CAST(1.959963984540054 AS DOUBLE PRECISION) AS z,
           CAST(AVG(total_tokens) AS DOUBLE PRECISION) AS avg_tokens,
           CAST(AVG(inference_tokens) AS DOUBLE PRECISION) AS avg_inference_tokens,
           CAST(AVG(build_tokens) AS DOUBLE PRECISION) AS avg_build_tokens,
           CAST(SUM(empty_context) AS INTEGER) AS n_empty_context
    FROM v_run_judged
    GROUP BY corpus, generator, judge, paradigm, qtype
) AS g
