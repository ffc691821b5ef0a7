"""What a reviewer reads: a seeded stratified sample of judged runs or generated queries.

Judged runs are the current runs (``v_run_latest``) of accepted questions with one judge's
majority verdict (``v_judgment``), stratified by paradigm, query type (a question marked
unanswerable is its own stratum, ``<type>/unanswerable``) and the judge's verdict. Generated
queries are stratified by query type and the checks' outcome (status). Strata take turns in a
seeded order, each giving its next item in a seeded order, so a small sample covers every
stratum before any stratum gives two, and the same seed draws the same items.
"""

from __future__ import annotations

import random
from collections import defaultdict

from sqlalchemy import text
from sqlalchemy.engine import Engine

from ragrouter.db.values import json_value


class SampleError(ValueError):
    """Nothing to review (no judged runs, no generated queries, an unknown judge)."""


def stratified(items: list[dict], key, n: int, seed: int) -> list[dict]:
    """``n`` items, strata taking turns (see module docstring); ``key(item)`` is the stratum."""
    rng = random.Random(seed)
    groups: dict = defaultdict(list)
    for it in items:
        groups[key(it)].append(it)
    order = sorted(groups)
    rng.shuffle(order)
    for g in order:
        groups[g].sort(key=lambda it: it["id_key"])
        rng.shuffle(groups[g])
    out: list[dict] = []
    while len(out) < n and any(groups[g] for g in order):
        for g in order:
            if groups[g] and len(out) < n:
                out.append(groups[g].pop())
    return out


def judges(engine: Engine) -> list[tuple[str, int]]:
    """(judge key, judged runs) of the store, most runs first."""
    with engine.connect() as conn:
        return [(r[0], int(r[1])) for r in conn.execute(text(
            "SELECT judge, COUNT(*) FROM v_judgment GROUP BY judge ORDER BY COUNT(*) DESC, judge"))]


def judged_runs(engine: Engine, corpus: str | None, judge: str | None) -> tuple[str, list[dict]]:
    """(judge, every current judged run of an accepted question: question, gold answer,
    answer, tokens, the judge's verdict and reason, the retrieved chunks' texts)."""
    known = judges(engine)
    if not known:
        raise SampleError("no judged runs in the store: run 'python cli.py run --stage answer --stage judge' first")
    if judge is None:
        judge = known[0][0]
    elif judge not in {k for k, _ in known}:
        raise SampleError(f"judge {judge!r} has no verdicts in the store (known: {', '.join(k for k, _ in known)})")
    sql = ("SELECT r.id AS run_id, q.id AS query_id, c.name AS corpus, r.paradigm, r.generator, q.qtype, "
           "COALESCE(q.unanswerable, FALSE) AS unanswerable, q.question, q.answer AS gold_answer, r.answer, "
           "r.retrieved_chunk_ids, r.context_tokens, r.ret_in_tokens, r.ret_out_tokens, r.gen_in_tokens, "
           "r.gen_out_tokens, j.label AS judge_label, EXISTS (SELECT 1 FROM judgments m WHERE m.run_id = r.id "
           "AND m.judge = j.judge AND m.review IS NOT NULL) AS needs_review "
           "FROM v_judgment j JOIN v_run_latest l ON l.run_id = j.run_id JOIN paradigm_runs r ON r.id = j.run_id "
           "JOIN queries q ON q.id = r.query_id JOIN corpora c ON c.id = q.corpus_id "
           "WHERE j.judge = :j AND q.status = 'accepted'" + (" AND c.name = :c" if corpus else "") +
           " ORDER BY r.id")
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(text(sql), {"j": judge, "c": corpus}).mappings()]
    if not rows:
        raise SampleError(f"no runs of accepted questions judged by {judge}" + (f" in corpus {corpus!r}" if corpus else ""))
    for r in rows:
        r["unanswerable"] = bool(r["unanswerable"])
        r["needs_review"] = bool(r["needs_review"])  # a rule left its verdict to a person (judgments.review)
        r["id_key"] = int(r["run_id"])
    return judge, rows


def attach_details(engine: Engine, judge: str, items: list[dict]) -> None:
    """The judge's reason (its first sample with the majority label) and the retrieved chunks
    (id, document, text, in context order) of the sampled runs, in place."""
    if not items:
        return
    with engine.connect() as conn:
        for it in items:
            it["judge_reason"] = conn.execute(text(
                "SELECT reason FROM judgments WHERE run_id = :r AND judge = :j AND label = :l AND NOT is_calibration "
                "ORDER BY sample_index LIMIT 1"), {"r": it["run_id"], "j": judge, "l": it["judge_label"]}).scalar()
            ids = [int(x) for x in (json_value(it["retrieved_chunk_ids"]) or [])]
            texts = {}
            if ids:
                texts = {int(r[0]): (r[1], r[2]) for r in conn.execute(text(
                    "SELECT k.id, d.external_id, k.text FROM chunks k JOIN documents d ON d.id = k.document_id "
                    f"WHERE k.id IN ({', '.join(str(i) for i in ids)})"))}
            it["chunks"] = [{"chunk_id": i, "document": texts[i][0], "text": texts[i][1]} for i in ids if i in texts]


