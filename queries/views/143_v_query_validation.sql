-- Paper Table 6: verify-then-filter statistics of GENERATED queries per corpus and type
-- ('all' = the corpus total): generated (validated: accepted + rejected), passed (accepted),
-- pass rate %, still pending, and the failed checks of the rejected ones ("check: n, …",
-- most frequent first; counts per check in v_query_rejections).
CREATE VIEW v_query_validation AS
SELECT s.corpus, s.qtype,
       s.generated, s.passed,
       CASE WHEN s.generated > 0
            THEN 100.0 * CAST(s.passed AS DOUBLE PRECISION) / CAST(s.generated AS DOUBLE PRECISION)
       END AS pass_rate_pct,
       s.pending,
       r.rejection_reasons
FROM (
    SELECT corpus, qtype,
           CAST(SUM(CASE WHEN status IN ('accepted', 'rejected') THEN 1 ELSE 0 END) AS INTEGER) AS generated,
           CAST(SUM(CASE WHEN status = 'accepted' THEN 1 ELSE 0 END) AS INTEGER) AS passed,
           CAST(SUM(CASE WHEN status NOT IN ('accepted', 'rejected') THEN 1 ELSE 0 END) AS INTEGER) AS pending
    FROM (
        SELECT query_id, corpus, qtype, status FROM v_generated_query
        UNION ALL
        SELECT query_id, corpus, 'all' AS qtype, status FROM v_generated_query
    ) AS g
    GROUP BY corpus, qtype
) AS s
LEFT JOIN (
    SELECT corpus, qtype,
           STRING_AGG(check_name || ': ' || CAST(n_failed AS VARCHAR), ', '
                      ORDER BY n_failed DESC, check_name) AS rejection_reasons
    FROM v_query_rejections
    GROUP BY corpus, qtype
) AS r ON r.corpus = s.corpus AND r.qtype = s.qtype
