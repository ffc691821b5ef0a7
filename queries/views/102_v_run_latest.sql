-- The current paradigm run per (query, paradigm, generator): the newest config_hash (by
-- created_at, then id). Runs made with older hyperparameters stay in paradigm_runs but do
-- not enter the tables; n_configs says how many config hashes exist for the triple.
-- Every query is here whatever its status: tables filter on query_status = 'accepted'.
CREATE VIEW v_run_latest AS
SELECT r.id AS run_id,
       r.query_id,
       q.corpus_id,
       c.name AS corpus,
       q.qtype,
       q.hops,
       q.status AS query_status,
       r.paradigm,
       r.generator,
       r.config_hash,
       r.n_configs,
       r.context_tokens,
       r.iterations,
       r.ret_in_tokens,
       r.ret_out_tokens,
       r.gen_in_tokens,
       r.gen_out_tokens,
       r.ret_in_tokens + r.ret_out_tokens + r.gen_in_tokens + r.gen_out_tokens AS total_tokens,
       r.latency_s,
       r.created_at
FROM (
    SELECT id, query_id, paradigm, generator, config_hash, context_tokens, iterations,
           ret_in_tokens, ret_out_tokens, gen_in_tokens, gen_out_tokens, latency_s, created_at,
           ROW_NUMBER() OVER (PARTITION BY query_id, paradigm, generator
                              ORDER BY created_at DESC, id DESC) AS rk,
           COUNT(*) OVER (PARTITION BY query_id, paradigm, generator) AS n_configs
    FROM paradigm_runs
) AS r
JOIN queries q ON q.id = r.query_id
JOIN corpora c ON c.id = q.corpus_id
WHERE r.rk = 1
