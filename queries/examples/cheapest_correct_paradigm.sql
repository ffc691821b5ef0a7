-- Which is the cheapest paradigm that still answers each query correctly?
-- Per accepted query, generator and judge: the correct paradigm with the fewest tokens
-- consumed (ties: alphabetical), next to the oracle label (best semantic F1 among the correct
-- ones) and the tokens it would have cost; tokens_saved = what choosing by cost saves.
SELECT c.corpus,
       c.qtype,
       c.generator,
       c.judge,
       c.query_id,
       c.paradigm AS cheapest_correct,
       c.total_tokens AS cheapest_tokens,
       o.label AS oracle_label,
       o.label_tokens AS oracle_tokens,
       o.label_tokens - c.total_tokens AS tokens_saved
FROM (
    SELECT corpus, qtype, generator, judge, query_id, paradigm, total_tokens,
           ROW_NUMBER() OVER (PARTITION BY query_id, generator, judge
                              ORDER BY total_tokens, paradigm) AS rk
    FROM v_run_judged
    WHERE correct = 1
) AS c
JOIN v_oracle_label o
  ON o.query_id = c.query_id AND o.generator = c.generator AND o.judge = c.judge
WHERE c.rk <= 1  -- not = 1: see queries/views/100_v_judgment.sql
ORDER BY c.corpus, c.qtype, c.generator, c.judge, c.query_id;
