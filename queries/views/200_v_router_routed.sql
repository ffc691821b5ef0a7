-- Every router prediction with the paradigm actually run: a 'cannot_answer' prediction falls
-- back to the most frequent optimal paradigm (the most frequent true label other than
-- 'cannot_answer' among the predictions of the same router, features, encoder, generator and
-- dataset; ties: alphabetical). For dataset = 'store' the routed paradigm's outcome comes
-- from v_router_outcomes, once per judge (judge is NULL for imported datasets, whose
-- outcomes live in the dataset file, and for store queries no judge has judged).
CREATE VIEW v_router_routed AS
SELECT p.id AS prediction_id,
       p.router, p.features, p.encoder, p.generator, p.dataset, p.fold,
       p.query_key, p.query_id,
       o.corpus,
       p.predicted, p.true_label,
       CASE WHEN p.predicted = p.true_label THEN 1 ELSE 0 END AS hit,
       CASE WHEN p.predicted = 'cannot_answer' THEN f.fallback ELSE p.predicted END AS routed,
       jg.judge,
       o.correct,
       o.tokens
FROM router_predictions p
LEFT JOIN (
    SELECT router, features, encoder, generator, dataset, true_label AS fallback
    FROM (
        SELECT router, features, encoder, generator, dataset, true_label,
               ROW_NUMBER() OVER (PARTITION BY router, features, encoder, generator, dataset
                                  ORDER BY COUNT(*) DESC, true_label) AS rk
        FROM router_predictions
        WHERE true_label <> 'cannot_answer'
        GROUP BY router, features, encoder, generator, dataset, true_label
    ) AS ranked
    WHERE rk = 1
) AS f ON f.router = p.router AND f.features = p.features AND f.encoder = p.encoder
      AND f.generator = p.generator AND f.dataset = p.dataset
LEFT JOIN (SELECT DISTINCT judge FROM v_router_outcomes) AS jg ON p.dataset = 'store'
LEFT JOIN v_router_outcomes o
       ON o.query_id = p.query_id AND o.generator = p.generator AND o.judge = jg.judge
      AND o.paradigm = CASE WHEN p.predicted = 'cannot_answer' THEN f.fallback ELSE p.predicted END
