"""Served questions and their runs written in batches (serve's group commit).

:func:`store_queries` and :func:`store_runs` write what :func:`ragrouter.answering.ask.store` writes for one
question — the query (origin ``serve``, status ``asked``), its paradigm run as the answer stage writes runs
(:meth:`ragrouter.stages.answer.AnswerStage.write`: the same row, the same
``(query, paradigm, generator, config hash)`` key, its ``run_calls`` links to the ledger) — for
many at once, in a handful of statements for the whole batch (one executemany of a prebuilt
INSERT per table, which SQLAlchemy's "insertmanyvalues" sends as multi-row INSERTs returning
the new ids, and a SELECT only for the rows that were there before) instead of five per question. Not ``insert().values(rows)``: a statement
with the rows in it is compiled again for every batch (it has no cache key): 32 runs and their
links took 23-26 ms of CPU that way on DuckDB, 11-13 ms as executemany
(``benchmarks/README.md``, "Serving under load"). Not ``sort_by_parameter_order``: the rows come
back keyed by their unique columns, and asking for the order makes SQLAlchemy send one
statement per row. A question asked again keeps its query
row and, for the same paradigm and configuration, its run (the first one's), as one by one.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql import insert

from ragrouter.answering import ask as ask_mod
from ragrouter.answering.ask import asked_external_id as external_id
from ragrouter.db import models

_Q, _R, _L = models.Query.__table__, models.ParadigmRun.__table__, models.RunCall.__table__
_INSERT_QUERY = (insert(_Q).on_conflict_do_nothing(index_elements=["corpus_id", "external_id"])
                 .returning(_Q.c.id, _Q.c.corpus_id, _Q.c.external_id))
_INSERT_RUN = (insert(_R).on_conflict_do_nothing(index_elements=["query_id", "paradigm", "generator", "config_hash"])
               .returning(_R.c.id, _R.c.query_id, _R.c.paradigm, _R.c.generator, _R.c.config_hash))
_INSERT_LINK = insert(_L)


def store_queries(conn, items: list[tuple], origin: str = "serve") -> list[int]:
    """``items``: (corpus id, :class:`ragrouter.answering.ask.Answer` routed, not yet answered). Writes
    the questions (a question asked before keeps its row) in the caller's transaction and
    returns their query ids. ``serve`` writes them while the paradigms run, so a reply waits
    only for its run (:func:`store_runs`)."""
    qrows: dict[tuple[int, str], dict] = {}
    for cid, out in items:
        ext = external_id(origin, out.question)
        qrows.setdefault((cid, ext), {
            "corpus_id": cid, "external_id": ext, "origin": origin, "qtype": out.query_type, "question": out.question,
            "answer": "", "status": "asked",
            "meta": {"router": out.router, "features": out.features, "probabilities": out.probabilities}})
    qids = {(c, e): i for i, c, e in conn.execute(_INSERT_QUERY, list(qrows.values())).all()}
    missing = sorted({ext for cid, ext in qrows if (cid, ext) not in qids})
    if missing:  # asked before: the first one's row
        Q = models.Query
        qids.update({(c, e): i for i, c, e in conn.execute(
            select(Q.id, Q.corpus_id, Q.external_id).where(Q.external_id.in_(bindparam("exts", expanding=True))),
            {"exts": missing}).all() if (c, e) in qrows})
    return [qids[(cid, external_id(origin, out.question))] for cid, out in items]


def store_runs(conn, config, items: list[tuple]) -> list[int | None]:
    """``items``: (query id from :func:`store_queries`, generator, :class:`ragrouter.answering.ask.Answer`,
    paradigm result or None[, the paradigms' Settings with a client's sampling, or None]).
    Writes the runs in the caller's transaction, sets each answer's ``run_id`` and returns the
    run ids (None for a question whose paradigm failed). A run made with a client's sampling
    has the config and hash of those settings (:func:`ragrouter.answering.ask.run_key`)."""
    runs: dict[tuple, dict] = {}
    calls: dict[tuple, list] = {}
    keys: list[tuple | None] = []
    for qid, generator, out, result, *rest in items:
        if result is None:
            keys.append(None)
            continue
        run_config, h = ask_mod.run_key(config, out.paradigm, generator, rest[0] if rest else None)
        key = (qid, out.paradigm, generator, h)
        keys.append(key)
        if key in runs:
            continue
        runs[key] = {"query_id": qid, "paradigm": out.paradigm, "generator": generator, "config_hash": h,
                     "config": run_config, "answer": result.answer,
                     "retrieved_chunk_ids": result.retrieved_chunk_ids, "context_tokens": result.context_tokens,
                     "iterations": result.iterations, "trace": result.trace, "ret_in_tokens": result.ret_in,
                     "ret_out_tokens": result.ret_out, "gen_in_tokens": result.gen_in,
                     "gen_out_tokens": result.gen_out, "latency_s": float(result.trace.get("wall_s", 0.0))}
        calls[key] = list(result.calls or [])
    run_ids: dict[tuple, int] = {}
    if runs:
        R = models.ParadigmRun
        inserted = conn.execute(_INSERT_RUN, list(runs.values())).all()
        new = {(q, p, g, h): i for i, q, p, g, h in inserted}
        links = [{"run_id": rid, "seq": i, "llm_call_id": call_id, "phase": phase}
                 for key, rid in new.items() for i, (call_id, phase) in enumerate(calls[key])]
        if links:
            conn.execute(_INSERT_LINK, links)
        run_ids.update(new)
        missing = [k for k in runs if k not in run_ids]  # asked before: the run is the first one's
        if missing:
            for i, q, p, g, h in conn.execute(
                    select(R.id, R.query_id, R.paradigm, R.generator, R.config_hash)
                    .where(R.query_id.in_(bindparam("qids", expanding=True))),
                    {"qids": sorted({k[0] for k in missing})}).all():
                run_ids.setdefault((q, p, g, h), i)
    out_ids = []
    for (_, _, out, *_), key in zip(items, keys):
        out.run_id = run_ids.get(key) if key is not None else None
        out_ids.append(out.run_id)
    return out_ids
