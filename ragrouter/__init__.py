"""ragrouter: a database-centric re-implementation of RAGRouter-Bench."""

__version__ = "0.1.0"
