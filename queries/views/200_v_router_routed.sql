-- Every router prediction with the paradigm actually run. A 'cannot_answer' prediction falls
-- back to the most frequent optimal paradigm of the prediction's TRAINING fold (the true
-- labels other than 'cannot_answer' of the same router, features, encoder, generator and
-- dataset in the other folds; ties: alphabetical), so no test label leaks into the correct
-- rate (the paper says "globally"). Where training stored the fold's fallback
-- (router_fold_metrics.fallback, ragrouter.routers.evaluate.fallback_paradigm) that value is
-- used, so this view and MLflow run the same paradigm. An 'unanswerable' prediction runs no
-- paradigm (the router abstains): routed = 'unanswerable', correct = 1 when the true label is
-- 'unanswerable' (the question is marked so), tokens = 0. For dataset = 'store' the routed
-- paradigm's outcome comes from v_router_outcomes, once per judge (judge is NULL for imported
-- datasets, whose outcomes live in the dataset file, and for store queries no judge judged).
-- rk <= 1, not rk = 1: PostgreSQL estimates an equality on a window function's result at
-- 0.5 % of the rows and then nests loops over this view (v_run_judged took 11 s instead of 0.06 s
-- on 9,480 runs; benchmarks/README.md, issue 17). For ROW_NUMBER() the two are the same filter.
CREATE VIEW v_router_routed AS
SELECT p.id AS prediction_id,
       p.router, p.features, p.encoder, p.generator, p.dataset, p.fold,
       p.query_key, p.query_id,
       o.corpus,
       p.predicted, p.true_label,
       CASE WHEN p.predicted = p.true_label THEN 1 ELSE 0 END AS hit,
       CASE WHEN p.predicted = 'cannot_answer' THEN COALESCE(fm.fallback, f.fallback) ELSE p.predicted END AS routed,
       jg.judge,
       CASE WHEN p.predicted = 'unanswerable'
            THEN CASE WHEN jg.judge IS NOT NULL THEN CASE WHEN p.true_label = 'unanswerable' THEN 1 ELSE 0 END END
            ELSE o.correct END AS correct,
       CASE WHEN p.predicted = 'unanswerable'
            THEN CASE WHEN jg.judge IS NOT NULL THEN 0.0 END
            ELSE o.tokens END AS tokens,
       p.mlflow_run_id
FROM router_predictions p
LEFT JOIN router_fold_metrics fm
       ON fm.router = p.router AND fm.features = p.features AND fm.encoder = p.encoder
      AND fm.generator = p.generator AND fm.dataset = p.dataset AND fm.fold = p.fold
LEFT JOIN (
    SELECT router, features, encoder, generator, dataset, fold, true_label AS fallback
    FROM (
        SELECT k.router, k.features, k.encoder, k.generator, k.dataset, k.fold, t.true_label,
               ROW_NUMBER() OVER (PARTITION BY k.router, k.features, k.encoder, k.generator, k.dataset, k.fold
                                  ORDER BY COUNT(*) DESC, t.true_label) AS rk
        FROM (SELECT DISTINCT router, features, encoder, generator, dataset, fold FROM router_predictions) AS k
        JOIN router_predictions t
          ON t.router = k.router AND t.features = k.features AND t.encoder = k.encoder
         AND t.generator = k.generator AND t.dataset = k.dataset AND t.fold <> k.fold
        WHERE t.true_label NOT IN ('cannot_answer', 'unanswerable')
        GROUP BY k.router, k.features, k.encoder, k.generator, k.dataset, k.fold, t.true_label
    ) AS ranked
    WHERE rk <= 1
) AS f ON f.router = p.router AND f.features = p.features AND f.encoder = p.encoder
      AND f.generator = p.generator AND f.dataset = p.dataset AND f.fold = p.fold
LEFT JOIN (SELECT DISTINCT judge FROM v_router_outcomes) AS jg ON p.dataset = 'store'
LEFT JOIN v_router_outcomes o
       ON o.query_id = p.query_id AND o.generator = p.generator AND o.judge = jg.judge
      AND o.paradigm = CASE WHEN p.predicted = 'cannot_answer' THEN COALESCE(fm.fallback, f.fallback) ELSE p.predicted END
