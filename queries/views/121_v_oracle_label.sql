-- The oracle label (paper §3.5, §4.1) per (accepted query, generator, judge): among the
-- paradigms whose current run the judge labelled correct, the one with the highest semantic
-- F1; ties (and correct runs without an F1, which rank last) go to the alphabetically first
-- paradigm name. No correct paradigm -> 'cannot_answer'. n_correct = correct paradigms,
-- n_paradigms = judged paradigms; label_f1 = the semantic F1 of the chosen paradigm.
CREATE VIEW v_oracle_label AS
SELECT query_id,
       corpus_id,
       corpus,
       qtype,
       hops,
       generator,
       judge,
       CASE WHEN n_correct > 0 THEN paradigm ELSE 'cannot_answer' END AS label,
       CAST(n_correct AS INTEGER) AS n_correct,
       CAST(n_paradigms AS INTEGER) AS n_paradigms,
       CASE WHEN n_correct > 0 THEN semantic_f1 END AS label_f1,
       CASE WHEN n_correct > 0 THEN total_tokens END AS label_tokens
FROM (
    SELECT query_id, corpus_id, corpus, qtype, hops, generator, judge, paradigm,
           semantic_f1, total_tokens,
           SUM(correct) OVER (PARTITION BY query_id, generator, judge) AS n_correct,
           COUNT(*) OVER (PARTITION BY query_id, generator, judge) AS n_paradigms,
           ROW_NUMBER() OVER (PARTITION BY query_id, generator, judge
                              ORDER BY correct DESC, semantic_f1 DESC NULLS LAST, paradigm) AS rk
    FROM v_run_judged
) AS ranked
WHERE rk = 1
