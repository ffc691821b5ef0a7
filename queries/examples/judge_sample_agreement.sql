-- How consistent is each judge across its repeated samples?
-- Per judge: runs judged, mean samples per run, mean agreement (share of samples that gave
-- the majority label), and the % of runs judged more than once whose samples were unanimous.
SELECT judge,
       COUNT(*) AS runs,
       AVG(CAST(n_samples AS DOUBLE PRECISION)) AS avg_samples,
       AVG(agreement) AS avg_agreement,
       100.0 * SUM(CASE WHEN n_samples > 1 AND agreement = 1.0 THEN 1 ELSE 0 END)
             / NULLIF(SUM(CASE WHEN n_samples > 1 THEN 1 ELSE 0 END), 0) AS unanimous_pct
FROM v_judgment
GROUP BY judge
ORDER BY judge;
