-- Paper Table 6: verify-then-filter statistics of query generation per corpus, type ('all' =
-- the corpus total), generator, strategy, querygen seed (one pass: its units and chain order;
-- '' for queries generated before the seed was stored) and judge: generated (validated
-- candidates: accepted + rejected), passed (accepted), pass rate %, still pending, skipped (units
-- that produced no query, with skip_reasons "reason: n, ...") and the failed checks of the
-- rejected ones ("check: n, ...", most frequent first; counts per check in v_query_rejections).
-- Rows that no judge has seen (skipped units, candidates rejected at generation, pending ones)
-- count toward every judge of the same corpus, generator, strategy and seed (a '' judge row only
-- when there is none), so a pass with another generator, judge or seed is another row.
-- A person's review beside the checks (`review pull`, v_generated_query.human_status): reviewed
-- (validated candidates a person labelled), reviewed_passed (of those, accepted by the checks),
-- reviewer_accepted (accepted by the reviewer), benchmark (accepted after review: the reviewer's
-- verdict where there is one, else the checks'; the queries the answer stages take) and
-- reviewers (their names). is_total = 1 on the 'all' rows (the corpus total beside its types):
-- aggregate over is_total = 0 to count no query twice.
CREATE VIEW v_query_validation AS
WITH g0 AS (
    SELECT query_id, corpus, qtype, generator, strategy, querygen_seed, judge, status, skip_reason, human_status
    FROM v_generated_query
),
judges AS (
    SELECT DISTINCT corpus, generator, strategy, querygen_seed, judge FROM g0 WHERE judge <> ''
),
g1 AS (
    SELECT * FROM g0 WHERE judge <> ''
    UNION ALL
    SELECT g0.query_id, g0.corpus, g0.qtype, g0.generator, g0.strategy, g0.querygen_seed, j.judge, g0.status, g0.skip_reason,
           g0.human_status
    FROM g0 JOIN judges j ON j.corpus = g0.corpus AND j.generator = g0.generator AND j.strategy = g0.strategy
                                 AND j.querygen_seed = g0.querygen_seed
    WHERE g0.judge = ''
    UNION ALL
    SELECT * FROM g0
    WHERE g0.judge = '' AND NOT EXISTS (SELECT 1 FROM judges j WHERE j.corpus = g0.corpus
                                        AND j.generator = g0.generator AND j.strategy = g0.strategy
                                        AND j.querygen_seed = g0.querygen_seed)
),
g AS (
    SELECT query_id, corpus, qtype, generator, strategy, querygen_seed, judge, status, skip_reason, human_status FROM g1
    UNION ALL
    SELECT query_id, corpus, 'all' AS qtype, generator, strategy, querygen_seed, judge, status, skip_reason, human_status
    FROM g1
),
rv AS (
    SELECT corpus, qtype, generator, strategy, querygen_seed, judge,
           STRING_AGG(reviewer, ', ' ORDER BY reviewer) AS reviewers
    FROM (SELECT DISTINCT g.corpus, g.qtype, g.generator, g.strategy, g.querygen_seed, g.judge, hl.reviewer
          FROM g JOIN human_labels hl ON hl.query_id = g.query_id AND hl.kind = 'query'
          WHERE g.status IN ('accepted', 'rejected')) AS d
    GROUP BY corpus, qtype, generator, strategy, querygen_seed, judge
),
rej AS (
    SELECT g.corpus, g.qtype, g.generator, g.strategy, g.querygen_seed, g.judge, qc.check_name,
           COUNT(DISTINCT g.query_id) AS n_failed
    FROM g JOIN query_checks qc ON qc.query_id = g.query_id AND NOT qc.passed
                               AND (qc.model = '' OR qc.model = g.judge)
    WHERE g.status = 'rejected'
    GROUP BY g.corpus, g.qtype, g.generator, g.strategy, g.querygen_seed, g.judge, qc.check_name
),
skip AS (
    SELECT corpus, qtype, generator, strategy, querygen_seed, judge, skip_reason, COUNT(*) AS n_skipped
    FROM g WHERE status = 'skipped'
    GROUP BY corpus, qtype, generator, strategy, querygen_seed, judge, skip_reason
)
SELECT s.corpus, s.qtype, s.generator, s.strategy, s.querygen_seed, s.judge,
       s.generated, s.passed,
       CASE WHEN s.generated > 0
            THEN 100.0 * CAST(s.passed AS DOUBLE PRECISION) / CAST(s.generated AS DOUBLE PRECISION)
       END AS pass_rate_pct,
       s.pending,
       s.skipped,
       k.skip_reasons,
       r.rejection_reasons,
       s.reviewed,
       s.reviewed_passed,
       s.reviewer_accepted,
       s.benchmark,
       v.reviewers,
       CASE WHEN s.qtype = 'all' THEN 1 ELSE 0 END AS is_total
FROM (
    SELECT corpus, qtype, generator, strategy, querygen_seed, judge,
           CAST(SUM(CASE WHEN status IN ('accepted', 'rejected') THEN 1 ELSE 0 END) AS INTEGER) AS generated,
           CAST(SUM(CASE WHEN status = 'accepted' THEN 1 ELSE 0 END) AS INTEGER) AS passed,
           CAST(SUM(CASE WHEN status NOT IN ('accepted', 'rejected', 'skipped') THEN 1 ELSE 0 END) AS INTEGER)
               AS pending,
           CAST(SUM(CASE WHEN status = 'skipped' THEN 1 ELSE 0 END) AS INTEGER) AS skipped,
           CAST(SUM(CASE WHEN status IN ('accepted', 'rejected') AND human_status IS NOT NULL THEN 1 ELSE 0 END)
                AS INTEGER) AS reviewed,
           CAST(SUM(CASE WHEN status = 'accepted' AND human_status IS NOT NULL THEN 1 ELSE 0 END) AS INTEGER)
               AS reviewed_passed,
           CAST(SUM(CASE WHEN status IN ('accepted', 'rejected') AND human_status = 'accepted' THEN 1 ELSE 0 END)
                AS INTEGER) AS reviewer_accepted,
           CAST(SUM(CASE WHEN status IN ('accepted', 'rejected') AND COALESCE(human_status, status) = 'accepted'
                         THEN 1 ELSE 0 END) AS INTEGER) AS benchmark
    FROM g
    GROUP BY corpus, qtype, generator, strategy, querygen_seed, judge
) AS s
LEFT JOIN (
    SELECT corpus, qtype, generator, strategy, querygen_seed, judge,
           STRING_AGG(check_name || ': ' || CAST(n_failed AS VARCHAR), ', '
                      ORDER BY n_failed DESC, check_name) AS rejection_reasons
    FROM rej
    GROUP BY corpus, qtype, generator, strategy, querygen_seed, judge
) AS r ON r.corpus = s.corpus AND r.qtype = s.qtype AND r.generator = s.generator
      AND r.strategy = s.strategy AND r.querygen_seed = s.querygen_seed AND r.judge = s.judge
LEFT JOIN (
    SELECT corpus, qtype, generator, strategy, querygen_seed, judge,
           STRING_AGG(skip_reason || ': ' || CAST(n_skipped AS VARCHAR), ', '
                      ORDER BY n_skipped DESC, skip_reason) AS skip_reasons
    FROM skip
    GROUP BY corpus, qtype, generator, strategy, querygen_seed, judge
) AS k ON k.corpus = s.corpus AND k.qtype = s.qtype AND k.generator = s.generator
      AND k.strategy = s.strategy AND k.querygen_seed = s.querygen_seed AND k.judge = s.judge
LEFT JOIN rv AS v ON v.corpus = s.corpus AND v.qtype = s.qtype AND v.generator = s.generator
      AND v.strategy = s.strategy AND v.querygen_seed = s.querygen_seed AND v.judge = s.judge
