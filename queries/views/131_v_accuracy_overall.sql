-- Paper Table 2's Avg. column: LLM-as-a-judge accuracy (% correct) per corpus, generator, judge
-- and paradigm over ALL query types (weighted by queries), the columns of v_accuracy_by_type
-- without qtype (the per-type rows live there; this view is their total, kept apart so neither
-- view counts a run twice). n = judged runs, n_correct = of them correct, ci_low / ci_high = the
-- 95 % Wilson score interval of correct_pct in %; avg_tokens = total with the amortised graph
-- construction, avg_inference_tokens = retrieval + generation only, avg_build_tokens = the
-- construction share; n_empty_context = runs whose retrieval put nothing into the context.
CREATE VIEW v_accuracy_overall AS
SELECT corpus, generator, judge, paradigm, n, n_correct, correct_pct,
       100.0 * (p + z * z / (2.0 * n) - z * SQRT(p * (1.0 - p) / n + z * z / (4.0 * n * n)))
             / (1.0 + z * z / n) AS ci_low,
       100.0 * (p + z * z / (2.0 * n) + z * SQRT(p * (1.0 - p) / n + z * z / (4.0 * n * n)))
             / (1.0 + z * z / n) AS ci_high,
       avg_tokens, avg_inference_tokens, avg_build_tokens, n_empty_context
FROM (
    SELECT corpus, generator, judge, paradigm,
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
    GROUP BY corpus, generator, judge, paradigm
) AS g
