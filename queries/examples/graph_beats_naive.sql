-- Where does GraphRAG beat NaiveRAG?
-- Queries whose current graph run the judge labelled correct while the naive run of the same
-- query (same generator, same judge) was not, with corpus, query type and both F1 scores.
-- Swap 'graph' and 'naive' (or use any two paradigm names) to compare other paradigms.
SELECT g.corpus,
       g.qtype,
       g.generator,
       g.judge,
       g.query_id,
       q.question,
       n.label AS naive_label,
       g.semantic_f1 AS graph_f1,
       n.semantic_f1 AS naive_f1
FROM v_run_judged g
JOIN v_run_judged n
  ON n.query_id = g.query_id AND n.generator = g.generator AND n.judge = g.judge
 AND n.paradigm = 'naive'
JOIN queries q ON q.id = g.query_id
WHERE g.paradigm = 'graph'
  AND g.correct = 1
  AND n.correct = 0
ORDER BY g.corpus, g.qtype, g.generator, g.judge, g.query_id;
