-- Router scores per (router, features, encoder, generator, dataset, judge) from the CV
-- predictions: n predictions, routing accuracy % (prediction = oracle label), correct rate %
-- (the routed paradigm, with the cannot_answer fallback of v_router_routed, judged correct)
-- and mean tokens of the routed paradigm — both from the store's outcomes, so only for
-- dataset = 'store' (n_outcomes = predictions whose routed run exists). Macro-F1 and MRR
-- need per-class counts and probability ranks: they are computed in Python
-- (ragrouter.routers.evaluate) and logged to MLflow with each router run.
CREATE VIEW v_router_scores AS
SELECT router, features, encoder, generator, dataset, judge,
       CAST(COUNT(*) AS INTEGER) AS n,
       CAST(COUNT(DISTINCT fold) AS INTEGER) AS n_folds,
       100.0 * CAST(SUM(hit) AS DOUBLE PRECISION) / CAST(COUNT(*) AS DOUBLE PRECISION) AS routing_accuracy,
       CAST(COUNT(correct) AS INTEGER) AS n_outcomes,
       100.0 * CAST(AVG(correct) AS DOUBLE PRECISION) AS correct_rate,
       CAST(AVG(tokens) AS DOUBLE PRECISION) AS avg_tokens
FROM v_router_routed
GROUP BY router, features, encoder, generator, dataset, judge
