-- Graph construction cost per corpus and extraction variant (paper eq. 20, App. C "Resource
-- Consumption"): the extract stage's ledger calls for the corpus's chunks under that extractor
-- key (chunk_extractions.extractor: model, prompt version, output cap), each distinct call once
-- (a cache hit shared by two chunks is paid once): build_in_tokens = T_corpus (prompt tokens),
-- build_out_tokens = T_triplets (completion tokens). One row per (corpus, extractor); a corpus
-- never extracted has one row with extractor NULL and zeros. Each variant is its own graph: a
-- second extractor does not add to the first one's cost.
-- is_default = 1 for the corpus's variant with the most extracted chunks (ties: extractor name):
-- the variant charged to graph-reading runs that do not say which graph they read (runs written
-- before the answer stage recorded trace.extractor).
-- It is a one-time cost amortised over the corpus's query set, here the accepted queries that have
-- at least one paradigm run (n_queries_answered: what was processed, so a partial run does not
-- dilute the cost over queries that never ran): build_per_query = graph_build_tokens /
-- n_queries_answered. v_run_latest adds the share of the variant a run read to every run that read
-- the graph (graph, hybrid, an iterative run over the graph that retrieved), which is how Table 2's
-- Tok., Table 16, Figure 7, the oracle's token tie-break and the router dataset all include it.
CREATE VIEW v_graph_build AS
SELECT c.id AS corpus_id,
       c.name AS corpus,
       g.extractor,
       CASE WHEN g.extractor IS NULL OR g.variant_rank = 1 THEN 1 ELSE 0 END AS is_default,
       CAST(COALESCE(g.n_chunks_extracted, 0) AS INTEGER) AS n_chunks_extracted,
       CAST(COALESCE(g.n_calls, 0) AS INTEGER) AS n_build_calls,
       CAST(COALESCE(g.build_in_tokens, 0) AS BIGINT) AS build_in_tokens,
       CAST(COALESCE(g.build_out_tokens, 0) AS BIGINT) AS build_out_tokens,
       CAST(COALESCE(g.build_in_tokens, 0) + COALESCE(g.build_out_tokens, 0) AS BIGINT) AS graph_build_tokens,
       CAST(COALESCE(qa.n_queries_answered, 0) AS INTEGER) AS n_queries_answered,
       CASE WHEN COALESCE(qa.n_queries_answered, 0) > 0
            THEN CAST(COALESCE(g.build_in_tokens, 0) AS DOUBLE PRECISION) / CAST(qa.n_queries_answered AS DOUBLE PRECISION)
            ELSE 0.0 END AS build_in_per_query,
       CASE WHEN COALESCE(qa.n_queries_answered, 0) > 0
            THEN CAST(COALESCE(g.build_out_tokens, 0) AS DOUBLE PRECISION) / CAST(qa.n_queries_answered AS DOUBLE PRECISION)
            ELSE 0.0 END AS build_out_per_query,
       CASE WHEN COALESCE(qa.n_queries_answered, 0) > 0
            THEN CAST(COALESCE(g.build_in_tokens, 0) + COALESCE(g.build_out_tokens, 0) AS DOUBLE PRECISION)
                 / CAST(qa.n_queries_answered AS DOUBLE PRECISION)
            ELSE 0.0 END AS build_per_query
FROM corpora c
LEFT JOIN (
    SELECT corpus_id, extractor, n_chunks_extracted, n_calls, build_in_tokens, build_out_tokens,
           ROW_NUMBER() OVER (PARTITION BY corpus_id ORDER BY n_chunks_extracted DESC, extractor) AS variant_rank
    FROM (
        SELECT corpus_id, extractor,
               COUNT(DISTINCT chunk_id) AS n_chunks_extracted,
               COUNT(DISTINCT call_id) AS n_calls,
               SUM(CASE WHEN first_use = 1 THEN prompt_tokens ELSE 0 END) AS build_in_tokens,
               SUM(CASE WHEN first_use = 1 THEN completion_tokens ELSE 0 END) AS build_out_tokens
        FROM (
            SELECT ch.corpus_id, ce.extractor, ce.chunk_id, lc.id AS call_id, lc.prompt_tokens, lc.completion_tokens,
                   ROW_NUMBER() OVER (PARTITION BY ch.corpus_id, ce.extractor, lc.id ORDER BY ce.chunk_id, ce.id) AS first_use
            FROM chunk_extractions ce
            JOIN chunks ch ON ch.id = ce.chunk_id
            JOIN llm_calls lc ON lc.id = ce.llm_call_id
            WHERE lc.stage = 'extract'
        ) AS calls
        GROUP BY corpus_id, extractor
    ) AS per_variant
) AS g ON g.corpus_id = c.id
LEFT JOIN (
    SELECT q.corpus_id, COUNT(DISTINCT q.id) AS n_queries_answered
    FROM queries q
    WHERE q.status = 'accepted' AND EXISTS (SELECT 1 FROM paradigm_runs r WHERE r.query_id = q.id)
    GROUP BY q.corpus_id
) AS qa ON qa.corpus_id = c.id
