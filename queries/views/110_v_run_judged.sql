-- The evaluated outcome of every current run of an ACCEPTED query, once per judge model:
-- the majority label (v_judgment), correct as 0/1, consumed tokens (total_tokens includes the
-- amortised graph construction of v_run_latest; inference_tokens leaves it out) and the quality scores.
-- A run not yet judged by a judge has no row for that judge. Base of the paper's tables.
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
       j.label,
       CASE WHEN j.label = 'correct' THEN 1 ELSE 0 END AS correct,
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
WHERE l.query_status = 'accepted'
