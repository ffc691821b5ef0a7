"""Work shared by the paradigms of one query: a thread-safe, compute-once memo.

The answer stage runs several paradigms (often in different threads) on the same query.
A :class:`QueryContext` makes each shared piece happen once:

* the query embedding (and any other text's embedding: sub-questions, query entities),
* the dense top-k search of a text (NaiveRAG, HybridRAG, IterativeRAG over ``naive``),
* the graph retrieval of a text with a given LLM backend (GraphRAG, HybridRAG, IterativeRAG
  over ``graph``) — including its entity-extraction LLM call.

Memo keys are texts (plus the backend for graph retrieval), so an IterativeRAG round whose
query is the original question reuses the same retrieval too. The first thread to ask for a
key computes it; others asking meanwhile wait for that result. A computation that raises is
not memoised (every waiter sees the exception; the next request computes again).

Token attribution when shared: the memo returns the *same* :class:`Retrieval`, calls
included, to every paradigm, and each paradigm records those calls (same ``call_id``, phase
``retrieval``) and counts their tokens as consumed — see :mod:`ragrouter.paradigms.results`.

A QueryContext belongs to one query on one corpus index with one gateway and one config.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ragrouter.paradigms.results import Retrieval
from ragrouter.paradigms.retrievers import RETRIEVERS, GraphRetriever, NaiveRetriever
from ragrouter.paradigms.settings import Settings

STAGE = "answer"
EMBEDDER = "embedder"  # the gateway role that embeds queries and entities
EmbedFn = Callable[[Sequence[str]], np.ndarray]


class QueryContext:
    """Memo of one query's shared retrieval work (see the module docstring).

    Args:
        query_text: the question.
        index: the corpus' :class:`~ragrouter.paradigms.index.CorpusIndex`.
        gateway: the LLM gateway (``chat``/``embed``).
        config: a :class:`ragrouter.config.Config` or :class:`Settings`.
        query_vector: the query's stored embedding (skips embedding the query).
        embed_fn: ``texts -> (n, dim) float32`` for texts to embed; default: the gateway's
            ``embedder`` role (stage ``answer``, phase ``retrieval``).
    """

    def __init__(self, query_text: str, index, gateway, config, *, query_vector: np.ndarray | None = None,
                 embed_fn: EmbedFn | None = None):
        if not isinstance(query_text, str) or not query_text.strip():
            raise ValueError("QueryContext: query_text must be a non-empty string")
        self.query_text = query_text
        self.index = index
        self.gateway = gateway
        self.settings = config if isinstance(config, Settings) else Settings.from_config(config)
        self._embed_fn = embed_fn
        self._lock = threading.Lock()
        self._memo: dict[Hashable, Future] = {}
        self._given: dict[str, np.ndarray] = {}  # text -> a vector given, not embedded here
        self.computed: Counter[str] = Counter()  # what was actually computed (not served from the memo)
        self.naive = NaiveRetriever(index, self.settings)
        self.graph_retriever = GraphRetriever(index, self.settings)
        if query_vector is not None:
            vec = np.asarray(query_vector, dtype=np.float32).reshape(-1)
            if vec.shape[0] != index.dim:
                raise ValueError(f"QueryContext: query vector has dimension {vec.shape[0]}, "
                                 f"the corpus index has {index.dim}")
            self._given[query_text] = vec

    # ------------------------------------------------------------------ memo
    def _once(self, key: Hashable, kind: str, fn: Callable[[], Any]) -> Any:
        with self._lock:
            fut = self._memo.get(key)
            owner = fut is None
            if owner:
                fut = Future()
                self._memo[key] = fut
        if not owner:
            return fut.result()
        try:
            value = fn()
        except BaseException as exc:
            with self._lock:
                self._memo.pop(key, None)
            fut.set_exception(exc)
            raise
        with self._lock:
            self.computed[kind] += 1
        fut.set_result(value)
        return value

    # ------------------------------------------------------------------ embeddings
    def _embed(self, texts: list[str]) -> np.ndarray:
        if self._embed_fn is not None:
            out = np.asarray(self._embed_fn(texts), dtype=np.float32)
        else:
            out = np.asarray(self.gateway.embed(EMBEDDER, texts, stage=STAGE, phase="retrieval"), dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise ValueError(f"embedder returned shape {out.shape} for {len(texts)} texts")
        if out.shape[1] != self.index.dim:
            raise ValueError(f"embedder returned {out.shape[1]}-d vectors; the corpus index is {self.index.dim}-d "
                             "(chunk vectors and queries must come from the same embedder)")
        return out

    def vector(self, text: str) -> np.ndarray:
        """The embedding of ``text`` (memoised)."""
        return self.vectors([text])[0]

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts``: one embed call per distinct list of texts (deduplicated, in
        the caller's order), memoised by that list; the query's stored vector (``query_vector``)
        serves the query text alone.

        A text embedded before as part of *another* list is embedded again with this list: the
        requests then depend on the callers' lists alone, never on what this context happened to
        embed before, so a paradigm run sends the same embedding requests on one worker or
        four, in any order, and the ledger serves each list once across all of them. (Serving
        texts from earlier lists made the request set depend on the schedule: 22 extra ledger
        rows with 4 PostgreSQL workers at 10 % of the medical corpus, 82 at full scale;
        ``benchmarks/README.md``, issue 17.)"""
        texts = list(texts)
        batch = list(dict.fromkeys(texts))
        if not batch:
            return np.zeros((0, self.index.dim), dtype=np.float32)
        if len(batch) == 1 and batch[0] in self._given:
            vecs = self._given[batch[0]][None, :]
        else:
            vecs = self._once(("vecbatch", tuple(batch)), "embed", lambda: self._embed(batch))
        row = {t: i for i, t in enumerate(batch)}
        return np.vstack([vecs[row[t]] for t in texts])

    # ------------------------------------------------------------------ retrievals
    def dense(self, text: str) -> Retrieval:
        """NaiveRetriever's ranked list for ``text`` (memoised)."""
        return self._once(("naive", text), "naive", lambda: self.naive.retrieve(text, self.vector(text)))

    def graph(self, text: str, backend: str) -> Retrieval:
        """GraphRetriever's ranked list for ``text``, entities extracted by ``backend`` (memoised)."""
        return self._once(
            ("graph", backend, text), "graph",
            lambda: self.graph_retriever.retrieve(text, self.gateway, backend, self.vectors, stage=STAGE),
        )

    def retrieve(self, kind: str, text: str, backend: str) -> Retrieval:
        """The ranked list of the base retriever ``kind`` (``naive`` or ``graph``)."""
        if kind not in RETRIEVERS:
            raise ValueError(f"unknown retriever {kind!r}; known: {', '.join(RETRIEVERS)}")
        return self.dense(text) if kind == "naive" else self.graph(text, backend)


