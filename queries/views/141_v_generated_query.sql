-- Generated queries with the type label of paper Table 6: 'factual', '2-hop' / '3-hop' for
-- reasoning queries with known hops ('reasoning' otherwise), 'summary'.
CREATE VIEW v_generated_query AS
SELECT q.id AS query_id,
       c.name AS corpus,
       CASE WHEN q.qtype = 'reasoning' AND q.hops IS NOT NULL
            THEN CAST(q.hops AS VARCHAR) || '-hop'
            ELSE q.qtype END AS qtype,
       q.status
FROM queries q
JOIN corpora c ON c.id = q.corpus_id
WHERE q.origin = 'generated'
