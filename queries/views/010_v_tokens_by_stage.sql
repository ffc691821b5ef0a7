-- Tokens billed per stage and model: what the calls cost when they were made (each ledger
-- row is paid once; cache hits add nothing here). Unusable replies that were billed count too.
-- reasoning_tokens = a reasoning model's hidden tokens, already INSIDE completion_tokens (OpenAI
-- counts and bills them as output): total_tokens and costs never add them again.
CREATE VIEW v_tokens_by_stage AS
SELECT stage, model,
       SUM(calls) AS calls,
       SUM(prompt_tokens) AS prompt_tokens,
       SUM(completion_tokens) AS completion_tokens,
       SUM(reasoning_tokens) AS reasoning_tokens,
       SUM(prompt_tokens + completion_tokens) AS total_tokens,
       SUM(latency_s) AS latency_s
FROM (
    SELECT COALESCE(stage, '') AS stage, model, 1 AS calls,
           prompt_tokens, completion_tokens, COALESCE(reasoning_tokens, 0) AS reasoning_tokens, latency_s
    FROM llm_calls
    UNION ALL
    SELECT COALESCE(stage, '') AS stage, model, 1 AS calls,
           COALESCE(prompt_tokens, 0), COALESCE(completion_tokens, 0), COALESCE(reasoning_tokens, 0), 0.0
    FROM llm_failures
) AS t
GROUP BY stage, model
