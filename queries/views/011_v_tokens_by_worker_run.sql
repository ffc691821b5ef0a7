-- Tokens billed by each worker run ("what this run paid"): ledger rows it created plus
-- unusable replies it was billed for. Compare with v_run_cost (what units consumed).
CREATE VIEW v_tokens_by_worker_run AS
SELECT w.id AS worker_run_id, w.host, w.pid, w.command, w.started_at,
       COALESCE(c.calls, 0) AS calls,
       COALESCE(c.prompt_tokens, 0) + COALESCE(f.prompt_tokens, 0) AS billed_prompt_tokens,
       COALESCE(c.completion_tokens, 0) + COALESCE(f.completion_tokens, 0) AS billed_completion_tokens
FROM worker_runs w
LEFT JOIN (SELECT worker_run_id, COUNT(*) AS calls, SUM(prompt_tokens) AS prompt_tokens,
                  SUM(completion_tokens) AS completion_tokens
           FROM llm_calls GROUP BY worker_run_id) c ON c.worker_run_id = w.id
LEFT JOIN (SELECT worker_run_id, SUM(COALESCE(prompt_tokens, 0)) AS prompt_tokens,
                  SUM(COALESCE(completion_tokens, 0)) AS completion_tokens
           FROM llm_failures GROUP BY worker_run_id) f ON f.worker_run_id = w.id
