-- How much could routing gain over always using one paradigm?
-- Per corpus, generator and judge: the best fixed paradigm (highest % correct over the
-- corpus's accepted queries; ties alphabetical) next to the oracle's % (queries that at least
-- one paradigm answers), i.e. the head-room a perfect router would have.
SELECT b.corpus,
       b.generator,
       b.judge,
       b.paradigm AS best_fixed,
       b.correct_pct AS best_fixed_pct,
       o.oracle_pct,
       o.oracle_pct - b.correct_pct AS headroom_pct
FROM (
    SELECT corpus, generator, judge, paradigm, correct_pct,
           ROW_NUMBER() OVER (PARTITION BY corpus, generator, judge ORDER BY correct_pct DESC, paradigm) AS rk
    FROM v_accuracy_overall
) AS b
JOIN (
    SELECT corpus, generator, judge,
           100.0 * SUM(CASE WHEN label <> 'cannot_answer' THEN 1 ELSE 0 END) / COUNT(*) AS oracle_pct
    FROM v_oracle_label
    GROUP BY corpus, generator, judge
) AS o ON o.corpus = b.corpus AND o.generator = b.generator AND o.judge = b.judge
WHERE b.rk <= 1  -- not = 1: see queries/views/100_v_judgment.sql
ORDER BY b.corpus, b.generator, b.judge;
