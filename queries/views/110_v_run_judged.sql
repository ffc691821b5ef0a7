-- The evaluated outcome of every current run of an ACCEPTED query, once per judge model:
-- the label the tables use, correct as 0/1, consumed tokens (total_tokens includes the
-- amortised graph construction of v_run_latest; inference_tokens leaves it out) and the quality scores.
-- A run not yet judged by a judge has no row for that judge. Base of the paper's tables.
-- label = the reviewers' label where a person reviewed the run (`review pull`, human_labels kind
-- 'run': each reviewer's latest label, the majority over reviewers, a tie toward the WORSE label
-- as in v_judgment), else the judge's majority label (v_judgment); label_source says which
-- ('human' / 'judge'), judge_label is always the judge's own, n_reviewers how many people
-- labelled the run (0 = none). So a reviewed subset is a gold standard for every table, the
-- oracle label (v_oracle_label) and the router data, whichever judge's rows they read.
-- unanswerable = 1 for a question marked unanswerable; refused = 1 when the answer is a refusal
-- (v_judgment.refusal); hallucination = 1 for an answer other than a refusal to a question
-- marked unanswerable (the judge labels it incorrect by rule), 0 otherwise.
CREATE VIEW v_run_judged AS
SELECT l.run_id,
       l.query_id,
       l.corpus_id,
       l.corpus,
       l.qtype,
       l.hops,
       l.paradigm,
       l.generator,
       l.config_hash,
       j.judge,
       COALESCE(h.label, j.label) AS label,
       CASE WHEN COALESCE(h.label, j.label) = 'correct' THEN 1 ELSE 0 END AS correct,
       CASE WHEN h.label IS NOT NULL THEN 'human' ELSE 'judge' END AS label_source,
       j.label AS judge_label,
       CAST(COALESCE(h.n_reviewers, 0) AS INTEGER) AS n_reviewers,
       l.unanswerable,
       COALESCE(j.refusal, 0) AS refused,
       CASE WHEN l.unanswerable = 1 AND COALESCE(j.refusal, 0) = 0 THEN 1 ELSE 0 END AS hallucination,
       j.n_samples,
       j.agreement,
       l.total_tokens,
       l.inference_tokens,
       l.build_tokens,
       l.reads_graph,
       l.context_tokens,
       l.empty_context,
       l.ret_in_tokens,
       l.ret_out_tokens,
       l.gen_in_tokens,
       l.gen_out_tokens,
       s.semantic_f1,
       s.coverage,
       s.faith_hard,
       s.faith_soft,
       s.exact_match,
       s.token_f1
FROM v_run_latest l
JOIN v_judgment j ON j.run_id = l.run_id
LEFT JOIN v_run_score s ON s.run_id = l.run_id
LEFT JOIN (
    SELECT run_id, label, n_reviewers
    FROM (
        SELECT run_id, label,
               SUM(COUNT(*)) OVER (PARTITION BY run_id) AS n_reviewers,
               ROW_NUMBER() OVER (
                   PARTITION BY run_id
                   ORDER BY COUNT(*) DESC,
                            CASE label WHEN 'incorrect' THEN 1 WHEN 'incomplete' THEN 2
                                       WHEN 'correct' THEN 3 ELSE 0 END,
                            label
               ) AS rk
        FROM (
            SELECT run_id, reviewer, label,
                   ROW_NUMBER() OVER (PARTITION BY run_id, reviewer ORDER BY labelled_at DESC, id DESC) AS rk
            FROM human_labels
            WHERE kind = 'run' AND run_id IS NOT NULL
        ) AS latest
        WHERE rk <= 1
        GROUP BY run_id, label
    ) AS voted
    WHERE rk <= 1
) AS h ON h.run_id = l.run_id
WHERE l.query_status = 'accepted'
