-- How are the oracle labels distributed per corpus and query type?
-- Queries per label (a paradigm or 'cannot_answer') and their share (%) of the corpus-type
-- cell, for every generator and judge: the class balance the routers are trained on.
SELECT corpus,
       qtype,
       generator,
       judge,
       label,
       COUNT(*) AS queries,
       100.0 * COUNT(*) / SUM(COUNT(*)) OVER (PARTITION BY corpus, qtype, generator, judge) AS share_pct
FROM v_oracle_label
GROUP BY corpus, qtype, generator, judge, label
ORDER BY corpus, qtype, generator, judge, queries DESC, label;
