-- Router outcomes in long form: per (accepted query, generator, judge, paradigm) whether the
-- paradigm's current run was judged correct (0/1), the tokens it consumed (tokens = total with the
-- amortised graph construction of v_run_latest, inference_tokens = without), its semantic F1 and
-- its exact match / token F1 (SQuAD). correct follows v_run_judged: a reviewer's label where a
-- person reviewed the run (label_source 'human'), else the judge's; judge_label is the judge's own.
-- Pivot it in Python for any paradigm set (ragrouter.report.data.router_dataset); v_router_dataset pivots the default paradigms in SQL.
CREATE VIEW v_router_outcomes AS
SELECT query_id,
       corpus,
       qtype,
       generator,
       judge,
       paradigm,
       correct,
       total_tokens AS tokens,
       inference_tokens,
       semantic_f1 AS f1,
       exact_match AS em,
       token_f1,
       judge_label,
       label_source,
       run_id
FROM v_run_judged
