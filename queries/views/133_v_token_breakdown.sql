-- Paper Table 16: tokens consumed per corpus, paradigm and generator over the current runs of
-- accepted queries: N runs, average context tokens, and the SUMS of retrieval in/out,
-- generation in/out and total (in tokens; the report prints millions). Graph construction
-- (the extract stage's ledger calls for the corpus's chunks, each distinct call once) is a
-- one-time cost shown as graph_build_tokens and amortised over the corpus's accepted queries
-- as graph_build_per_query; add it to the paradigms that read the graph.
CREATE VIEW v_token_breakdown AS
SELECT t.corpus, t.paradigm, t.generator,
       t.n,
       t.avg_context_tokens,
       t.ret_in, t.ret_out, t.gen_in, t.gen_out, t.total,
       t.avg_total_tokens,
       COALESCE(g.graph_build_tokens, 0) AS graph_build_tokens,
       CASE WHEN qn.n_queries > 0
            THEN CAST(COALESCE(g.graph_build_tokens, 0) AS DOUBLE PRECISION) / CAST(qn.n_queries AS DOUBLE PRECISION)
       END AS graph_build_per_query
FROM (
    SELECT corpus_id, corpus, paradigm, generator,
           CAST(COUNT(*) AS INTEGER) AS n,
           CAST(AVG(context_tokens) AS DOUBLE PRECISION) AS avg_context_tokens,
           CAST(SUM(ret_in_tokens) AS BIGINT) AS ret_in,
           CAST(SUM(ret_out_tokens) AS BIGINT) AS ret_out,
           CAST(SUM(gen_in_tokens) AS BIGINT) AS gen_in,
           CAST(SUM(gen_out_tokens) AS BIGINT) AS gen_out,
           CAST(SUM(total_tokens) AS BIGINT) AS total,
           CAST(AVG(total_tokens) AS DOUBLE PRECISION) AS avg_total_tokens
    FROM v_run_latest
    WHERE query_status = 'accepted'
    GROUP BY corpus_id, corpus, paradigm, generator
) AS t
LEFT JOIN (
    SELECT corpus_id, CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT) AS graph_build_tokens
    FROM (
        SELECT DISTINCT ch.corpus_id, lc.id, lc.prompt_tokens, lc.completion_tokens
        FROM chunk_extractions ce
        JOIN chunks ch ON ch.id = ce.chunk_id
        JOIN llm_calls lc ON lc.id = ce.llm_call_id
        WHERE lc.stage = 'extract'
    ) AS calls
    GROUP BY corpus_id
) AS g ON g.corpus_id = t.corpus_id
LEFT JOIN (
    SELECT corpus_id, COUNT(*) AS n_queries FROM queries WHERE status = 'accepted' GROUP BY corpus_id
) AS qn ON qn.corpus_id = t.corpus_id
