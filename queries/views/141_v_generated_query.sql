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
            WHEN j.judge IS NULL THEN q.status
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
       CASE WHEN q.origin = 'querygen-note' THEN COALESCE(q.meta ->> 'note', 'unknown') END AS skip_reason
FROM queries q
JOIN corpora c ON c.id = q.corpus_id
LEFT JOIN (SELECT DISTINCT query_id, model AS judge FROM query_checks WHERE model <> '') j
       ON j.query_id = q.id
WHERE q.origin IN ('generated', 'querygen-note')
