-- Do different judge models agree?
-- For every pair of judges, the runs both judged and the % on which their majority labels are
-- the same (overall and on the correct / not-correct split that the oracle label uses).
SELECT a.judge AS judge_a,
       b.judge AS judge_b,
       COUNT(*) AS runs,
       100.0 * SUM(CASE WHEN a.label = b.label THEN 1 ELSE 0 END) / COUNT(*) AS same_label_pct,
       100.0 * SUM(CASE WHEN (a.label = 'correct') = (b.label = 'correct') THEN 1 ELSE 0 END) / COUNT(*)
             AS same_correctness_pct
FROM v_judgment a
JOIN v_judgment b ON b.run_id = a.run_id AND a.judge < b.judge
GROUP BY a.judge, b.judge
ORDER BY a.judge, b.judge;