def embed_query(gateway, query_text: str) -> np.ndarray:
    """The embedding request a :class:`QueryContext` (no stored vector, no ``embed_fn``) sends
    for ``query_text`` alone — the dense retrieval's, and the graph's when it falls back to the
    question — made now. ``serve`` calls it speculatively while the router decides: the
    paradigm's own request then joins it in the gateway (same request hash: in flight, or
    cached), so no token is paid twice and the ledger row is the one the paradigm would write."""
    return gateway.embed(EMBEDDER, [query_text], stage=STAGE, phase="retrieval")


def make_context(query_text: str, provider, index, gateway, config) -> QueryContext:
    """The QueryContext a paradigm uses for ``provider`` (see :func:`ragrouter.paradigms.run`):
    a :class:`QueryContext` (checked to be for this query and index), a query vector, a
    callable ``texts -> vectors``, or ``None`` (embed through the gateway)."""
    if isinstance(provider, QueryContext):
        if provider.query_text != query_text:
            raise ValueError(f"QueryContext is for query {provider.query_text!r}, not {query_text!r}")
        if provider.index is not index:
            raise ValueError("QueryContext was built for another corpus index")
        if config is not None and provider.settings != (config if isinstance(config, Settings) else Settings.from_config(config)):
            raise ValueError("QueryContext was built with other paradigm settings than the config passed")
        return provider
    if provider is None:
        return QueryContext(query_text, index, gateway, config)
    if isinstance(provider, np.ndarray) or (isinstance(provider, (list, tuple)) and provider
                                            and isinstance(provider[0], (int, float))):
        return QueryContext(query_text, index, gateway, config, query_vector=np.asarray(provider, dtype=np.float32))
    if callable(provider):
        return QueryContext(query_text, index, gateway, config, embed_fn=provider)
    raise TypeError("query_vector_provider must be a QueryContext, a vector, a callable texts -> vectors, or None")
