"""What answering one new question looks up in the store (``ask``, ``serve``, ``routers
promote``), in one place: a corpus' id, indicators and retrieval state, the labelled questions,
the trained routers and their fallbacks, and the questions asked so far.

Every function takes an engine (or, for the index, a connection) and returns plain Python
values; none writes. The SQL reads the same views the benchmark tables read
(``v_corpus_profile``, ``v_router_scores``), so `ask` and the report agree.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from ragrouter.db.values import json_value
from ragrouter.stages import storeio
from ragrouter.stages.answer import load_index

# router-dataset indicator → v_corpus_profile column
INDICATOR_COLUMNS = {"lcc_ratio": "lcc_ratio", "density": "density", "clustering": "clustering",
                     "intrinsic_dim": "intrinsic_dim", "hubness": "hubness", "avg_distance": "dist_mean"}


class ReadError(LookupError):
    """What a reader needs is not in the store."""


def corpus_id(engine: Engine, corpus: str) -> int:
    """``corpora.id`` of ``corpus`` (a ScopeError naming the ingest command when unknown)."""
    with engine.connect() as conn:
        return storeio.corpus_ids(conn, corpus)[0][0]


def corpus_indicators(engine: Engine, corpus: str) -> list[float] | None:
    """The six router indicators of ``corpus`` in ``routers.dataset.INDICATORS`` order (an
    undefined one is 0, as in training: a corpus whose graph is empty has no LCC ratio, density
    or clustering), or None when the metrics stage has not run (no metric of the corpus at all)."""
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.routers.dataset import INDICATORS

    with engine.connect() as conn:
        prof = conn.execute(text("SELECT * FROM v_corpus_profile WHERE corpus = :n"), {"n": corpus}).mappings().first()
    if prof is None or all(prof.get(c) is None for c in ("nodes", "hubness")):
        return None
    return [float(prof[INDICATOR_COLUMNS[k]]) if prof[INDICATOR_COLUMNS[k]] is not None else 0.0 for k in INDICATORS]


def labelled_questions(engine: Engine) -> list[tuple[str, str]]:
    """(query type, question) of every accepted question."""
    with engine.connect() as conn:
        return [(r[0], r[1]) for r in conn.execute(text("SELECT qtype, question FROM queries WHERE status = 'accepted'"))]


def trained_routers(engine: Engine, generator: str) -> list[dict]:
    """This store's trained routers for ``generator`` (rows of ``v_router_scores`` with fold
    metrics and an MLflow run)."""
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(text(
            "SELECT router, features, encoder, mlflow_run_id, correct_rate, routing_accuracy, macro_f1 "
            "FROM v_router_scores WHERE dataset = 'store' AND generator = :g AND routing_accuracy IS NOT NULL "
            "AND mlflow_run_id IS NOT NULL"), {"g": generator}).mappings()]


def router_fallback(engine: Engine, run_id: str) -> str | None:
    """The paradigm a ``cannot_answer`` prediction of the router of ``run_id`` runs: the most
    frequent optimal paradigm of its training labels (every CV prediction's true label is a
    training label of the refitted router; ties alphabetical) — the rule of
    ``routers.evaluate.fallback_paradigm``."""
    with engine.connect() as conn:
        row = conn.execute(text(
            "SELECT true_label FROM router_predictions WHERE mlflow_run_id = :r AND true_label NOT IN ('cannot_answer', 'unanswerable') "
            "GROUP BY true_label ORDER BY COUNT(*) DESC, true_label LIMIT 1"), {"r": run_id}).first()
    return None if row is None else str(row[0])


def expected_tokens(engine: Engine, corpus_id: int, generator: str) -> dict[str, float]:
    """Mean tokens per run of each paradigm on the corpus (its recorded runs)."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.paradigm, AVG(r.ret_in_tokens + r.ret_out_tokens + r.gen_in_tokens + r.gen_out_tokens) "
            "FROM paradigm_runs r JOIN queries q ON q.id = r.query_id WHERE q.corpus_id = :c AND r.generator = :g "
            "GROUP BY r.paradigm"), {"c": corpus_id, "g": generator}).all()
    return {r[0]: float(r[1]) for r in rows}


