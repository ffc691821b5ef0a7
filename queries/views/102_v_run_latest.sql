-- The current paradigm run per (query, paradigm, generator): the newest config_hash (by
-- created_at, then id). Runs made with older hyperparameters stay in paradigm_runs but do
-- not enter the tables; n_configs says how many config hashes exist for the triple.
-- Every query is here whatever its status: tables filter on query_status = 'accepted'.
-- Real paradigms only: the judge's calibration cases (paradigm_runs.paradigm = 'calibration',
-- candidate answers of known label, not a paradigm's answer) are left out; they have their own
-- view, v_judge_calibration.
-- unanswerable = 1 for a question marked unanswerable at ingest (queries.unanswerable; NULL = 0).
--
-- Costs as paper eq. 16-20 define them, in ONE place that every consumer reads (v_run_judged ->
-- Table 2's Tok., Figure 7, v_oracle_label's token tie-break, v_router_outcomes / the router
-- dataset and cost-aware labels; v_token_breakdown -> Table 16):
--   inference_tokens = ret_in + ret_out + gen_in + gen_out of the run (per-query cost);
--   reads_graph      = 1 for graph, hybrid and an iterative run whose base retriever is the graph
--                      (paradigm_runs.config ->> 'base_retriever'; iterative defaults to graph and
--                      iterative_naive to naive when the key is absent) AND that retrieved at all
--                      (iterations > 0: a run that answered in round 0 never read the graph);
--   extractor        = the extraction variant (graph) the run read: trace ->> 'extractor' (the
--                      answer stage records it), else the corpus's default variant (v_graph_build
--                      .is_default); NULL for runs that do not read the graph;
--   build_in_tokens / build_out_tokens = that variant's graph construction (v_graph_build)
--                      amortised per answered query, for runs that read the graph, else 0;
--   build_tokens     = build_in_tokens + build_out_tokens;
--   total_tokens     = inference_tokens + build_tokens (DOUBLE: the amortised share is a fraction).
-- empty_context = 1 when a paradigm that retrieves put nothing into its context (context_tokens
-- = 0), except an iterative run that answered in round 0 without retrieving (iterations = 0).
-- rk <= 1, not rk = 1: PostgreSQL estimates an equality on a window function's result at
-- 0.5 % of the rows and then nests loops over this view (v_run_judged took 11 s instead of 0.06 s
-- on 9,480 runs; benchmarks/README.md, issue 17). For ROW_NUMBER() the two are the same filter.
CREATE VIEW v_run_latest AS
SELECT r.id AS run_id,
       r.query_id,
       q.corpus_id,
       c.name AS corpus,
       q.qtype,
       q.hops,
       q.status AS query_status,
       CASE WHEN q.unanswerable THEN 1 ELSE 0 END AS unanswerable,
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
       r.ret_in_tokens + r.ret_out_tokens + r.gen_in_tokens + r.gen_out_tokens AS inference_tokens,
       r.reads_graph,
       CASE WHEN r.reads_graph = 1 THEN COALESCE(r.trace_extractor, d.extractor) END AS extractor,
       CASE WHEN r.reads_graph = 1 THEN COALESCE(b.build_in_per_query, 0.0) ELSE 0.0 END AS build_in_tokens,
       CASE WHEN r.reads_graph = 1 THEN COALESCE(b.build_out_per_query, 0.0) ELSE 0.0 END AS build_out_tokens,
       CASE WHEN r.reads_graph = 1 THEN COALESCE(b.build_per_query, 0.0) ELSE 0.0 END AS build_tokens,
       CAST(r.ret_in_tokens + r.ret_out_tokens + r.gen_in_tokens + r.gen_out_tokens AS DOUBLE PRECISION)
           + CASE WHEN r.reads_graph = 1 THEN COALESCE(b.build_per_query, 0.0) ELSE 0.0 END AS total_tokens,
       CASE WHEN r.paradigm <> 'llm_only' AND r.context_tokens = 0
                 AND NOT (r.paradigm LIKE 'iterative%' AND r.iterations = 0)
            THEN 1 ELSE 0 END AS empty_context,
       r.latency_s,
       r.created_at
FROM (
    SELECT id, query_id, paradigm, generator, config_hash, context_tokens, iterations,
           ret_in_tokens, ret_out_tokens, gen_in_tokens, gen_out_tokens, latency_s, created_at,
           trace ->> 'extractor' AS trace_extractor,
           CASE WHEN paradigm IN ('graph', 'hybrid') THEN 1
                WHEN paradigm LIKE 'iterative%' AND iterations > 0
                     AND COALESCE(config ->> 'base_retriever',
                                  CASE WHEN paradigm = 'iterative' THEN 'graph' ELSE 'naive' END) = 'graph'
                THEN 1
                ELSE 0 END AS reads_graph,
           ROW_NUMBER() OVER (PARTITION BY query_id, paradigm, generator
                              ORDER BY created_at DESC, id DESC) AS rk,
           COUNT(*) OVER (PARTITION BY query_id, paradigm, generator) AS n_configs
    FROM paradigm_runs
    WHERE paradigm <> 'calibration'
) AS r
JOIN queries q ON q.id = r.query_id
JOIN corpora c ON c.id = q.corpus_id
LEFT JOIN (SELECT corpus_id, extractor FROM v_graph_build WHERE is_default = 1) AS d ON d.corpus_id = q.corpus_id
LEFT JOIN v_graph_build b ON b.corpus_id = q.corpus_id AND b.extractor = COALESCE(r.trace_extractor, d.extractor)
WHERE r.rk <= 1
