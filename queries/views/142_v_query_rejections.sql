-- Why generated queries were rejected (paper App. A.2): per corpus, type (and 'all'),
-- generator, strategy, judge and check, the number of REJECTED queries that failed that check
-- (verify-then-filter checks of that judge, or mechanical ones recorded at generation:
-- bridge_leak, step_question, step_description). A query can fail several checks, so the
-- counts may add up to more than the rejected queries. is_total = 1 on the 'all' rows (the
-- corpus total beside its types): aggregate over is_total = 0 to count no query twice.
CREATE VIEW v_query_rejections AS
SELECT g.corpus, g.qtype, g.generator, g.strategy, g.judge, qc.check_name,
       CAST(COUNT(DISTINCT g.query_id) AS INTEGER) AS n_failed,
       CASE WHEN g.qtype = 'all' THEN 1 ELSE 0 END AS is_total
FROM (
    SELECT query_id, corpus, qtype, generator, strategy, judge, status FROM v_generated_query
    UNION ALL
    SELECT query_id, corpus, 'all' AS qtype, generator, strategy, judge, status FROM v_generated_query
) AS g
JOIN query_checks qc ON qc.query_id = g.query_id AND NOT qc.passed
                    AND (qc.model = '' OR g.judge = '' OR qc.model = g.judge)
WHERE g.status = 'rejected'
GROUP BY g.corpus, g.qtype, g.generator, g.strategy, g.judge, qc.check_name
