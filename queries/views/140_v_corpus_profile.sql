-- Paper Tables 8 and 9: one row per corpus with its structural indicators (knowledge graph:
-- nodes, edges, density, relation types, average degree, components, LCC ratio, clustering)
-- and semantic indicators (embedding space: TwoNN intrinsic dimension, hubness, cosine
-- distance to the centroid: mean/std/min/max), plus documents, chunks, tokens and accepted
-- queries. When a metric was measured for several variants (embedders / extractors), the
-- most recently written value is shown. n_chunks counts all chunkers (n_chunkers of them).
-- What was PROCESSED (a partial run, --limit or a slice covers part of the corpus): a chunk is
-- processed when it was embedded (a 'chunk' vector) or extracted (chunk_extractions);
-- n_chunks_processed / n_chunks_extracted / n_chunks_embedded count them, n_documents_processed
-- the documents with a processed chunk and processed_tokens their tokens; n_queries_answered =
-- accepted queries with at least one paradigm run. The report's Corpora table shows these.
-- rk <= 1, not rk = 1: PostgreSQL estimates an equality on a window function's result at
-- 0.5 % of the rows and then nests loops over this view (v_run_judged took 11 s instead of 0.06 s
-- on 9,480 runs; benchmarks/README.md, issue 17). For ROW_NUMBER() the two are the same filter.
CREATE VIEW v_corpus_profile AS
SELECT c.id AS corpus_id,
       c.name AS corpus,
       COALESCE(d.n_documents, 0) AS n_documents,
       COALESCE(d.total_tokens, 0) AS total_tokens,
       d.avg_doc_tokens,
       COALESCE(k.n_chunks, 0) AS n_chunks,
       COALESCE(k.n_chunkers, 0) AS n_chunkers,
       COALESCE(qa.n_queries, 0) AS n_queries,
       COALESCE(pr.n_documents_processed, 0) AS n_documents_processed,
       COALESCE(pr.processed_tokens, 0) AS processed_tokens,
       COALESCE(pc.n_chunks_processed, 0) AS n_chunks_processed,
       COALESCE(pc.n_chunks_extracted, 0) AS n_chunks_extracted,
       COALESCE(pc.n_chunks_embedded, 0) AS n_chunks_embedded,
       COALESCE(ans.n_queries_answered, 0) AS n_queries_answered,
       m.nodes, m.edges, m.density, m.relation_types, m.avg_degree, m.components,
       m.lcc_ratio, m.clustering,
       m.intrinsic_dim, m.hubness, m.dist_mean, m.dist_std, m.dist_min, m.dist_max
FROM corpora c
LEFT JOIN (
    SELECT corpus_id, CAST(COUNT(*) AS INTEGER) AS n_documents,
           CAST(SUM(n_tokens) AS BIGINT) AS total_tokens,
           CAST(AVG(n_tokens) AS DOUBLE PRECISION) AS avg_doc_tokens
    FROM documents GROUP BY corpus_id
) AS d ON d.corpus_id = c.id
LEFT JOIN (
    SELECT corpus_id, CAST(COUNT(*) AS INTEGER) AS n_chunks,
           CAST(COUNT(DISTINCT chunker) AS INTEGER) AS n_chunkers
    FROM chunks GROUP BY corpus_id
) AS k ON k.corpus_id = c.id
LEFT JOIN (
    SELECT corpus_id, CAST(COUNT(*) AS INTEGER) AS n_queries
    FROM queries WHERE status = 'accepted' GROUP BY corpus_id
) AS qa ON qa.corpus_id = c.id
LEFT JOIN (
    SELECT corpus_id,
           CAST(COUNT(*) AS INTEGER) AS n_chunks_processed,
           CAST(SUM(extracted) AS INTEGER) AS n_chunks_extracted,
           CAST(SUM(embedded) AS INTEGER) AS n_chunks_embedded
    FROM (
        SELECT ch.corpus_id, ch.id,
               CASE WHEN EXISTS (SELECT 1 FROM chunk_extractions ce WHERE ce.chunk_id = ch.id) THEN 1 ELSE 0 END AS extracted,
               CASE WHEN EXISTS (SELECT 1 FROM vectors v WHERE v.owner_kind = 'chunk' AND v.owner_id = ch.id) THEN 1 ELSE 0 END AS embedded
        FROM chunks ch
    ) AS x
    WHERE extracted = 1 OR embedded = 1
    GROUP BY corpus_id
) AS pc ON pc.corpus_id = c.id
LEFT JOIN (
    SELECT d.corpus_id, CAST(COUNT(*) AS INTEGER) AS n_documents_processed,
           CAST(SUM(d.n_tokens) AS BIGINT) AS processed_tokens
    FROM documents d
    WHERE EXISTS (
        SELECT 1 FROM chunks ch
        WHERE ch.document_id = d.id
          AND (EXISTS (SELECT 1 FROM chunk_extractions ce WHERE ce.chunk_id = ch.id)
               OR EXISTS (SELECT 1 FROM vectors v WHERE v.owner_kind = 'chunk' AND v.owner_id = ch.id))
    )
    GROUP BY d.corpus_id
) AS pr ON pr.corpus_id = c.id
LEFT JOIN (
    SELECT q.corpus_id, CAST(COUNT(*) AS INTEGER) AS n_queries_answered
    FROM queries q
    WHERE q.status = 'accepted' AND EXISTS (SELECT 1 FROM paradigm_runs r WHERE r.query_id = q.id)
    GROUP BY q.corpus_id
) AS ans ON ans.corpus_id = c.id
LEFT JOIN (
    SELECT corpus_id,
           MAX(CASE WHEN metric = 'nodes' THEN value END) AS nodes,
           MAX(CASE WHEN metric = 'edges' THEN value END) AS edges,
           MAX(CASE WHEN metric = 'density' THEN value END) AS density,
           MAX(CASE WHEN metric = 'relation_types' THEN value END) AS relation_types,
           MAX(CASE WHEN metric = 'avg_degree' THEN value END) AS avg_degree,
           MAX(CASE WHEN metric = 'components' THEN value END) AS components,
           MAX(CASE WHEN metric = 'lcc_ratio' THEN value END) AS lcc_ratio,
           MAX(CASE WHEN metric = 'clustering' THEN value END) AS clustering,
           MAX(CASE WHEN metric = 'intrinsic_dim' THEN value END) AS intrinsic_dim,
           MAX(CASE WHEN metric = 'hubness' THEN value END) AS hubness,
           MAX(CASE WHEN metric = 'dist_mean' THEN value END) AS dist_mean,
           MAX(CASE WHEN metric = 'dist_std' THEN value END) AS dist_std,
           MAX(CASE WHEN metric = 'dist_min' THEN value END) AS dist_min,
           MAX(CASE WHEN metric = 'dist_max' THEN value END) AS dist_max
    FROM (
        SELECT corpus_id, metric, value,
               ROW_NUMBER() OVER (PARTITION BY corpus_id, metric ORDER BY created_at DESC, id DESC) AS rk
        FROM corpus_metrics
    ) AS latest
    WHERE rk <= 1
    GROUP BY corpus_id
) AS m ON m.corpus_id = c.id
