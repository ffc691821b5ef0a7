-- The router dataset (contract with ragrouter.routers.dataset): one row per (accepted query,
-- generator, judge) that has at least one judged paradigm run: ids, query type and text, the
-- six corpus indicators (avg_distance = dist_mean), the oracle label ('unanswerable' for a
-- question marked unanswerable, whose unanswerable column is 1), and per paradigm p
-- correct__p (0/1), tokens__p (total tokens consumed), f1__p (semantic F1), and the standard QA
-- metrics em__p (exact match) and token_f1__p (token F1, SQuAD v1.1 normalisation).
-- SQL cannot pivot an unknown paradigm set portably, so the five default paradigms and
-- iterative_naive are pivoted explicitly; a paradigm that did not run (or was not judged) is
-- NULL. For any other paradigm set pivot v_router_outcomes in Python
-- (ragrouter.report.data.router_dataset). tokens__p include the amortised graph construction
-- (v_run_latest.total_tokens). Queries whose oracle label is undecided (NULL: correct paradigms
-- without an F1 yet) are left out.
CREATE VIEW v_router_dataset AS
SELECT o.query_id,
       o.corpus,
       o.generator,
       o.judge,
       q.qtype,
       q.question AS query_text,
       p.lcc_ratio,
       p.density,
       p.clustering,
       p.intrinsic_dim,
       p.hubness,
       p.dist_mean AS avg_distance,
       o.label,
       o.unanswerable,
       w.correct__llm_only,
       w.correct__naive,
       w.correct__graph,
       w.correct__hybrid,
       w.correct__iterative,
       w.correct__iterative_naive,
       w.tokens__llm_only,
       w.tokens__naive,
       w.tokens__graph,
       w.tokens__hybrid,
       w.tokens__iterative,
       w.tokens__iterative_naive,
       w.f1__llm_only,
       w.f1__naive,
       w.f1__graph,
       w.f1__hybrid,
       w.f1__iterative,
       w.f1__iterative_naive,
       w.em__llm_only,
       w.em__naive,
       w.em__graph,
       w.em__hybrid,
       w.em__iterative,
       w.em__iterative_naive,
       w.token_f1__llm_only,
       w.token_f1__naive,
       w.token_f1__graph,
       w.token_f1__hybrid,
       w.token_f1__iterative,
       w.token_f1__iterative_naive
FROM (SELECT * FROM v_oracle_label WHERE label IS NOT NULL) o
JOIN queries q ON q.id = o.query_id
LEFT JOIN v_corpus_profile p ON p.corpus_id = o.corpus_id
JOIN (
    SELECT query_id, generator, judge,
           MAX(CASE WHEN paradigm = 'llm_only' THEN correct END) AS correct__llm_only,
           MAX(CASE WHEN paradigm = 'naive' THEN correct END) AS correct__naive,
           MAX(CASE WHEN paradigm = 'graph' THEN correct END) AS correct__graph,
           MAX(CASE WHEN paradigm = 'hybrid' THEN correct END) AS correct__hybrid,
           MAX(CASE WHEN paradigm = 'iterative' THEN correct END) AS correct__iterative,
           MAX(CASE WHEN paradigm = 'iterative_naive' THEN correct END) AS correct__iterative_naive,
           MAX(CASE WHEN paradigm = 'llm_only' THEN tokens END) AS tokens__llm_only,
           MAX(CASE WHEN paradigm = 'naive' THEN tokens END) AS tokens__naive,
           MAX(CASE WHEN paradigm = 'graph' THEN tokens END) AS tokens__graph,
           MAX(CASE WHEN paradigm = 'hybrid' THEN tokens END) AS tokens__hybrid,
           MAX(CASE WHEN paradigm = 'iterative' THEN tokens END) AS tokens__iterative,
           MAX(CASE WHEN paradigm = 'iterative_naive' THEN tokens END) AS tokens__iterative_naive,
           MAX(CASE WHEN paradigm = 'llm_only' THEN f1 END) AS f1__llm_only,
           MAX(CASE WHEN paradigm = 'naive' THEN f1 END) AS f1__naive,
           MAX(CASE WHEN paradigm = 'graph' THEN f1 END) AS f1__graph,
           MAX(CASE WHEN paradigm = 'hybrid' THEN f1 END) AS f1__hybrid,
           MAX(CASE WHEN paradigm = 'iterative' THEN f1 END) AS f1__iterative,
           MAX(CASE WHEN paradigm = 'iterative_naive' THEN f1 END) AS f1__iterative_naive,
           MAX(CASE WHEN paradigm = 'llm_only' THEN em END) AS em__llm_only,
           MAX(CASE WHEN paradigm = 'naive' THEN em END) AS em__naive,
           MAX(CASE WHEN paradigm = 'graph' THEN em END) AS em__graph,
           MAX(CASE WHEN paradigm = 'hybrid' THEN em END) AS em__hybrid,
           MAX(CASE WHEN paradigm = 'iterative' THEN em END) AS em__iterative,
           MAX(CASE WHEN paradigm = 'iterative_naive' THEN em END) AS em__iterative_naive,
           MAX(CASE WHEN paradigm = 'llm_only' THEN token_f1 END) AS token_f1__llm_only,
           MAX(CASE WHEN paradigm = 'naive' THEN token_f1 END) AS token_f1__naive,
           MAX(CASE WHEN paradigm = 'graph' THEN token_f1 END) AS token_f1__graph,
           MAX(CASE WHEN paradigm = 'hybrid' THEN token_f1 END) AS token_f1__hybrid,
           MAX(CASE WHEN paradigm = 'iterative' THEN token_f1 END) AS token_f1__iterative,
           MAX(CASE WHEN paradigm = 'iterative_naive' THEN token_f1 END) AS token_f1__iterative_naive
    FROM v_router_outcomes
    GROUP BY query_id, generator, judge
) AS w ON w.query_id = o.query_id AND w.generator = o.generator AND w.judge = o.judge
