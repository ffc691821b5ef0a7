-- Generated queries and query-generation units that produced none (Table 6), one row per
-- query and judge: the type label of paper Table 6 ('factual', '2-hop' / '3-hop' for reasoning
-- queries with known hops, 'reasoning' otherwise, 'summary'), the generator model, the
-- reasoning strategy ('one_prompt' or 'stepwise'; factual and summary units are one prompt),
-- the querygen seed of its pass (querygen.seed as text; '' when not stored), the judge (the
-- model of its LLM checks; '' when none ran) and the status FOR THAT JUDGE:
-- 'skipped' for a note (a unit without a query; skip_reason = no_chain, chains_used, no_entity,
-- invalid_reply, inconsistent, ...), else 'rejected' when a check by that judge or a
-- mechanical one (model '') failed, 'accepted' when its LLM checks are all in (3 for
-- reasoning, 2 otherwise) and the query is settled, else 'pending'. A query validated by two
-- judges is two rows; without LLM checks it is one row with judge '' and its stored status.
-- A query a person reviewed (`review pull`; origin 'human-reviewed' when the reviewer overrode
-- the checks, its stored status then the reviewer's and the checks' kept in meta.checks_status)
-- keeps the checks' status here; human_status is the reviewers' verdict ('accepted' /
-- 'rejected': each reviewer's latest label, accepted when more reviewers accepted than not;
-- NULL = not reviewed) and reviewers their names (comma-separated).
CREATE VIEW v_generated_query AS
SELECT q.id AS query_id,
       c.name AS corpus,
       CASE WHEN q.qtype = 'reasoning' AND q.hops IS NOT NULL
            THEN CAST(q.hops AS VARCHAR) || '-hop'
            ELSE q.qtype END AS qtype,
       COALESCE(q.generator_model, '') AS generator,
       CASE WHEN q.qtype = 'reasoning' THEN COALESCE(q.meta ->> 'strategy', 'one_prompt')
            ELSE 'one_prompt' END AS strategy,
       COALESCE(q.meta ->> 'querygen_seed', '') AS querygen_seed,
       COALESCE(j.judge, '') AS judge,
       CASE WHEN q.origin = 'querygen-note' THEN 'skipped'
            WHEN j.judge IS NULL THEN COALESCE(q.meta ->> 'checks_status', q.status)
            WHEN EXISTS (SELECT 1 FROM query_checks f
                         WHERE f.query_id = q.id AND NOT f.passed AND (f.model = '' OR f.model = j.judge))
                 THEN 'rejected'
            WHEN q.status <> 'pending'
                 AND (SELECT COUNT(DISTINCT a.check_name) FROM query_checks a
                      WHERE a.query_id = q.id AND a.model = j.judge
                        AND a.check_name IN ('grounding', 'shortcut', 'parametric_leak'))
                     >= CASE WHEN q.qtype = 'reasoning' THEN 3 ELSE 2 END
                 THEN 'accepted'
            ELSE 'pending' END AS status,
       CASE WHEN q.origin = 'querygen-note' THEN COALESCE(q.meta ->> 'note', 'unknown') END AS skip_reason,
       h.human_status,
       h.reviewers
FROM queries q
JOIN corpora c ON c.id = q.corpus_id
LEFT JOIN (SELECT DISTINCT query_id, model AS judge FROM query_checks WHERE model <> '') j
       ON j.query_id = q.id
LEFT JOIN (
    SELECT query_id,
           CASE WHEN SUM(CASE WHEN label = 'accepted' THEN 1 ELSE 0 END) * 2 > COUNT(*)
                THEN 'accepted' ELSE 'rejected' END AS human_status,
           STRING_AGG(reviewer, ', ' ORDER BY reviewer) AS reviewers
    FROM (
        SELECT query_id, reviewer, label,
               ROW_NUMBER() OVER (PARTITION BY query_id, reviewer ORDER BY labelled_at DESC, id DESC) AS rk
        FROM human_labels
        WHERE kind = 'query'
    ) AS latest
    WHERE rk <= 1
    GROUP BY query_id
) AS h ON h.query_id = q.id
WHERE q.origin IN ('generated', 'querygen-note', 'human-reviewed')
