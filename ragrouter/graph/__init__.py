"""The knowledge graph: triples extracted from the chunks (``extract``), the graph they make
(``kg``) and Personalized PageRank over it (``ppr``)."""