def sample_runs(engine: Engine, corpus: str | None, n: int, seed: int, judge: str | None = None,
                prefer_changing: bool = False) -> tuple[str, list[dict]]:
    """(judge, ``n`` judged runs stratified by paradigm, query type and verdict). The runs whose
    verdict a rule left to a person (``judgments.review``: the figures rule abstained) are drawn
    first, each item says ``needs_review``. With ``prefer_changing`` the runs whose flip (correct
    <-> not correct) would change their query's oracle label (``ragrouter.review.changing``) are
    drawn next, stratified the same way, and the rest of the sample from the others; each item
    says ``changes_oracle``."""
    judge, rows = judged_runs(engine, corpus, judge)
    key = lambda r: (r["paradigm"], r["qtype"] + ("/unanswerable" if r["unanswerable"] else ""),  # noqa: E731
                     r["judge_label"])
    changing = {}
    if prefer_changing:
        # deferred (start-up): pulls in pandas
        from ragrouter.review.changing import oracle_changing_runs

        changing = oracle_changing_runs(engine, judge)
    for r in rows:
        r["changes_oracle"] = int(r["run_id"]) in changing
    # the runs a rule left to a person (the figures rule abstained) come first, then those whose
    # flip changes an oracle label, then the rest
    marked = [r for r in rows if r["needs_review"]]
    picked = stratified(marked, key, n, seed)
    first = [r for r in rows if r["changes_oracle"] and not r["needs_review"]]
    picked += stratified(first, key, n - len(picked), seed)
    picked += stratified([r for r in rows if not r["changes_oracle"] and not r["needs_review"]], key, n - len(picked),
                         seed)
    attach_details(engine, judge, picked)
    return judge, picked


def sample_queries(engine: Engine, corpus: str | None, n: int, seed: int) -> list[dict]:
    """``n`` generated queries whose checks are in (accepted or rejected; the checks' status
    even where a reviewer's verdict replaced it), stratified by query type and outcome, with the chain they were built from (``queries.meta``: documents, bridges,
    descriptions, steps), their supporting chunks and every check's verdict."""
    sql = ("SELECT q.id AS query_id, c.name AS corpus, q.qtype, q.hops, q.question, q.answer AS gold_answer, "
           "COALESCE(q.meta ->> 'checks_status', q.status) AS status, q.generator_model, q.meta, "
           "q.supporting_doc_ids, q.supporting_chunk_ids "
           "FROM queries q JOIN corpora c ON c.id = q.corpus_id "
           "WHERE q.origin IN ('generated', 'human-reviewed') "
           "AND COALESCE(q.meta ->> 'checks_status', q.status) IN ('accepted', 'rejected')" +
           (" AND c.name = :c" if corpus else "") + " ORDER BY q.id")
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(text(sql), {"c": corpus}).mappings()]
        if not rows:
            raise SampleError("no generated queries with their checks in the store" + (f" for corpus {corpus!r}" if corpus else "")
                              + ": run 'python cli.py run --stage querygen --stage validate' first")
        for r in rows:
            r["id_key"] = int(r["query_id"])
        picked = stratified(rows, lambda r: (r["qtype"], r["status"]), n, seed)
        for it in picked:
            it["meta"] = json_value(it["meta"]) or {}
            it["checks"] = [{"check": r[0], "model": r[1], "passed": bool(r[2]), "evidence": json_value(r[3])}
                            for r in conn.execute(text(
                                "SELECT check_name, model, passed, evidence FROM query_checks WHERE query_id = :q "
                                "ORDER BY check_name, model"), {"q": it["query_id"]})]
            ids = [int(x) for x in (json_value(it["supporting_chunk_ids"]) or []) if str(x).lstrip("-").isdigit()]
            it["chunks"] = []
            if ids:
                it["chunks"] = [{"chunk_id": int(r[0]), "document": r[1], "text": r[2]} for r in conn.execute(text(
                    "SELECT k.id, d.external_id, k.text FROM chunks k JOIN documents d ON d.id = k.document_id "
                    f"WHERE k.id IN ({', '.join(str(i) for i in ids)}) ORDER BY k.id"))]
    return picked
