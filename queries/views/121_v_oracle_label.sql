-- The oracle label (paper §3.5, §4.1) per (accepted query, generator, judge). THE rule, the one
-- implementation (ragrouter.routers.dataset.oracle_labels is proven equal by a property test):
--   1. candidates = the paradigms whose current run the judge labelled correct AND that have a
--      semantic F1 (a NULL F1 never wins);
--   2. the highest semantic F1 wins; ties: fewest total tokens (v_run_latest.total_tokens, with
--      the amortised graph construction); then the fixed paradigm order llm_only, naive, graph,
--      hybrid, iterative, iterative_naive, then any other paradigm by name;
--   0. a question marked unanswerable -> 'unanswerable' (its right answer is a refusal, whichever
--      paradigm gave it; distinct from 'cannot_answer');
--   3. no paradigm judged correct -> 'cannot_answer';
--   4. correct paradigms exist but none has an F1 yet -> label NULL (undecided: run the score
--      stage); such rows stay here (n_correct > 0, n_scored_correct = 0) but not in the router data.
-- n_correct = correct paradigms, n_scored_correct = correct ones with an F1, n_paradigms = judged
-- paradigms; label_f1 / label_tokens = the chosen paradigm's semantic F1 and total tokens.
-- Correct means v_run_judged.correct: a reviewer's label where a person reviewed the run, else
-- the judge's. n_human = the judged paradigms whose label is a reviewer's; label_source = 'human'
-- when every one is (a gold-standard label), 'mixed' when some are, 'judge' when none is.
-- rk <= 1, not rk = 1: PostgreSQL estimates an equality on a window function's result at
-- 0.5 % of the rows and then nests loops over this view (v_run_judged took 11 s instead of 0.06 s
-- on 9,480 runs; benchmarks/README.md, issue 17). For ROW_NUMBER() the two are the same filter.
CREATE VIEW v_oracle_label AS
SELECT query_id,
       corpus_id,
       corpus,
       qtype,
       hops,
       generator,
       judge,
       CASE WHEN unanswerable = 1 THEN 'unanswerable'
            WHEN n_correct = 0 THEN 'cannot_answer'
            WHEN n_scored_correct = 0 THEN NULL
            ELSE paradigm END AS label,
       CAST(unanswerable AS INTEGER) AS unanswerable,
       CAST(n_correct AS INTEGER) AS n_correct,
       CAST(n_scored_correct AS INTEGER) AS n_scored_correct,
       CAST(n_paradigms AS INTEGER) AS n_paradigms,
       CASE WHEN n_scored_correct > 0 AND unanswerable = 0 THEN semantic_f1 END AS label_f1,
       CASE WHEN n_scored_correct > 0 AND unanswerable = 0 THEN total_tokens END AS label_tokens,
       CAST(n_human AS INTEGER) AS n_human,
       CASE WHEN n_human = n_paradigms THEN 'human' WHEN n_human > 0 THEN 'mixed' ELSE 'judge' END AS label_source
FROM (
    SELECT query_id, corpus_id, corpus, qtype, hops, generator, judge, paradigm,
           semantic_f1, total_tokens, unanswerable,
           SUM(correct) OVER (PARTITION BY query_id, generator, judge) AS n_correct,
           SUM(candidate) OVER (PARTITION BY query_id, generator, judge) AS n_scored_correct,
           COUNT(*) OVER (PARTITION BY query_id, generator, judge) AS n_paradigms,
           SUM(human) OVER (PARTITION BY query_id, generator, judge) AS n_human,
           ROW_NUMBER() OVER (PARTITION BY query_id, generator, judge
                              ORDER BY candidate DESC, semantic_f1 DESC, total_tokens ASC,
                                       paradigm_rank ASC, paradigm) AS rk
    FROM (
        SELECT query_id, corpus_id, corpus, qtype, hops, generator, judge, paradigm, correct,
               semantic_f1, total_tokens, unanswerable,
               CASE WHEN correct = 1 AND semantic_f1 IS NOT NULL THEN 1 ELSE 0 END AS candidate,
               CASE WHEN label_source = 'human' THEN 1 ELSE 0 END AS human,
               CASE paradigm WHEN 'llm_only' THEN 1 WHEN 'naive' THEN 2 WHEN 'graph' THEN 3
                             WHEN 'hybrid' THEN 4 WHEN 'iterative' THEN 5 WHEN 'iterative_naive' THEN 6
                             ELSE 100 END AS paradigm_rank
        FROM v_run_judged
    ) AS c
) AS ranked
WHERE rk <= 1
