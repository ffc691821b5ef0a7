"""The five RAG paradigms under one retriever abstraction (paper §3.1, App. B; docs/explanation/architecture.md §5).

Modules:
    :mod:`~ragrouter.paradigms.index`          CorpusIndex — one corpus' retrieval state.
    :mod:`~ragrouter.paradigms.retrievers`     NaiveRetriever, GraphRetriever (Algorithm 4).
    :mod:`~ragrouter.paradigms.context`        RRF, the token-budget packer, the context text,
                                               GraphRAG's triples + source sentences context.
    :mod:`~ragrouter.paradigms.query_context`  QueryContext — per-query compute-once memo.
    :mod:`~ragrouter.paradigms.paradigms`      the paradigms and the PARADIGMS registry.
    :mod:`~ragrouter.paradigms.prompts`        versioned prompts (Figures 13–16).
    :mod:`~ragrouter.paradigms.settings`       hyperparameters from the config; config_hash.
    :mod:`~ragrouter.paradigms.results`        CallUse, Retrieval, ParadigmResult.

Typical use (the answer stage)::

    index = CorpusIndex(chunk_ids, texts, n_tokens, chunk_vecs, entity_ids, names, entity_vecs, triples)
    qc = QueryContext(query.text, index, gateway, config, query_vector=stored_vec)
    for name in config.get("paradigms.enabled"):
        result = PARADIGMS[name].run(query.text, qc, index, gateway, generator, config)
        key = (query.id, name, generator, config_hash(name, config))
"""

from ragrouter.paradigms.context import (
    Context,
    Fact,
    FactContext,
    build_context,
    build_fact_context,
    format_context,
    pack,
    rrf_fuse,
)
from ragrouter.paradigms.index import CorpusIndex
from ragrouter.paradigms.paradigms import PARADIGMS, IterativeRAG, Paradigm, get, run
from ragrouter.paradigms.query_context import QueryContext
from ragrouter.paradigms.results import CallUse, ParadigmResult, Retrieval
from ragrouter.paradigms.retrievers import RETRIEVERS, GraphRetriever, NaiveRetriever
from ragrouter.paradigms.settings import Settings, config_hash, paradigm_config

__all__ = [
    "PARADIGMS", "RETRIEVERS", "CallUse", "Context", "CorpusIndex", "Fact", "FactContext", "GraphRetriever",
    "IterativeRAG", "NaiveRetriever", "Paradigm", "ParadigmResult", "QueryContext", "Retrieval", "Settings",
    "build_context", "build_fact_context",
    "config_hash", "format_context", "get", "pack", "paradigm_config", "rrf_fuse", "run",
]
