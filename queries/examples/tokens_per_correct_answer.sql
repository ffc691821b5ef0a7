-- How many tokens does each paradigm spend per CORRECT answer?
-- Per corpus, generator, judge and paradigm: judged runs, correct ones, the tokens consumed
-- by all of them, and tokens per correct answer (NULL when none was correct).
SELECT corpus,
       generator,
       judge,
       paradigm,
       COUNT(*) AS runs,
       SUM(correct) AS correct,
       CAST(SUM(total_tokens) AS BIGINT) AS tokens,
       CAST(SUM(total_tokens) AS DOUBLE PRECISION) / NULLIF(SUM(correct), 0) AS tokens_per_correct
FROM v_run_judged
GROUP BY corpus, generator, judge, paradigm
ORDER BY corpus, generator, judge, tokens_per_correct, paradigm;
