"""Knowledge graph (``kg``) and Personalized PageRank (``ppr``)."""
