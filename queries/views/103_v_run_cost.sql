-- Tokens CONSUMED by every paradigm run (old configs included; is_latest marks the run that
-- v_run_latest keeps): retrieval in/out (entity extraction, self-evaluation), generation
-- in/out, their total, and the final context size. Consumed = what a cold run would pay,
-- cache hits included; what was actually BILLED is in v_tokens_by_worker_run. ledger_tokens
-- sums the ledger rows linked through run_calls (equal to total_tokens when every phase's
-- tokens come from the ledger).
CREATE VIEW v_run_cost AS
SELECT r.id AS run_id,
       r.query_id,
       c.name AS corpus,
       q.qtype,
       r.paradigm,
       r.generator,
       r.config_hash,
       CASE WHEN l.run_id IS NULL THEN 0 ELSE 1 END AS is_latest,
       r.ret_in_tokens AS ret_in,
       r.ret_out_tokens AS ret_out,
       r.gen_in_tokens AS gen_in,
       r.gen_out_tokens AS gen_out,
       r.ret_in_tokens + r.ret_out_tokens AS ret_tokens,
       r.gen_in_tokens + r.gen_out_tokens AS gen_tokens,
       r.ret_in_tokens + r.ret_out_tokens + r.gen_in_tokens + r.gen_out_tokens AS total_tokens,
       r.context_tokens,
       r.iterations,
       COALESCE(k.n_calls, 0) AS n_calls,
       COALESCE(k.ledger_tokens, 0) AS ledger_tokens
FROM paradigm_runs r
JOIN queries q ON q.id = r.query_id
JOIN corpora c ON c.id = q.corpus_id
LEFT JOIN v_run_latest l ON l.run_id = r.id
LEFT JOIN (
    SELECT rc.run_id, CAST(COUNT(*) AS BIGINT) AS n_calls,
           CAST(SUM(lc.prompt_tokens + lc.completion_tokens) AS BIGINT) AS ledger_tokens
    FROM run_calls rc
    JOIN llm_calls lc ON lc.id = rc.llm_call_id
    GROUP BY rc.run_id
) AS k ON k.run_id = r.id