def corpus_index(conn: Connection, corpus_id: int, corpus: str, config):
    """The corpus' retrieval state (chunks, vectors, graph) as the answer stage reads it."""
    return load_index(conn, corpus_id, corpus, config)


def router_cv_probabilities(engine: Engine, run_id: str) -> list[dict[str, float]]:
    """The class probabilities of every cross-validated prediction of the router of ``run_id``
    on this store's labelled queries (``router_predictions``): what ``serve --cost-share``
    calibrates its threshold on."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT probabilities FROM router_predictions WHERE mlflow_run_id = :r "
                                 "AND probabilities IS NOT NULL ORDER BY query_key"), {"r": run_id}).all()
    out = []
    for (p,) in rows:
        p = json_value(p)
        out.append({str(k): float(v) for k, v in dict(p).items()})
    return out


ASKED_PREFIX = "asked-"  # the id a questions file gives an asked question (``corpus asked``)


def asked_questions(engine: Engine, corpus: str, include_ingested: bool = False) -> list[dict]:
    """The questions asked of ``corpus`` through ``ask`` and ``serve`` (status 'asked': no gold
    answer, out of the benchmark), oldest first, one per question text (a question asked through
    both is one record, ``origins`` in the order first asked), each with its latest stored answer
    (paradigm, generator, answer; None when no run was stored, e.g. its paradigm failed) and the
    router's probabilities of that answer. A question whose ``asked-<hash>`` id was ingested
    since (``corpus asked`` wrote it, a person answered it) is left out unless
    ``include_ingested``."""
    cid = corpus_id(engine, corpus)
    with engine.connect() as conn:
        asked = conn.execute(text(
            "SELECT id, origin, external_id, question, qtype, meta, created_at FROM queries "
            "WHERE corpus_id = :c AND status = 'asked' ORDER BY created_at, id"), {"c": cid}).all()
        runs = conn.execute(text(
            "SELECT r.query_id, r.paradigm, r.generator, r.answer FROM paradigm_runs r "
            "JOIN queries q ON q.id = r.query_id WHERE q.corpus_id = :c AND q.status = 'asked' "
            "ORDER BY r.created_at, r.id"), {"c": cid}).all()
        ingested = {r[0] for r in conn.execute(text(
            "SELECT external_id FROM queries WHERE corpus_id = :c AND status <> 'asked' "
            "AND substr(external_id, 1, :n) = :p"), {"c": cid, "n": len(ASKED_PREFIX), "p": ASKED_PREFIX})}
    by_query: dict[int, dict] = {}
    out: dict[str, dict] = {}
    for qid, origin, ext, question, qtype, meta, at in asked:
        new_id = ASKED_PREFIX + ext.split(":", 1)[-1]  # <origin>:<hash> (ask.asked_external_id)
        if new_id in ingested and not include_ingested:
            continue
        rec = out.setdefault(new_id, {"id": new_id, "question": question, "type": qtype, "asked_at": str(at),
                                      "origins": [], "query_ids": [], "router": None, "probabilities": None,
                                      "paradigm": None, "generator": None, "answer": None})
        rec["origins"].append(origin)
        rec["query_ids"].append(int(qid))
        by_query[int(qid)] = (rec, json_value(meta) or {})
    for qid, paradigm, generator, answer in runs:  # oldest first: the latest run wins
        if int(qid) in by_query:
            rec, meta = by_query[int(qid)]
            rec.update(paradigm=paradigm, generator=generator, answer=answer, router=meta.get("router"),
                       probabilities=meta.get("probabilities"))
    for qid, (rec, meta) in by_query.items():  # a question with no run: the router's view of its first ask
        if rec["router"] is None and rec["query_ids"][0] == qid:
            rec.update(router=meta.get("router"), probabilities=meta.get("probabilities"))
    return list(out.values())
