-- Abstention per corpus, generator, judge and paradigm: how often a paradigm refuses on the
-- questions marked unanswerable (where a refusal is the right answer) and on the answerable
-- ones (where it is a missed answer). From v_run_judged (current runs of accepted queries):
-- n_unanswerable / n_answerable = judged runs on each kind of question; n_refused_* = of them
-- refusals (v_judgment.refusal: the judge's refusal rule, no model call); n_hallucinated = answers
-- other than a refusal to an unanswerable question. *_pct with their 95 % Wilson intervals
-- (*_ci_low / *_ci_high, in %; the formula of v_accuracy_by_type); NULL without such questions.
CREATE VIEW v_abstention AS
SELECT corpus, generator, judge, paradigm,
       n_unanswerable, n_refused_unanswerable, n_hallucinated,
       n_answerable, n_refused_answerable,
       100.0 * pu AS refusal_unanswerable_pct,
       100.0 * (pu + z * z / (2.0 * nu) - z * SQRT(pu * (1.0 - pu) / nu + z * z / (4.0 * nu * nu)))
             / (1.0 + z * z / nu) AS refusal_unanswerable_ci_low,
       100.0 * (pu + z * z / (2.0 * nu) + z * SQRT(pu * (1.0 - pu) / nu + z * z / (4.0 * nu * nu)))
             / (1.0 + z * z / nu) AS refusal_unanswerable_ci_high,
       100.0 * pa AS refusal_answerable_pct,
       100.0 * (pa + z * z / (2.0 * na) - z * SQRT(pa * (1.0 - pa) / na + z * z / (4.0 * na * na)))
             / (1.0 + z * z / na) AS refusal_answerable_ci_low,
       100.0 * (pa + z * z / (2.0 * na) + z * SQRT(pa * (1.0 - pa) / na + z * z / (4.0 * na * na)))
             / (1.0 + z * z / na) AS refusal_answerable_ci_high
FROM (
    SELECT corpus, generator, judge, paradigm,
           n_unanswerable, n_refused_unanswerable, n_hallucinated, n_answerable, n_refused_answerable,
           CAST(NULLIF(n_unanswerable, 0) AS DOUBLE PRECISION) AS nu,
           CAST(NULLIF(n_answerable, 0) AS DOUBLE PRECISION) AS na,
           CAST(n_refused_unanswerable AS DOUBLE PRECISION)
               / CAST(NULLIF(n_unanswerable, 0) AS DOUBLE PRECISION) AS pu,
           CAST(n_refused_answerable AS DOUBLE PRECISION)
               / CAST(NULLIF(n_answerable, 0) AS DOUBLE PRECISION) AS pa,
           CAST(1.959963984540054 AS DOUBLE PRECISION) AS z
    FROM (
        SELECT corpus, generator, judge, paradigm,
               CAST(SUM(unanswerable) AS INTEGER) AS n_unanswerable,
               CAST(SUM(unanswerable * refused) AS INTEGER) AS n_refused_unanswerable,
               CAST(SUM(hallucination) AS INTEGER) AS n_hallucinated,
               CAST(SUM(1 - unanswerable) AS INTEGER) AS n_answerable,
               CAST(SUM((1 - unanswerable) * refused) AS INTEGER) AS n_refused_answerable
        FROM v_run_judged
        GROUP BY corpus, generator, judge, paradigm
    ) AS c
) AS g
