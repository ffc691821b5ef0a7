-- Router scores per (router, features, encoder, generator, dataset, judge): ONE definition
-- of every routing metric (ragrouter.routers.evaluate), the numbers MLflow shows.
--
-- Headline (fractions in [0, 1], tokens per query): the FOLD MEAN of each metric over the
-- stored per-fold rows of router_fold_metrics (written by `routers train` from the same
-- values it logs to MLflow) with its population std over folds (<metric>_std):
-- routing_accuracy, macro_f1 (over the classes present in the fold), mrr (unrounded probabilities),
-- correct_rate (cannot_answer → the training fold's fallback), avg_tokens, abstain_rate;
-- aiq only when a λ sweep ran. These are set on the row of the judge whose labels trained
-- the router (and on imported datasets, judge NULL); NULL elsewhere.
-- Intervals: 95 % Wilson intervals of the per-query rates pooled over the n CV predictions
-- (routing_accuracy_ci_*, correct_rate_ci_* over n_outcomes) — statsmodels'
-- proportion_confint(method='wilson'), as ragrouter.routers.evaluate.wilson_interval.
-- Pooled figures (share over all predictions, not the fold mean) are named pooled_*.
CREATE VIEW v_router_scores AS
WITH pooled AS (
    SELECT router, features, encoder, generator, dataset, judge,
           COUNT(*) AS n,
           COUNT(DISTINCT fold) AS n_folds,
           SUM(hit) AS hits,
           COUNT(correct) AS n_outcomes,
           SUM(correct) AS n_correct,
           AVG(CAST(tokens AS DOUBLE PRECISION)) AS pooled_avg_tokens,
           MAX(mlflow_run_id) AS mlflow_run_id
    FROM v_router_routed
    GROUP BY router, features, encoder, generator, dataset, judge
),
folds AS (
    SELECT router, features, encoder, generator, dataset, judge AS trained_judge,
           AVG(routing_accuracy) AS routing_accuracy, STDDEV_POP(routing_accuracy) AS routing_accuracy_std,
           AVG(macro_f1) AS macro_f1, STDDEV_POP(macro_f1) AS macro_f1_std,
           AVG(mrr) AS mrr, STDDEV_POP(mrr) AS mrr_std,
           AVG(correct_rate) AS correct_rate, STDDEV_POP(correct_rate) AS correct_rate_std,
           AVG(avg_tokens) AS avg_tokens, STDDEV_POP(avg_tokens) AS avg_tokens_std,
           AVG(abstain_rate) AS abstain_rate, STDDEV_POP(abstain_rate) AS abstain_rate_std,
           MAX(CASE WHEN lambda_swept THEN aiq END) AS aiq,
           MAX(mlflow_run_id) AS mlflow_run_id
    FROM router_fold_metrics
    GROUP BY router, features, encoder, generator, dataset, judge
)
SELECT p.router, p.features, p.encoder, p.generator, p.dataset, p.judge,
       CAST(p.n AS INTEGER) AS n,
       CAST(p.n_folds AS INTEGER) AS n_folds,
       f.routing_accuracy, f.routing_accuracy_std,
       CASE WHEN p.n > 0 THEN ((CAST(p.hits AS DOUBLE PRECISION) / CAST(p.n AS DOUBLE PRECISION)) + 1.959963984540054*1.959963984540054/(2*CAST(p.n AS DOUBLE PRECISION)) - 1.959963984540054*SQRT((CAST(p.hits AS DOUBLE PRECISION) / CAST(p.n AS DOUBLE PRECISION))*(1-(CAST(p.hits AS DOUBLE PRECISION) / CAST(p.n AS DOUBLE PRECISION)))/CAST(p.n AS DOUBLE PRECISION) + 1.959963984540054*1.959963984540054/(4*CAST(p.n AS DOUBLE PRECISION)*CAST(p.n AS DOUBLE PRECISION)))) / (1 + 1.959963984540054*1.959963984540054/CAST(p.n AS DOUBLE PRECISION)) END AS routing_accuracy_ci_low,
       CASE WHEN p.n > 0 THEN ((CAST(p.hits AS DOUBLE PRECISION) / CAST(p.n AS DOUBLE PRECISION)) + 1.959963984540054*1.959963984540054/(2*CAST(p.n AS DOUBLE PRECISION)) + 1.959963984540054*SQRT((CAST(p.hits AS DOUBLE PRECISION) / CAST(p.n AS DOUBLE PRECISION))*(1-(CAST(p.hits AS DOUBLE PRECISION) / CAST(p.n AS DOUBLE PRECISION)))/CAST(p.n AS DOUBLE PRECISION) + 1.959963984540054*1.959963984540054/(4*CAST(p.n AS DOUBLE PRECISION)*CAST(p.n AS DOUBLE PRECISION)))) / (1 + 1.959963984540054*1.959963984540054/CAST(p.n AS DOUBLE PRECISION)) END AS routing_accuracy_ci_high,
       f.macro_f1, f.macro_f1_std,
       f.mrr, f.mrr_std,
       f.correct_rate, f.correct_rate_std,
       CASE WHEN p.n_outcomes > 0 THEN ((CAST(p.n_correct AS DOUBLE PRECISION) / CAST(p.n_outcomes AS DOUBLE PRECISION)) + 1.959963984540054*1.959963984540054/(2*CAST(p.n_outcomes AS DOUBLE PRECISION)) - 1.959963984540054*SQRT((CAST(p.n_correct AS DOUBLE PRECISION) / CAST(p.n_outcomes AS DOUBLE PRECISION))*(1-(CAST(p.n_correct AS DOUBLE PRECISION) / CAST(p.n_outcomes AS DOUBLE PRECISION)))/CAST(p.n_outcomes AS DOUBLE PRECISION) + 1.959963984540054*1.959963984540054/(4*CAST(p.n_outcomes AS DOUBLE PRECISION)*CAST(p.n_outcomes AS DOUBLE PRECISION)))) / (1 + 1.959963984540054*1.959963984540054/CAST(p.n_outcomes AS DOUBLE PRECISION)) END AS correct_rate_ci_low,
       CASE WHEN p.n_outcomes > 0 THEN ((CAST(p.n_correct AS DOUBLE PRECISION) / CAST(p.n_outcomes AS DOUBLE PRECISION)) + 1.959963984540054*1.959963984540054/(2*CAST(p.n_outcomes AS DOUBLE PRECISION)) + 1.959963984540054*SQRT((CAST(p.n_correct AS DOUBLE PRECISION) / CAST(p.n_outcomes AS DOUBLE PRECISION))*(1-(CAST(p.n_correct AS DOUBLE PRECISION) / CAST(p.n_outcomes AS DOUBLE PRECISION)))/CAST(p.n_outcomes AS DOUBLE PRECISION) + 1.959963984540054*1.959963984540054/(4*CAST(p.n_outcomes AS DOUBLE PRECISION)*CAST(p.n_outcomes AS DOUBLE PRECISION)))) / (1 + 1.959963984540054*1.959963984540054/CAST(p.n_outcomes AS DOUBLE PRECISION)) END AS correct_rate_ci_high,
       f.avg_tokens, f.avg_tokens_std,
       f.abstain_rate, f.abstain_rate_std,
       f.aiq,
       CAST(p.hits AS DOUBLE PRECISION) / CAST(p.n AS DOUBLE PRECISION) AS pooled_routing_accuracy,
       CAST(p.n_outcomes AS INTEGER) AS n_outcomes,
       CAST(p.n_correct AS DOUBLE PRECISION) / CAST(NULLIF(p.n_outcomes, 0) AS DOUBLE PRECISION) AS pooled_correct_rate,
       p.pooled_avg_tokens,
       COALESCE(f.mlflow_run_id, p.mlflow_run_id) AS mlflow_run_id
FROM pooled p
LEFT JOIN folds f
       ON f.router = p.router AND f.features = p.features AND f.encoder = p.encoder
      AND f.generator = p.generator AND f.dataset = p.dataset
      AND (f.trained_judge = p.judge OR (f.trained_judge IS NULL AND p.judge IS NULL))
