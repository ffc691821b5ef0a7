-- Paper Table 16: tokens consumed per corpus, paradigm and generator over the current runs of
-- accepted queries: N runs, average context tokens, and the SUMS of retrieval in/out,
-- generation in/out and total (in tokens; the report picks k or M and says so).
-- Costs as eq. 16-20 define them: for the paradigms that read the graph (v_run_latest.reads_graph)
-- Ret-In / Ret-Out include the amortised one-time graph construction (T_corpus in, T_triplets
-- out; v_graph_build), so ret_in = ret_in_inference + build_in and total = total_inference + build.
-- The inference-only figures are their own columns (ret_in_inference, ret_out_inference,
-- total_inference, avg_inference_tokens). graph_build_tokens = the whole construction of the
-- extraction variant(s) this group's graph-reading runs read (0 for a group that never read the
-- graph), graph_build_per_query = its share per answered query; n_reads_graph = runs that carry it.
-- n_empty_context = runs whose retrieval put nothing into the context (v_run_latest).
CREATE VIEW v_token_breakdown AS
SELECT t.corpus, t.paradigm, t.generator,
       t.n,
       t.avg_context_tokens,
       t.ret_in_inference + t.build_in AS ret_in,
       t.ret_out_inference + t.build_out AS ret_out,
       t.gen_in, t.gen_out,
       t.total_inference + t.build_in + t.build_out AS total,
       t.ret_in_inference, t.ret_out_inference, t.total_inference,
       t.build_in + t.build_out AS build,
       t.avg_total_tokens,
       t.avg_inference_tokens,
       t.n_reads_graph,
       t.n_empty_context,
       CAST(COALESCE(g.graph_build_tokens, 0) AS BIGINT) AS graph_build_tokens,
       g.graph_build_per_query
FROM (
    SELECT corpus_id, corpus, paradigm, generator,
           CAST(COUNT(*) AS INTEGER) AS n,
           CAST(AVG(context_tokens) AS DOUBLE PRECISION) AS avg_context_tokens,
           CAST(SUM(ret_in_tokens) AS DOUBLE PRECISION) AS ret_in_inference,
           CAST(SUM(ret_out_tokens) AS DOUBLE PRECISION) AS ret_out_inference,
           CAST(SUM(gen_in_tokens) AS BIGINT) AS gen_in,
           CAST(SUM(gen_out_tokens) AS BIGINT) AS gen_out,
           CAST(SUM(inference_tokens) AS DOUBLE PRECISION) AS total_inference,
           CAST(SUM(build_in_tokens) AS DOUBLE PRECISION) AS build_in,
           CAST(SUM(build_out_tokens) AS DOUBLE PRECISION) AS build_out,
           CAST(AVG(total_tokens) AS DOUBLE PRECISION) AS avg_total_tokens,
           CAST(AVG(inference_tokens) AS DOUBLE PRECISION) AS avg_inference_tokens,
           CAST(SUM(reads_graph) AS INTEGER) AS n_reads_graph,
           CAST(SUM(empty_context) AS INTEGER) AS n_empty_context
    FROM v_run_latest
    WHERE query_status = 'accepted'
    GROUP BY corpus_id, corpus, paradigm, generator
) AS t
LEFT JOIN (
    SELECT u.corpus_id, u.paradigm, u.generator,
           SUM(b.graph_build_tokens) AS graph_build_tokens,
           SUM(CASE WHEN b.n_queries_answered > 0 THEN b.build_per_query END) AS graph_build_per_query
    FROM (SELECT DISTINCT corpus_id, paradigm, generator, extractor
          FROM v_run_latest WHERE query_status = 'accepted' AND reads_graph = 1) AS u
    JOIN v_graph_build b ON b.corpus_id = u.corpus_id AND b.extractor = u.extractor
    GROUP BY u.corpus_id, u.paradigm, u.generator
) AS g ON g.corpus_id = t.corpus_id AND g.paradigm = t.paradigm AND g.generator = t.generator
