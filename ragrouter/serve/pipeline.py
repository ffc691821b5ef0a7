"""What ``serve`` does once for many concurrent requests: micro-batches on a background thread.

A :class:`Batcher` takes items from any number of request threads and hands them to one
function in batches, on its own thread: whatever has queued while the previous batch ran
forms the next one (no waiting window, so an idle server adds no latency; under load the
batches grow by themselves). Two are used:

* :func:`router_batcher` — the question's type for the router's Q features (one MiniLM forward
  pass over every question waiting instead of one per question: a batch of 32 costs a few
  times one question's pass, not 32 times; then the nearest type centroid of each) and the
  router's probabilities (one call of the MLflow model per corpus and batch);
* :func:`query_writer` — the served questions, written as soon as they are routed (while
  their paradigms run): every question waiting in one transaction;
* :func:`store_writer` — the served runs: every run waiting is written in one transaction
  (group commit) with one multi-row statement per table (:mod:`ragrouter.serve.store`),
  together with the gateway's ledger rows they point to, instead of a transaction of five
  statements per request on DuckDB's one connection. Each caller still waits for its own row
  to be committed, so a reply is only sent once its run is stored.

When a batch fails, its items are retried one by one, so one bad item fails alone.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from ragrouter.answering.question_type import guess
from ragrouter.db.engine import write_lock

_STOP = object()


class Batcher:
    """``fn(items) -> results`` (one result per item, same order) on a background thread."""

    def __init__(self, fn: Callable[[Sequence[Any]], Sequence[Any]], *, max_batch: int = 64, name: str = "batcher"):
        self.fn, self.max_batch = fn, int(max_batch)
        self.batches = 0
        self.items = 0
        self._q: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, item) -> Future:
        fut: Future = Future()
        self._q.put((item, fut))
        return fut

    def __call__(self, item):
        return self.submit(item).result()

    def close(self, timeout: float | None = 30.0) -> None:
        """Finish what is queued, then stop the thread."""
        self._q.put(_STOP)
        self._thread.join(timeout)

    def _loop(self) -> None:
        stop = False
        while not stop:
            first = self._q.get()
            if first is _STOP:
                return
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            self._run(batch)

    def _run(self, batch: list) -> None:
        self.batches += 1
        self.items += len(batch)
        try:
            results = list(self.fn([item for item, _ in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"batch function returned {len(results)} results for {len(batch)} items")
        except BaseException as exc:  # noqa: BLE001 - handed to the callers
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            for one in batch:  # one bad item must not fail the others
                self._run([one])
            return
        for (_, fut), res in zip(batch, results):
            fut.set_result(res)


def router_batcher(engine, config, encoder, services, router: str | None = None, max_batch: int = 64) -> Batcher:
    """A batcher: (corpus, router run id, question, query type or None) -> the router's verdict
    (:class:`ragrouter.answering.ask.Routed`). The questions without a type get theirs from one MiniLM
    pass over all of them (nearest centroid of the store's labelled questions, read and encoded
    here, once; ``encoder`` None: the store has none, the client must send the type); then each
    corpus' router is called once for all its questions (:func:`ragrouter.answering.ask.route_many`)."""
    import numpy as np

    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import ask as ask_mod

    centroids = ask_mod.query_type_centroids(engine, encoder, memo=True) if encoder is not None else {}

    def route(items):
        items = list(items)
        types = [t for _, _, _, t in items]
        need = [i for i, t in enumerate(types) if t is None]
        if need:
            vecs = np.asarray(encoder.encode([items[i][2] for i in need]), dtype=np.float64)
            for i, v in zip(need, vecs):
                types[i] = guess(items[i][2], v, centroids)[0]  # the same rule as ask's
        out: list = [None] * len(items)
        groups: dict[tuple, list[int]] = {}
        for i, (corpus, run_id, _, _) in enumerate(items):
            groups.setdefault((corpus, run_id), []).append(i)
        for (corpus, run_id), idx in groups.items():
            routed = ask_mod.route_many(engine, config, corpus, [items[i][2] for i in idx], [types[i] for i in idx],
                                        router, services=services, run_id=run_id, memo=True)
            for i, r in zip(idx, routed):
                out[i] = r
        return out

    batcher = Batcher(route, max_batch=max_batch, name="serve-router")
    batcher.types = tuple(sorted(centroids))
    return batcher


def query_writer(engine, max_batch: int = 64) -> Batcher:
    """A batcher: (corpus id, routed Answer) -> the question's query id, the questions waiting
    written together (:func:`ragrouter.serve.store.store_queries`) in one transaction under the
    store's write lock. ``serve`` submits each question once it is routed, so the write is done
    while its paradigm runs."""
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.serve.store import store_queries

    def write(items):
        with write_lock(engine), engine.begin() as conn:
            return store_queries(conn, list(items))

    return Batcher(write, max_batch=max_batch, name="serve-query-writer")


def store_writer(config, gateway, max_batch: int = 64) -> Batcher:
    """A batcher: (query id, generator, Answer, paradigm result or None) -> the stored run's
    id, written together (:func:`ragrouter.serve.store.store_runs`) in the transaction that
    commits the gateway's queued ledger rows, which the runs' ``run_calls`` point at
    (:meth:`ragrouter.llm.gateway.Gateway.commit_with`: one commit, not a ledger flush and then
    one of its own)."""
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.serve.store import store_runs

    def write(items):
        return gateway.commit_with(lambda conn: store_runs(conn, config, list(items)))

    return Batcher(write, max_batch=max_batch, name="serve-store-writer")
