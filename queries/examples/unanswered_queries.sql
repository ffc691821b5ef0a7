-- Which queries does no paradigm answer?
-- Accepted queries whose oracle label is 'cannot_answer' (no judged paradigm was correct) for a
-- generator and judge, with how many paradigms were tried and the gold answer to inspect.
SELECT o.corpus,
       o.qtype,
       o.generator,
       o.judge,
       o.query_id,
       o.n_paradigms,
       q.question,
       q.answer AS gold_answer
FROM v_oracle_label o
JOIN queries q ON q.id = o.query_id
WHERE o.label = 'cannot_answer'
ORDER BY o.corpus, o.qtype, o.generator, o.judge, o.query_id;
